#include "passes/SpmdPartitioner.h"

#include <algorithm>
#include <map>
#include <set>

#include "ir/PartitionRules.h"
#include "ir/ShardRules.h"
#include "passes/CostModel.h"
#include "passes/LoopPartition.h"
#include "support/Diagnostics.h"

namespace gsl::passes {

using namespace ir;

namespace {

// Normal form: mesh "" means replicated everywhere.
Sharding normalize(const std::optional<Sharding>& s, int rank) {
  if (!s || (s->isReplicated())) return Sharding::replicated("", rank);
  return *s;
}

std::optional<Sharding> denormalize(const Sharding& s) {
  if (s.mesh.empty()) return std::nullopt;
  return s;
}

using Local = LocalValue;  // v, and how its global value lies (with partial axes)

class Partitioner : public LocalBuilder {
 public:
  Partitioner(const Module& m, const Function& g) : mod_(m), g_(g) {}

  std::unique_ptr<Function> run() {
    out_ = std::make_unique<Function>();
    out_->name = g_.name;
    out_->loc = g_.loc;
    for (Value* a : g_.args) {
      Sharding s = normalize(a->sharding, a->type.rank());
      Value* la = out_->addArg({a->type.dtype, shapeOf(a->type, s)});
      la->sharding = denormalize(s);
      map_[a] = {la, s};
    }
    for (const auto& op : g_.ops) partitionOp(*op);
    for (size_t i = 0; i < g_.results.size(); ++i) {
      const Value* r = g_.results[i];
      std::optional<Sharding> want = i < g_.resultShardings.size() && g_.resultShardings[i]
                                         ? g_.resultShardings[i]
                                         : r->sharding;
      Sharding t = normalize(want, r->type.rank());
      t.partial.clear();
      Local l = reshard(map_.at(r), t, g_.loc);
      out_->results.push_back(l.v);
      out_->resultShardings.push_back(denormalize(t));
    }
    return std::move(out_);
  }

 private:
  const Module& mod_;
  const Function& g_;
  std::unique_ptr<Function> out_;
  std::map<const Value*, Local> map_;

  const Mesh& mesh(const std::string& name) {
    const Mesh* m = mod_.findMesh(name);
    GSL_ASSERT(m, "unknown mesh '" + name + "' in partitioner");
    return *m;
  }
  int64_t product(const std::string& meshName, const std::vector<std::string>& axes) {
    if (axes.empty()) return 1;
    const Mesh& m = mesh(meshName);
    int64_t p = 1;
    for (const auto& a : axes) p *= m.axisSize(a);
    return p;
  }
  std::vector<int64_t> axisIndices(const std::string& meshName, const std::vector<std::string>& axes) {
    const Mesh& m = mesh(meshName);
    std::vector<int64_t> r;
    for (const auto& a : axes) r.push_back(m.axisIndex(a));
    return r;
  }
  Shape shapeOf(const TensorType& t, const Sharding& s) { return ir::localShape(mod_, t, s); }

  Value* emit(OpKind k, std::vector<Value*> operands, AttrMap at, SourceLoc loc) {
    std::vector<TensorType> in;
    for (Value* v : operands) in.push_back(v->type);
    TensorType t;
    std::string e = inferType(k, in, at, t);
    GSL_ASSERT(e.empty(), std::string("partitioner built an ill-typed ") + opName(k) + ": " + e);
    return out_->append(k, std::move(operands), std::move(at), t, loc)->result;
  }

  AttrMap collectiveAttrs(const std::string& meshName, const std::vector<std::string>& axes) {
    AttrMap at;
    at.set("mesh", meshName);
    at.set("axes", axisIndices(meshName, axes));
    at.set("n", product(meshName, axes));
    return at;
  }

  Local tagged(Local l) {
    l.v->sharding = denormalize(l.s);
    if (l.v->sharding && l.v->sharding->isReplicated() && l.s.partial.empty()) l.v->sharding = std::nullopt;
    return l;
  }

  // Dim d is split over the same axes as `order` in another order: member j
  // of the group (over the current order) holds block j and needs block
  // k(j), the index of its own coordinates in `order`.
  Local permuteBlocks(Local x, int d, const std::vector<std::string>& order, SourceLoc loc) {
    const std::string& mn = x.s.mesh;
    const auto& cur = x.s.dims[d];
    int64_t n = product(mn, cur);
    std::vector<int64_t> perm(n);
    for (int64_t j = 0; j < n; ++j) {
      std::map<std::string, int64_t> coord;
      int64_t rem = j;
      for (int i = (int)cur.size() - 1; i >= 0; --i) {
        int64_t sz = product(mn, {cur[i]});
        coord[cur[i]] = rem % sz;
        rem /= sz;
      }
      int64_t k = 0;
      for (const auto& a : order) k = k * product(mn, {a}) + coord[a];
      perm[j] = k;
    }
    AttrMap at = collectiveAttrs(mn, cur);
    at.set("perm", perm);
    x.v = emit(OpKind::CollectivePermute, {x.v}, at, loc);
    x.s.dims[d] = order;
    return tagged(x);
  }

  // Moves `x` to sharding `t` (t has no partial axes), picking the cheapest
  // collective for each step (see the header).
  Local reshard(Local x, Sharding t, SourceLoc loc) {
    int rank = (int)x.v->type.rank();
    if (t.mesh.empty()) t = Sharding::replicated(x.s.mesh, rank);
    if (x.s.mesh.empty()) x.s = Sharding::replicated(t.mesh, rank);
    if (x.s.mesh != t.mesh) {  // another mesh over the same ranks: via replicated
      x = reshard(x, Sharding::replicated(x.s.mesh, rank), loc);
      x.s = Sharding::replicated(t.mesh, rank);
    }
    if (t.mesh.empty()) return x;
    const std::string& mn = t.mesh;
    // 1. Pending partial sums: reduce_scatter where the target splits a dim
    //    further on that axis, all_reduce for the rest.
    if (!x.s.partial.empty()) {
      std::vector<std::string> rest;
      for (const auto& a : x.s.partial) {
        bool done = false;
        for (int d = 0; d < rank && !done; ++d) {
          auto want = x.s.dims[d];
          want.push_back(a);
          if (t.dims[d] == want && x.v->type.shape[d] % product(mn, {a}) == 0) {
            AttrMap at = collectiveAttrs(mn, {a});
            at.set("dim", (int64_t)d);
            x.v = emit(OpKind::ReduceScatter, {x.v}, at, loc);
            x.s.dims[d] = want;
            done = true;
          }
        }
        if (!done) rest.push_back(a);
      }
      if (!rest.empty()) {
        AttrMap at = collectiveAttrs(mn, rest);
        at.erase("n");
        at.set("reduce", std::string("sum"));
        x.v = emit(OpKind::AllReduce, {x.v}, at, loc);
      }
      x.s.partial.clear();
      tagged(x);
    }
    // 2. Dims whose current split is not a prefix of the target: move the
    //    minor axis to the dim that wants it (all_to_all) or gather it.
    auto isPrefix = [](const std::vector<std::string>& a, const std::vector<std::string>& b) {
      return a.size() <= b.size() && std::equal(a.begin(), a.end(), b.begin());
    };
    for (int guard = 0; guard < 64; ++guard) {
      int d = -1;
      for (int k = 0; k < rank; ++k)
        if (!isPrefix(x.s.dims[k], t.dims[k])) {
          d = k;
          break;
        }
      if (d < 0) break;
      if (x.s.dims[d].size() == t.dims[d].size() && x.s.dims[d].size() > 1 &&
          std::is_permutation(x.s.dims[d].begin(), x.s.dims[d].end(), t.dims[d].begin())) {
        // Same axes in another order: the blocks only change owners.
        x = permuteBlocks(x, d, t.dims[d], loc);
        continue;
      }
      std::string a = x.s.dims[d].back();
      int e = -1;
      for (int k = 0; k < rank; ++k) {
        if (k == d) continue;
        auto want = x.s.dims[k];
        want.push_back(a);
        if (isPrefix(want, t.dims[k]) && x.v->type.shape[k] % product(mn, {a}) == 0) {
          e = k;
          break;
        }
      }
      AttrMap at = collectiveAttrs(mn, {a});
      if (e >= 0) {
        at.set("split_dim", (int64_t)e);
        at.set("concat_dim", (int64_t)d);
        x.v = emit(OpKind::AllToAll, {x.v}, at, loc);
        x.s.dims[e].push_back(a);
      } else {
        at.set("dim", (int64_t)d);
        x.v = emit(OpKind::AllGather, {x.v}, at, loc);
      }
      x.s.dims[d].pop_back();
      tagged(x);
    }
    // 3. Split further where the target wants more axes: a local slice.
    for (int d = 0; d < rank; ++d) {
      if (x.s.dims[d].size() == t.dims[d].size()) continue;
      std::vector<std::string> extra(t.dims[d].begin() + x.s.dims[d].size(), t.dims[d].end());
      AttrMap at = collectiveAttrs(mn, extra);
      at.set("dim", (int64_t)d);
      x.v = emit(OpKind::ShardSlice, {x.v}, at, loc);
      x.s.dims[d] = t.dims[d];
      tagged(x);
    }
    GSL_ASSERT(x.s == t, "reshard did not reach its target: " + x.s.str() + " vs " + t.str());
    return x;
  }

  // How an op's dimension labels are split.
  struct Plan {
    std::string mesh;
    std::map<int, std::vector<std::string>> T;
    Sharding shardingFor(const std::vector<int>& labels) const {
      Sharding s = Sharding::replicated(mesh, (int)labels.size());
      for (size_t d = 0; d < labels.size(); ++d)
        if (auto it = T.find(labels[d]); it != T.end()) s.dims[d] = it->second;
      return s;
    }
  };

  Plan makePlan(const Op& op, const DimLabels& L, const Sharding& decided, const std::set<int>& resultLabels,
                bool operandsFirst) {
    Plan p;
    p.mesh = decided.mesh;
    std::set<std::string> used;
    auto propose = [&](int label, const std::vector<std::string>& axes) {
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
    // Drop splits that do not divide every dim carrying the label.
    auto checkDims = [&](const std::vector<int>& labels, const Shape& shape) {
      for (size_t d = 0; d < labels.size(); ++d) {
        auto it = p.T.find(labels[d]);
        if (it != p.T.end() && shape[d] % product(p.mesh, it->second) != 0) p.T.erase(it);
      }
    };
    for (size_t i = 0; i < op.operands.size(); ++i) checkDims(L.operands[i], op.operands[i]->type.shape);
    checkDims(L.result, op.result->type.shape);
    return p;
  }

  // Bytes one rank would send to move `x` to `t` (a dry run into a scratch
  // function).
  uint64_t reshardCost(const TensorType& localType, const Sharding& from, const Sharding& t) {
    auto saved = std::move(out_);
    out_ = std::make_unique<Function>();
    Local y{out_->addArg(localType), from};
    reshard(y, t, {});
    uint64_t bytes = 0;
    for (auto& [k, c] : estimateCost(mod_, *out_).collectives) bytes += c.bytes;
    out_ = std::move(saved);
    return bytes;
  }

  // Bytes a plan sends: operands to their required shardings, then the
  // result (with its partial sums) to the decided sharding.
  uint64_t planCost(const Op& op, const DimLabels& L, const Plan& p, const Sharding& decided) {
    uint64_t total = 0;
    for (size_t i = 0; i < op.operands.size(); ++i)
      total += reshardCost(map_.at(op.operands[i]).v->type, map_.at(op.operands[i]).s, p.shardingFor(L.operands[i]));
    Sharding rs = p.shardingFor(L.result);
    std::set<int> resultLabels(L.result.begin(), L.result.end());
    for (auto& [label, axes] : p.T)
      if (!resultLabels.count(label)) rs.partial.insert(rs.partial.end(), axes.begin(), axes.end());
    TensorType lt{op.result->type.dtype, shapeOf(op.result->type, rs)};
    Sharding want = decided;
    if (want.mesh.empty()) want = Sharding::replicated(p.mesh, op.result->type.rank());
    return total + reshardCost(lt, rs, want);
  }

  // ---- the LocalBuilder the op table's partition rules work through
  const Op* cur_ = nullptr;  // the op being partitioned
  Sharding decided_;         // its result's decided sharding

  const Sharding& decided() const override { return decided_; }
  LocalValue local(const Value* global) override { return map_.at(global); }
  LocalValue reshard(LocalValue x, const Sharding& t) override { return reshard(x, t, cur_->loc); }
  LocalValue tag(LocalValue x) override { return tagged(x); }
  Value* emit(OpKind k, std::vector<Value*> operands, AttrMap attrs) override {
    return emit(k, std::move(operands), std::move(attrs), cur_->loc);
  }
  Value* emitSource(OpKind k, AttrMap attrs, TensorType t) override {
    return out_->append(k, {}, std::move(attrs), std::move(t), cur_->loc)->result;
  }
  Shape localShape(const TensorType& t, const Sharding& s) override { return shapeOf(t, s); }
  Sharding paramStorage(const std::string& name) override {
    const Param* p = mod_.findParam(name);
    GSL_ASSERT(p, "param op names an unknown param");
    return normalize(p->sharding, p->type.rank());
  }
  void setResult(LocalValue l) override { map_[cur_->result] = l; }
  Op* emitLoop(std::vector<Value*> operands, AttrMap attrs, const std::vector<TensorType>& types,
               std::unique_ptr<Function> body) override {
    return out_->appendMulti(OpKind::Loop, std::move(operands), std::move(attrs), types, std::move(body), cur_->loc);
  }
  void setResults(std::vector<LocalValue> ls) override {
    GSL_ASSERT(ls.size() == cur_->results.size(), "partitioner: wrong number of local results");
    for (size_t k = 0; k < ls.size(); ++k) map_[cur_->results[k]] = ls[k];
  }

  LocalPlan plan(const Op& op) override {
    DimLabels L = dimLabels(op);
    std::set<int> resultLabels(L.result.begin(), L.result.end());
    // Two plans for the label splits: the result's decided sharding first
    // (then contracted labels from the operands as they lie), or the
    // operands first (keeping a contraction local and reducing its partial
    // sum after, e.g. by reduce_scatter). Contractions take the plan that
    // communicates fewer bytes; other ops the first.
    Plan plan = makePlan(op, L, decided_, resultLabels, false);
    if (L.partialSum) {
      Plan alt = makePlan(op, L, decided_, resultLabels, true);
      if (alt.T != plan.T && planCost(op, L, alt, decided_) < planCost(op, L, plan, decided_)) plan = alt;
    }
    LocalPlan p;
    for (size_t i = 0; i < op.operands.size(); ++i)
      p.operands.push_back(reshard(map_.at(op.operands[i]), plan.shardingFor(L.operands[i]), op.loc).v);
    p.result = plan.shardingFor(L.result);
    std::vector<std::string> partialAxes;
    for (auto& [label, axes] : plan.T)
      if (!resultLabels.count(label)) partialAxes.insert(partialAxes.end(), axes.begin(), axes.end());
    if (!plan.mesh.empty()) {
      const Mesh& m = mesh(plan.mesh);
      std::sort(partialAxes.begin(), partialAxes.end(),
                [&](auto& a, auto& b) { return m.axisIndex(a) < m.axisIndex(b); });
    }
    p.result.partial = partialAxes;
    p.localShape = shapeOf(op.result->type, p.result);
    if (!partialAxes.empty()) p.partialGroup = product(plan.mesh, partialAxes);
    return p;
  }

  void finish(const Op& op, const LocalPlan& p, Value* v) override {
    GSL_ASSERT(v->type.shape == p.localShape,
               std::string("partitioner: local ") + opName(op.kind) + " has shape " + shapeStr(v->type.shape) +
                   ", expected " + shapeStr(p.localShape));
    Sharding rs = p.result;
    if (rs.mesh.empty()) rs = Sharding::replicated("", op.result->type.rank());
    map_[op.result] = tagged({v, rs});
  }

  // Partitions one op by its row's partition rule.
  void partitionOp(const Op& op) {
    const OpInfo& info = op.info();
    if (op.kind == OpKind::Loop) {  // an op with a body: passes/LoopPartition
      cur_ = &op;
      partitionLoop(mod_, *this, op);
      for (const Value* r : op.results) GSL_ASSERT(map_.count(r), "partitioner: a loop result has no local value");
      return;
    }
    GSL_ASSERT(info.partition, std::string("op '") + info.mnemonic + "' has no partition rule");
    cur_ = &op;
    decided_ = normalize(op.result->sharding, op.result->type.rank());
    decided_.partial.clear();
    info.partition(*this, op);
    GSL_ASSERT(map_.count(op.result), std::string("the partition rule of '") + info.mnemonic + "' set no result");
  }
};

}  // namespace

std::unique_ptr<Function> partitionFunction(const Module& m, const Function& global) {
  Partitioner p(m, global);
  return p.run();
}

}  // namespace gsl::passes
