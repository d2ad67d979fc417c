#include "passes/Training.h"

#include "ir/GradRules.h"
#include "passes/Autodiff.h"
#include "support/Diagnostics.h"

namespace gsl::passes {

using namespace ir;

namespace {

// The sharding of `s` with dim `d` removed.
std::optional<Sharding> dropDim(const std::optional<Sharding>& s, int d) {
  if (!s) return s;
  Sharding r = *s;
  r.dims.erase(r.dims.begin() + d);
  return r;
}

Value* meanOver(GradBuilder& b, Value* v, int64_t axis, bool keepdims) {
  AttrMap at;
  at.set("axis", std::vector<int64_t>{axis});
  at.set("keepdims", keepdims);
  return b.op(OpKind::Mean, {v}, at);
}

struct Expander {
  const Module& m;
  Function& f;
  GradBuilder b{f};
  std::vector<Value*> newParams, newStates;
  std::vector<std::optional<Sharding>> stateShardings;

  Value* paramValue(const Param& p) {
    for (auto& op : f.ops)
      if (op->kind == OpKind::Param && op->attrs.getString("name") == p.name) return op->result;
    AttrMap at;
    at.set("name", p.name);
    Op* op = f.append(OpKind::Param, {}, at, p.type);
    op->result->sharding = p.sharding;
    return op->result;
  }

  Value* state(const Param& p, const std::string& slot, const TensorType& t, const std::optional<Sharding>& s) {
    Value* a = f.addArg(t);
    a->sharding = s;
    f.train->states.push_back({p.name, slot, t});
    stateShardings.push_back(s);
    return a;
  }

  // p - lr * u
  Value* step(Value* p, double lr, Value* u) { return b.sub(p, b.mul(b.scalar(lr), u)); }

  void sgd(const Optimizer& o, const Param& p, Value* g) {
    Value* pv = paramValue(p);
    double mom = o.hp.at("momentum"), lr = o.hp.at("lr");
    if (mom == 0) {
      newParams.push_back(step(pv, lr, g));
      return;
    }
    Value* v = state(p, "velocity", p.type, p.sharding);
    Value* v2 = b.add(b.mul(b.scalar(mom), v), g);
    newParams.push_back(step(pv, lr, v2));
    newStates.push_back(v2);
  }

  void adam(const Optimizer& o, const Param& p, Value* g, Value* t) {
    double b1 = o.hp.at("beta1"), b2 = o.hp.at("beta2"), eps = o.hp.at("eps"), lr = o.hp.at("lr");
    Value* pv = paramValue(p);
    Value* mv = state(p, "m", p.type, p.sharding);
    Value* vv = state(p, "v", p.type, p.sharding);
    Value* m2 = b.add(b.mul(b.scalar(b1), mv), b.mul(b.scalar(1 - b1), g));
    Value* v2 = b.add(b.mul(b.scalar(b2), vv), b.mul(b.scalar(1 - b2), b.mul(g, g)));
    Value* tf = b.cast(t, DType::F32);
    Value* bc1 = b.sub(b.scalar(1.0), b.op(OpKind::Pow, {b.scalar(b1), tf}));
    Value* bc2 = b.sub(b.scalar(1.0), b.op(OpKind::Pow, {b.scalar(b2), tf}));
    Value* mhat = b.div(m2, bc1);
    Value* denom = b.add(b.op(OpKind::Sqrt, {b.div(v2, bc2)}), b.scalar(eps));
    newParams.push_back(step(pv, lr, b.div(mhat, denom)));
    newStates.push_back(m2);
    newStates.push_back(v2);
  }

  void adafactor(const Optimizer& o, const Param& p, Value* g, Value* t) {
    double decay = o.hp.at("decay"), eps = o.hp.at("eps"), clip = o.hp.at("clip"), lr = o.hp.at("lr");
    Value* pv = paramValue(p);
    Value* tf = b.cast(t, DType::F32);
    // beta2_t = 1 - t^-decay (0 at the first step: the first estimate is the
    // gradient's own second moment).
    Value* beta = b.sub(b.scalar(1.0), b.op(OpKind::Pow, {tf, b.scalar(-decay)}));
    Value* keep = b.sub(b.scalar(1.0), beta);
    Value* g2 = b.add(b.mul(g, g), b.scalar(eps));
    Value* u;
    int r = p.type.rank();
    if (r >= 2) {
      Shape rs = p.type.shape, cs = p.type.shape;
      rs.erase(rs.end() - 1);
      cs.erase(cs.end() - 2);
      Value* R = state(p, "row", {DType::F32, rs}, dropDim(p.sharding, r - 1));
      Value* C = state(p, "col", {DType::F32, cs}, dropDim(p.sharding, r - 2));
      Value* R2 = b.add(b.mul(beta, R), b.mul(keep, meanOver(b, g2, r - 1, false)));
      Value* C2 = b.add(b.mul(beta, C), b.mul(keep, meanOver(b, g2, r - 2, false)));
      Shape rowShape = rs, colShape = cs, normShape = rs;
      rowShape.push_back(1);                   // [..., n, 1]
      colShape.insert(colShape.end() - 1, 1);  // [..., 1, m]
      normShape.back() = 1;
      normShape.push_back(1);                  // [..., 1, 1]
      Value* rowMean = b.reshape(meanOver(b, R2, r - 2, true), normShape);
      Value* V = b.div(b.mul(b.reshape(R2, rowShape), b.reshape(C2, colShape)), rowMean);
      u = b.mul(g, b.op(OpKind::Rsqrt, {V}));
      newStates.push_back(R2);
      newStates.push_back(C2);
    } else {
      Value* V = state(p, "v", p.type, p.sharding);
      Value* V2 = b.add(b.mul(beta, V), b.mul(keep, g2));
      u = b.mul(g, b.op(OpKind::Rsqrt, {V2}));
      newStates.push_back(V2);
    }
    // Update clipping: divide by max(1, RMS(u) / clip).
    AttrMap all;
    Value* rms = b.op(OpKind::Sqrt, {b.op(OpKind::Mean, {b.mul(u, u)}, all)});
    Value* scale = b.op(OpKind::Maximum, {b.scalar(1.0), b.div(rms, b.scalar(clip))});
    newParams.push_back(step(pv, lr, b.div(u, scale)));
  }

  void run() {
    TrainRequest& tr = *f.train;
    GSL_ASSERT(f.results.size() == 1, "training thunk must return the loss only");
    Value* loss = f.results[0];
    Gradients grads = appendGradient(m, f, loss, tr.params, false);
    if (tr.kind == TrainRequest::Grad) {
      f.results = grads.params;
      f.resultShardings.clear();
      for (const auto& name : tr.params) f.resultShardings.push_back(m.findParam(name)->sharding);
      tr.expanded = true;
      return;
    }
    const Optimizer* o = m.findOptimizer(tr.optimizer);
    GSL_ASSERT(o, "unknown optimizer '" + tr.optimizer + "'");
    Value* t = f.addArg({DType::I32, {}});
    for (size_t i = 0; i < tr.params.size(); ++i) {
      const Param& p = *m.findParam(tr.params[i]);
      switch (o->kind) {
        case Optimizer::SGD: sgd(*o, p, grads.params[i]); break;
        case Optimizer::Adam: adam(*o, p, grads.params[i], t); break;
        case Optimizer::Adafactor: adafactor(*o, p, grads.params[i], t); break;
      }
    }
    f.results = {loss};
    f.resultShardings = {std::nullopt};
    for (size_t i = 0; i < tr.params.size(); ++i) {
      f.results.push_back(newParams[i]);
      f.resultShardings.push_back(m.findParam(tr.params[i])->sharding);
    }
    for (size_t i = 0; i < newStates.size(); ++i) {
      f.results.push_back(newStates[i]);
      f.resultShardings.push_back(stateShardings[i]);
    }
    tr.expanded = true;
  }
};

}  // namespace

void expandTraining(Module& m) {
  for (auto& f : m.functions)
    if (f->train && !f->train->expanded) {
      Expander e{m, *f};
      e.run();
    }
}

}  // namespace gsl::passes
