#include "passes/SpmdPartitioner.h"

#include <algorithm>

#include "passes/CostModel.h"
#include "passes/LoopPartition.h"
#include "passes/PartitionRules.h"
#include "passes/Partitioner.h"
#include "support/Diagnostics.h"

namespace gsl::passes {

namespace partitioner {

std::unique_ptr<Function> Partitioner::run() {
  out_ = std::make_unique<Function>();
  out_->name = g_.name;
  out_->loc = g_.loc;
  for (Value* a : g_.args) {
    Sharding s = normalForm(a->sharding, a->type.rank());
    Value* la = out_->addArg({a->type.dtype, localShape(a->type, s)});
    la->sharding = annotationOf(s);
    map_[a] = {la, s};
    whole_[la] = a->type.shape;
  }
  for (const auto& op : g_.ops) partitionOp(*op);
  for (size_t i = 0; i < g_.results.size(); ++i) {
    const Value* r = g_.results[i];
    std::optional<Sharding> want = i < g_.resultShardings.size() && g_.resultShardings[i]
                                       ? g_.resultShardings[i]
                                       : r->sharding;
    Sharding t = normalForm(want, r->type.rank());
    t.partial.clear();
    Local l = reshard(map_.at(r), t, g_.loc);
    out_->results.push_back(l.v);
    out_->resultShardings.push_back(annotationOf(t));
  }
  return std::move(out_);
}

Sharding Partitioner::paramStorage(const std::string& name) {
  const Param* p = mod_.findParam(name);
  GSL_ASSERT(p, "param op names an unknown param");
  return normalForm(p->sharding, p->type.rank());
}

void Partitioner::setResult(LocalValue l) {
  map_[cur_->result] = l;
  whole_[l.v] = cur_->result->type.shape;
}

Op* Partitioner::emitLoop(std::vector<Value*> operands, AttrMap attrs, const std::vector<TensorType>& types,
                          std::unique_ptr<Function> body) {
  return out_->appendMulti(OpKind::Loop, std::move(operands), std::move(attrs), types, std::move(body), cur_->loc);
}

void Partitioner::setResults(std::vector<LocalValue> ls) {
  GSL_ASSERT(ls.size() == cur_->results.size(), "partitioner: wrong number of local results");
  for (size_t k = 0; k < ls.size(); ++k) {
    map_[cur_->results[k]] = ls[k];
    whole_[ls[k].v] = cur_->results[k]->type.shape;
  }
}

std::vector<const Op*> Partitioner::users(const Value* v) {
  if (users_.empty()) {
    for (const auto& o : g_.ops)
      for (const Value* x : o->operands) users_[x].push_back(o.get());
    for (const Value* r : g_.results) users_[r].push_back(nullptr);
  }
  auto it = users_.find(v);
  return it == users_.end() ? std::vector<const Op*>{} : it->second;
}

Value* Partitioner::shiftAmongGroup(Value* v, const Sharding& s, int d, int64_t q) {
  const auto& axes = s.dims[d];
  int64_t n = product(s.mesh, axes);
  std::vector<int64_t> perm(n);
  for (int64_t j = 0; j < n; ++j) perm[j] = ((j + q) % n + n) % n;
  AttrMap at = collectiveAttrs(s.mesh, axes);
  at.set("perm", perm);
  return emit(OpKind::CollectivePermute, {v}, at, cur_->loc);
}

Value* Partitioner::memberIndex(const Sharding& s, int d) {
  const auto& axes = s.dims[d];
  int64_t n = product(s.mesh, axes);
  AttrMap one;
  one.set("value", (int64_t)1);
  Value* ones = emitSource(OpKind::Constant, one, {DType::I32, {n}});
  AttrMap cs;
  cs.set("axis", (int64_t)0);
  cs.set("exclusive", true);
  Value* all = emit(OpKind::CumSum, {ones}, cs, cur_->loc);
  AttrMap at = collectiveAttrs(s.mesh, axes);
  at.set("dim", (int64_t)0);
  return emit(OpKind::ShardSlice, {all}, at, cur_->loc);
}

PlanCost Partitioner::dryRun(const std::vector<LocalValue>& inputs,
                             const std::function<LocalValue(const std::vector<LocalValue>&)>& plan) {
  auto saved = std::move(out_);
  out_ = std::make_unique<Function>();
  std::vector<LocalValue> in;
  for (const auto& l : inputs) in.push_back({out_->addArg(l.v->type), l.s});
  LocalValue r = plan(in);
  out_->results.push_back(r.v);
  gsl::passes::Cost c = estimateCost(mod_, *out_);
  out_ = std::move(saved);
  PlanCost pc;
  for (auto& [k, cc] : c.collectives) pc.bytes += cc.bytes;
  pc.flops = c.flops;
  pc.memory = c.peakActivationBytes;
  return pc;
}

void Partitioner::reportPlans(const std::vector<PlanReport>& plans, size_t chosen) {
  if (target_ != cur_->result) return;
  for (size_t i = 0; i < plans.size(); ++i) {
    PlanCandidate c;
    c.operands = plans[i].inputs;
    c.result = plans[i].result;
    c.cost = plans[i].cost;
    c.chosen = i == chosen;
    report_.candidates.push_back(std::move(c));
  }
  report_.found = true;
}

void Partitioner::finish(const Op& op, const LocalPlan& p, Value* v) {
  GSL_ASSERT(v->type.shape == p.localShape,
             std::string("partitioner: local ") + opName(op.kind) + " has shape " + shapeStr(v->type.shape) +
                 ", expected " + shapeStr(p.localShape));
  Sharding rs = p.result;
  if (rs.mesh.empty()) rs = Sharding::replicated("", op.result->type.rank());
  map_[op.result] = tag({v, rs});
  whole_[v] = op.result->type.shape;
}

void Partitioner::partitionOp(const Op& op) {
  const OpInfo& info = op.info();
  if (op.kind == OpKind::Loop) {  // an op with a body: passes/LoopPartition
    cur_ = &op;
    partitionLoop(mod_, *this, op);
    for (const Value* r : op.results) GSL_ASSERT(map_.count(r), "partitioner: a loop result has no local value");
    return;
  }
  cur_ = &op;
  decided_ = normalForm(op.result->sharding, op.result->type.rank());
  decided_.partial.clear();
  applyPartitionRule(info.partition, *this, op);
  GSL_ASSERT(map_.count(op.result) || folded_.count(&op),
             std::string("the partition rule of '") + info.mnemonic + "' set no result");
}

}  // namespace partitioner

using namespace ir;
using partitioner::Partitioner;

std::unique_ptr<Function> partitionFunction(const Module& m, const Function& global) {
  Partitioner p(m, global);
  return p.run();
}

OpPlans explainPlans(const Module& m, const Function& global, const ir::Value* v) {
  Partitioner p(m, global, v);
  p.run();
  OpPlans r = std::move(p.report_);
  if (!r.found) return r;
  size_t best = 0, runnerUp = r.candidates.size();
  for (size_t i = 0; i < r.candidates.size(); ++i)
    if (r.candidates[i].chosen) best = i;
  const PlanCost& b = r.candidates[best].cost;
  auto key = [](const PlanCost& c) { return std::tie(c.bytes, c.flops, c.memory); };
  for (size_t i = 0; i < r.candidates.size(); ++i)
    if (i != best && (runnerUp == r.candidates.size() || key(r.candidates[i].cost) < key(r.candidates[runnerUp].cost)))
      runnerUp = i;
  if (runnerUp == r.candidates.size()) {
    r.why = "the only legal plan";
  } else {
    const PlanCost& n = r.candidates[runnerUp].cost;
    auto num = [](uint64_t x) {  // 196,608
      std::string d = std::to_string(x), r;
      for (size_t i = 0; i < d.size(); ++i) r += (i && (d.size() - i) % 3 == 0 ? "," : "") + d.substr(i, 1);
      return r;
    };
    if (b.bytes < n.bytes)
      r.why = "fewest bytes sent (" + num(b.bytes) + " B, the next sends " + num(n.bytes) + " B)";
    else if (b.flops < n.flops)
      r.why = "sends as few bytes as the next (" + num(b.bytes) + " B) with fewer FLOPs (" + num(b.flops) +
              " vs " + num(n.flops) + ")";
    else if (b.memory < n.memory)
      r.why = "ties on bytes and FLOPs, least peak memory (" + num(b.memory) + " B vs " + num(n.memory) + " B)";
    else
      r.why = "ties on bytes, FLOPs and memory: the first plan (the result's sharding first)";
  }
  return r;
}

}  // namespace gsl::passes
