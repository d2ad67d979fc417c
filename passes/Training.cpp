#include "passes/Training.h"

#include <algorithm>
#include <cmath>
#include <map>

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
  Value* lr = nullptr;           // a scheduled learning rate (host scalar)
  double constLr = 0;            // else the constant one
  Value* decayRate = nullptr;    // decoupled weight decay: lr * weight_decay
  Value* adamStepSize = nullptr, *adamBc2Sqrt = nullptr;
  Value* adafactorBeta = nullptr, *adafactorKeep = nullptr;

  Value* paramRead(const Param& p) {
    for (auto& op : f.ops)
      if (op->kind == OpKind::Param && op->attrs.getString("name") == p.name) return op->result;
    AttrMap at;
    at.set("name", p.name);
    Op* op = f.append(OpKind::Param, {}, at, p.type);
    op->result->sharding = p.sharding;
    return op->result;
  }

  // The update's own view of a value of param p's update (`role` "grad":
  // its gradient, "param": its value, "new": its new value): a copy marked
  // {update = role, param = name}, which passes/UpdateSharding gives the
  // sharding of the update (weight-update sharding) or removes.
  Value* mark(Value* v, const char* role, const Param& p) {
    AttrMap at;
    at.set("update", std::string(role));
    at.set("param", p.name);
    return f.append(OpKind::Copy, {v}, at, v->type)->result;
  }
  Value* paramValue(const Param& p) { return mark(paramRead(p), "param", p); }

  Value* state(const Param& p, const std::string& slot, const TensorType& t, const std::optional<Sharding>& s) {
    Value* a = f.addArg(t);
    a->sharding = s;
    f.names.addCallPath(a, f.train->optimizer + "." + slot + "(" + p.name + ")");  // the REPL's opt.m(w)
    f.train->states.push_back({p.name, slot, t});
    stateShardings.push_back(s);
    return a;
  }

  // An f32 scalar the host computes for each step (stepScalars).
  Value* hostScalar(TrainRequest::Scalar s) {
    f.train->scalars.push_back(s);
    return f.addArg({DType::F32, {}});
  }

  // p - lr * u
  Value* step(Value* p, Value* rate, Value* u) { return b.sub(p, b.mul(rate, u)); }
  Value* rate() { return lr ? lr : b.scalar(constLr); }

  // AdamW / Adafactor: p - lr * weight_decay * p, before the update (as
  // p * (1 - lr wd), but 1 - lr wd rounded to f32 would shift p by up to
  // 3e-8 relative in the same direction at every step).
  Value* decayed(Value* p) { return decayRate ? b.sub(p, b.mul(decayRate, p)) : p; }

  // L2 weight decay (SGD, Adam): g + weight_decay * p, as torch.optim does.
  Value* l2(const Optimizer& o, Value* p, Value* g) {
    double wd = o.hp.count("weight_decay") ? o.hp.at("weight_decay") : 0;
    return wd == 0 ? g : b.add(g, b.mul(b.scalar(wd), p));
  }

  void sgd(const Optimizer& o, const Param& p, Value* g) {
    Value* pv = paramValue(p);
    double mom = o.hp.at("momentum");
    g = l2(o, pv, g);
    if (mom == 0) {
      newParams.push_back(step(pv, rate(), g));
      return;
    }
    Value* v = state(p, "velocity", p.type, p.sharding);
    Value* v2 = b.add(b.mul(b.scalar(mom), v), g);
    newParams.push_back(step(pv, rate(), v2));
    newStates.push_back(v2);
  }

  // torch.optim.Adam / AdamW: the bias corrections come from the host in
  // double (step size lr / (1 - beta1^t) and sqrt(1 - beta2^t)), rounded
  // once to f32, so beta2 close to 1 loses nothing.
  void adam(const Optimizer& o, const Param& p, Value* g) {
    double b1 = o.hp.at("beta1"), b2 = o.hp.at("beta2"), eps = o.hp.at("eps");
    Value* pv = paramValue(p);
    Value* mv = state(p, "m", p.type, p.sharding);
    Value* vv = state(p, "v", p.type, p.sharding);
    if (o.kind == Optimizer::Adam) g = l2(o, pv, g);
    Value* m2 = b.add(b.mul(b.scalar(b1), mv), b.mul(b.scalar(1 - b1), g));
    Value* v2 = b.add(b.mul(b.scalar(b2), vv), b.mul(b.scalar(1 - b2), b.mul(g, g)));
    Value* denom = b.add(b.div(b.op(OpKind::Sqrt, {v2}), adamBc2Sqrt), b.scalar(eps));
    newParams.push_back(step(decayed(pv), adamStepSize, b.div(m2, denom)));
    newStates.push_back(m2);
    newStates.push_back(v2);
  }

  // beta2_t = 1 - t^-decay (0 at the first step: the first estimate is the
  // gradient's own second moment) and 1 - beta2_t, both from the host in
  // double (in f32, 1 - (1 - t^-decay) loses t^-decay's low bits).
  void adafactor(const Optimizer& o, const Param& p, Value* g) {
    double eps = o.hp.at("eps"), clip = o.hp.at("clip");
    Value* pv = paramValue(p);
    Value* beta = adafactorBeta;
    Value* keep = adafactorKeep;
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
    newParams.push_back(step(decayed(pv), rate(), b.div(u, scale)));
  }

  // Global-norm clipping (torch.nn.utils.clip_grad_norm_): every gradient
  // times min(1, clip_norm / (||g|| + 1e-6)), ||g|| over all the step's
  // params. Written on the global program: for sharded gradients the
  // partitioner turns each full sum into local sums plus an all_reduce.
  // The squared sums are tagged `combine = "clip_norm"` and all come before
  // the adds: on a per-rank program passes/CombineAllReduce reduces the
  // sharded gradients' local sums with one all_reduce of a vector instead
  // of one all_reduce per gradient.
  void clipGlobalNorm(double clipNorm, std::vector<Value*>& grads) {
    AttrMap all;
    all.set("combine", std::string("clip_norm"));
    std::vector<Value*> sums;
    for (Value* g : grads) sums.push_back(b.op(OpKind::Sum, {b.mul(g, g)}, all));
    Value* sq = nullptr;
    for (Value* s : sums) sq = sq ? b.add(sq, s) : s;
    Value* norm = b.op(OpKind::Sqrt, {sq});
    Value* coef = b.op(OpKind::Minimum, {b.scalar(1.0), b.div(b.scalar(clipNorm), b.add(norm, b.scalar(1e-6)))});
    for (Value*& g : grads) g = b.mul(g, coef);
  }

  // The dropouts of a minimize step are active (every other function keeps
  // them keyless: the identity). Each gets site k (its order in the step)
  // and the key [step, 0, ..., 0] (the partitioner adds the block offsets);
  // the key ops only read the step argument, so they go first.
  void activateDropouts(Value* stepArg) {
    std::vector<Op*> drops;
    for (auto& op : f.ops)
      if (op->kind == OpKind::Dropout && op->operands.size() == 1) drops.push_back(op.get());
    if (drops.empty()) return;
    const size_t before = f.ops.size();
    std::map<int, Value*> keys;  // by rank
    Value* step1 = b.reshape(stepArg, {1});
    for (Op* d : drops) {
      int r = d->operands[0]->type.rank();
      Value*& k = keys[r];
      if (!k) {
        AttrMap c;
        c.set("axis", (int64_t)0);
        k = r == 0 ? step1 : b.op(OpKind::Concat, {step1, b.constant(0.0, DType::I32, {r})}, c);
      }
    }
    std::rotate(f.ops.begin(), f.ops.begin() + (std::ptrdiff_t)before, f.ops.end());
    int64_t site = 0;
    for (Op* d : drops) {
      d->operands.push_back(keys[d->operands[0]->type.rank()]);
      d->attrs.set("site", site++);
    }
  }

  void run() {
    TrainRequest& tr = *f.train;
    GSL_ASSERT(f.results.size() == 1 + tr.aux, "training thunk must return the loss and its aux outputs only");
    Value* loss = f.results[0];
    // The auxiliary outputs (minimize of a loss that returns (loss, aux...)):
    // values of the same forward pass, returned after the states and not
    // differentiated (the sweep starts from the loss alone).
    const std::vector<Value*> aux(f.results.begin() + 1, f.results.end());
    if (tr.kind == TrainRequest::Minimize) activateDropouts(f.addArg({DType::I32, {}}));  // the step counter
    Gradients grads = appendGradient(m, f, loss, tr.params, false);
    for (size_t i = 0; i < tr.params.size(); ++i)  // the REPL's grad(w)
      f.names.addCallPath(grads.params[i], "grad(" + tr.params[i] + ")");
    if (tr.kind == TrainRequest::Grad) {
      f.results = grads.params;
      f.resultShardings.clear();
      for (const auto& name : tr.params) f.resultShardings.push_back(m.findParam(name)->sharding);
      tr.expanded = true;
      return;
    }
    const Optimizer* o = m.findOptimizer(tr.optimizer);
    GSL_ASSERT(o, "unknown optimizer '" + tr.optimizer + "'");
    // The step counter argument was added first (activateDropouts). The host's per-step scalars come right after the step counter.
    bool isAdam = o->kind == Optimizer::Adam || o->kind == Optimizer::AdamW;
    constLr = o->hp.at("lr");
    if (!isAdam && !o->lr.isConstant()) lr = hostScalar(TrainRequest::Scalar::Lr);
    if (isAdam) {
      adamStepSize = hostScalar(TrainRequest::Scalar::AdamStepSize);
      adamBc2Sqrt = hostScalar(TrainRequest::Scalar::AdamBc2Sqrt);
    }
    if (o->kind == Optimizer::Adafactor) {
      adafactorBeta = hostScalar(TrainRequest::Scalar::AdafactorBeta);
      adafactorKeep = hostScalar(TrainRequest::Scalar::AdafactorKeep);
    }
    if ((o->kind == Optimizer::AdamW || o->kind == Optimizer::Adafactor) && o->hp.count("weight_decay") &&
        o->hp.at("weight_decay") > 0)
      decayRate = hostScalar(TrainRequest::Scalar::DecayRate);
    std::vector<Value*> g = grads.params;
    for (size_t i = 0; i < g.size(); ++i) g[i] = mark(g[i], "grad", *m.findParam(tr.params[i]));
    if (double c = o->hp.count("clip_norm") ? o->hp.at("clip_norm") : 0; c > 0) clipGlobalNorm(c, g);
    for (size_t i = 0; i < tr.params.size(); ++i) {
      const Param& p = *m.findParam(tr.params[i]);
      switch (o->kind) {
        case Optimizer::SGD: sgd(*o, p, g[i]); break;
        case Optimizer::Adam:
        case Optimizer::AdamW: adam(*o, p, g[i]); break;
        case Optimizer::Adafactor: adafactor(*o, p, g[i]); break;
      }
    }
    f.results = {loss};
    f.resultShardings = {std::nullopt};
    for (size_t i = 0; i < tr.params.size(); ++i) {
      f.results.push_back(mark(newParams[i], "new", *m.findParam(tr.params[i])));
      f.resultShardings.push_back(m.findParam(tr.params[i])->sharding);
    }
    for (size_t i = 0; i < newStates.size(); ++i) {
      f.results.push_back(newStates[i]);
      f.resultShardings.push_back(stateShardings[i]);
    }
    for (Value* a : aux) {
      f.results.push_back(a);
      f.resultShardings.push_back(std::nullopt);  // as propagation lays them out
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

std::vector<double> stepScalars(const Optimizer& o, const TrainRequest& tr, int64_t t) {
  std::vector<double> r;
  double lr = o.lr.at(t);
  using S = TrainRequest::Scalar;
  for (S s : tr.scalars) {
    switch (s) {
      case S::Lr: r.push_back(lr); break;
      case S::AdamStepSize: r.push_back(lr / (1.0 - std::pow(o.hp.at("beta1"), (double)t))); break;
      case S::AdamBc2Sqrt: r.push_back(std::sqrt(1.0 - std::pow(o.hp.at("beta2"), (double)t))); break;
      case S::AdafactorBeta: r.push_back(1.0 - std::pow((double)t, -o.hp.at("decay"))); break;
      case S::AdafactorKeep: r.push_back(std::pow((double)t, -o.hp.at("decay"))); break;
      case S::DecayRate: r.push_back(lr * o.hp.at("weight_decay")); break;
    }
  }
  return r;
}

}  // namespace gsl::passes
