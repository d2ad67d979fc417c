// An op's plans: which of its dimension labels are split over which mesh
// axes, what each costs one rank, and the choice among them.
#include "passes/Partitioner.h"

#include <algorithm>

#include "passes/CostModel.h"
#include "passes/ReshapeLayout.h"
#include "support/Diagnostics.h"

namespace gsl::passes::partitioner {

bool Partitioner::splitFits(const Op& op, const DimLabels& L, int label, int64_t n) {
  bool divides = true, same = true;
  int64_t size = -1;
  auto scan = [&](const std::vector<int>& labels, const Shape& shape) {
    for (size_t d = 0; d < labels.size(); ++d) {
      if (labels[d] != label) continue;
      divides &= shape[d] % n == 0;
      if (size >= 0 && shape[d] != size) same = false;
      size = shape[d];
    }
  };
  for (size_t i = 0; i < op.operands.size(); ++i) scan(L.operands[i], op.operands[i]->type.shape);
  scan(L.result, op.result->type.shape);
  return divides || same;
}

Partitioner::Plan Partitioner::makePlan(const Op& op, const DimLabels& L, const Sharding& decided, const std::set<int>& resultLabels,
                                        bool operandsFirst) {
  Plan p;
  p.mesh = decided.mesh;
  std::set<std::string> used;
  auto propose = [&](int label, const Axes& axes) {
    if (axes.empty() || p.T.count(label) || L.unsplittable.count(label)) return;
    for (const auto& a : axes)
      if (used.count(a)) return;
    p.T[label] = axes;
    for (const auto& a : axes) used.insert(a);
  };
  auto fromResult = [&] {
    for (size_t d = 0; d < L.result.size(); ++d) propose(L.result[d], decided.dims[d]);
  };
  auto fromOperands = [&] {
    if (!L.partialSum) return;
    for (size_t i = 0; i < op.operands.size(); ++i) {
      const Sharding& s = map_.at(op.operands[i]).s;
      if (s.mesh.empty() || (!p.mesh.empty() && s.mesh != p.mesh)) continue;
      if (p.mesh.empty()) p.mesh = s.mesh;
      for (size_t d = 0; d < L.operands[i].size(); ++d)
        if (!resultLabels.count(L.operands[i][d])) propose(L.operands[i][d], s.dims[d]);
    }
  };
  if (operandsFirst) {
    fromOperands();
    fromResult();
  } else {
    fromResult();
    fromOperands();
  }
  // Drop splits that neither divide every dim carrying the label nor pad
  // them alike.
  for (auto it = p.T.begin(); it != p.T.end();)
    it = splitFits(op, L, it->first, product(p.mesh, it->second)) ? std::next(it) : p.T.erase(it);
  return p;
}

Sharding Partitioner::resultLayout(const DimLabels& L, const Plan& p) {
  Sharding rs = p.shardingFor(L.result);
  std::set<int> resultLabels(L.result.begin(), L.result.end());
  Axes partialAxes;
  for (auto& [label, axes] : p.T)
    if (!resultLabels.count(label)) partialAxes.insert(partialAxes.end(), axes.begin(), axes.end());
  if (!p.mesh.empty()) {
    const Mesh& m = mesh(p.mesh);
    std::sort(partialAxes.begin(), partialAxes.end(),
              [&](auto& a, auto& b) { return m.axisIndex(a) < m.axisIndex(b); });
  }
  rs.partial = partialAxes;
  return rs;
}

Value* Partitioner::maskPadding(const Op& op, const DimLabels& L, const Plan& p, size_t i, Value* v, SourceLoc loc) {
  const Shape& G = op.operands[i]->type.shape;
  const bool index = (op.info().traits & IndexOperand) && i + 1 == op.operands.size();
  for (size_t d = 0; d < L.operands[i].size(); ++d) {
    int label = L.operands[i][d];
    auto it = p.T.find(label);
    if (it == p.T.end() || (!index && std::count(L.result.begin(), L.result.end(), label)) ||
        !padded(G, (int)d, p.mesh, it->second))
      continue;
    AttrMap at = collectiveAttrs(p.mesh, it->second);
    at.set("dim", (int64_t)d);
    at.set("size", G[d]);
    at.set("value", 0.0);
    v = emit(OpKind::PadMask, {v}, at, loc);
    v->sharding = annotationOf(p.shardingFor(L.operands[i]));
    whole_[v] = G;
  }
  return v;
}

PlanCost Partitioner::costPlan(const Op& op, const DimLabels& L, const Plan& p, const Sharding& decided) {
  auto saved = std::move(out_);
  out_ = std::make_unique<Function>();
  std::vector<Value*> operands;
  for (size_t i = 0; i < op.operands.size(); ++i) {
    const Local& cur = map_.at(op.operands[i]);
    Local y{out_->addArg(cur.v->type), cur.s};
    whole_[y.v] = wholeOf(cur);
    operands.push_back(maskPadding(op, L, p, i, reshard(y, p.shardingFor(L.operands[i]), {}).v, {}));
  }
  Sharding rs = resultLayout(L, p);
  Value* v = emit(op.kind, operands, op.attrs, {});
  whole_[v] = op.result->type.shape;
  uint64_t held = (uint64_t)v->type.byteSize();
  for (Value* o : operands) held += (uint64_t)o->type.byteSize();
  Sharding want = decided;
  if (want.mesh.empty()) want = Sharding::replicated(p.mesh, op.result->type.rank());
  out_->results.push_back(reshard(Local{v, rs}, want, {}).v);
  gsl::passes::Cost c = estimateCost(mod_, *out_);
  for (const Value* a : out_->args) whole_.erase(a);  // the scratch values die with it
  for (const auto& o : out_->ops)
    for (const Value* r : o->results) whole_.erase(r);
  out_ = std::move(saved);
  PlanCost pc;
  for (auto& [k, cc] : c.collectives) pc.bytes += cc.bytes;
  pc.flops = c.flops;
  pc.memory = held;
  return pc;
}

std::vector<Partitioner::Plan> Partitioner::enumeratePlans(const Op& op, const DimLabels& L, const Sharding& decided) {
  std::string meshName = decided.mesh;
  for (size_t i = 0; i < op.operands.size() && meshName.empty(); ++i) meshName = map_.at(op.operands[i]).s.mesh;
  if (meshName.empty()) return {};
  std::vector<int> labels;
  std::map<int, std::vector<Axes>> options;
  auto offer = [&](int label, const Axes& axes) {
    auto& o = options[label];
    if (std::find(labels.begin(), labels.end(), label) == labels.end()) {
      labels.push_back(label);
      o.push_back({});
    }
    if (axes.empty() || L.unsplittable.count(label)) return;
    if (std::find(o.begin(), o.end(), axes) == o.end()) o.push_back(axes);
  };
  for (size_t d = 0; d < L.result.size(); ++d)
    offer(L.result[d], decided.mesh == meshName ? decided.dims[d] : Axes{});
  for (size_t i = 0; i < op.operands.size(); ++i) {
    const Sharding& s = map_.at(op.operands[i]).s;
    for (size_t d = 0; d < L.operands[i].size(); ++d)
      offer(L.operands[i][d], s.mesh == meshName ? s.dims[d] : Axes{});
  }
  // Drop splits that neither divide every dim carrying the label nor pad
  // them alike.
  auto divides = [&](int label, const Axes& axes) {
    return splitFits(op, L, label, product(meshName, axes));
  };
  for (auto& [label, o] : options)
    o.erase(std::remove_if(o.begin() + 1, o.end(), [&](auto& axes) { return !divides(label, axes); }), o.end());
  std::vector<Plan> out;
  Plan cur;
  cur.mesh = meshName;
  std::set<std::string> used;
  const size_t kMaxPlans = 4096;
  std::function<void(size_t)> walk = [&](size_t k) {
    if (out.size() >= kMaxPlans) return;
    if (k == labels.size()) {
      out.push_back(cur);
      return;
    }
    for (const auto& axes : options[labels[k]]) {
      bool clash = false;
      for (const auto& a : axes) clash |= used.count(a) > 0;
      if (clash) continue;
      if (!axes.empty()) cur.T[labels[k]] = axes;
      for (const auto& a : axes) used.insert(a);
      walk(k + 1);
      for (const auto& a : axes) used.erase(a);
      cur.T.erase(labels[k]);
    }
  };
  walk(0);
  return out;
}

Partitioner::Plan Partitioner::choosePlan(const Op& op, const DimLabels& L, const Sharding& decided, const std::set<int>& resultLabels) {
  std::vector<Plan> plans{makePlan(op, L, decided, resultLabels, false)};
  auto known = [&](const Plan& p) {
    for (const auto& q : plans)
      if (q.T == p.T && q.mesh == p.mesh) return true;
    return false;
  };
  Plan alt = makePlan(op, L, decided, resultLabels, true);
  if (!known(alt)) plans.push_back(alt);
  if (op.info().cls == OpClass::Contraction || op.info().cls == OpClass::DataMovement)  // take's rows
    for (auto& p : enumeratePlans(op, L, decided))
      if (!known(p)) plans.push_back(std::move(p));
  std::vector<PlanCost> costs;
  size_t best = 0;
  for (size_t i = 0; i < plans.size(); ++i) {
    costs.push_back(costPlan(op, L, plans[i], decided));
    if (cheaper(costs[i], costs[best])) best = i;
  }
  if (target_ == op.result) {
    for (size_t i = 0; i < plans.size(); ++i) {
      PlanCandidate c;
      for (size_t j = 0; j < op.operands.size(); ++j) c.operands.push_back(plans[i].shardingFor(L.operands[j]));
      c.result = resultLayout(L, plans[i]);
      c.cost = costs[i];
      c.chosen = i == best;
      report_.candidates.push_back(std::move(c));
    }
    report_.found = true;
  }
  return plans[best];
}

bool Partitioner::localReshape(const Op& op, LocalPlan& p) {
  if (op.kind != OpKind::Reshape || op.operands.size() != 1) return false;
  const Local& in = map_.at(op.operands[0]);
  if (!in.s.partial.empty() || decided_.mesh.empty() || in.s.mesh != decided_.mesh) return false;
  if (in.s.isReplicated() || decided_.isReplicated()) return false;
  auto a = contiguousLayout(mod_, op.operands[0]->type.shape, in.s);
  auto b = contiguousLayout(mod_, op.result->type.shape, decided_);
  if (!a || !b || *a != *b) return false;
  p.operands = {in.v};
  p.result = decided_;
  p.localShape = localShape(op.result->type, decided_);
  return true;
}

LocalPlan Partitioner::plan(const Op& op) {
  if (LocalPlan p; localReshape(op, p)) return p;
  DimLabels L = dimLabels(op);
  std::set<int> resultLabels(L.result.begin(), L.result.end());
  // Ops without partial sums take the result's decided sharding (then
  // operands' splits); contractions, sums and means choose among their
  // plans by cost (choosePlan).
  Plan plan = L.partialSum ? choosePlan(op, L, decided_, resultLabels)
                           : makePlan(op, L, decided_, resultLabels, false);
  LocalPlan p;
  for (size_t i = 0; i < op.operands.size(); ++i) {
    p.operands.push_back(
        maskPadding(op, L, plan, i, reshard(map_.at(op.operands[i]), plan.shardingFor(L.operands[i]), op.loc).v, op.loc));
    p.operandLayouts.push_back(plan.shardingFor(L.operands[i]));
  }
  p.result = resultLayout(L, plan);
  p.localShape = localShape(op.result->type, p.result);
  if (!p.result.partial.empty()) p.partialGroup = product(plan.mesh, p.result.partial);
  return p;
}

}  // namespace gsl::passes::partitioner
