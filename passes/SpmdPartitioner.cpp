#include "passes/SpmdPartitioner.h"

#include <algorithm>
#include <functional>
#include <tuple>
#include <map>
#include <optional>
#include <set>

#include "ir/PartitionRules.h"
#include "ir/ShardRules.h"
#include "passes/CostModel.h"
#include "passes/LoopPartition.h"
#include "passes/ReshapeLayout.h"
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
  Partitioner(const Module& m, const Function& g, const Value* target = nullptr)
      : mod_(m), g_(g), target_(target) {}
  OpPlans report_;  // the candidates of target_'s op, when partitioned

  std::unique_ptr<Function> run() {
    out_ = std::make_unique<Function>();
    out_->name = g_.name;
    out_->loc = g_.loc;
    for (Value* a : g_.args) {
      Sharding s = normalize(a->sharding, a->type.rank());
      Value* la = out_->addArg({a->type.dtype, shapeOf(a->type, s)});
      la->sharding = denormalize(s);
      map_[a] = {la, s};
      whole_[la] = a->type.shape;
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
  const Value* target_ = nullptr;  // the value whose plans are recorded
  // The whole (global) shape of each local value: a padded dim's block does
  // not say its whole size (docs/sharding.md, "Uneven dims"). Values not
  // recorded are split evenly (or replicated).
  std::map<const Value*, Shape> whole_;

  Shape wholeOf(const Local& x) {
    if (auto it = whole_.find(x.v); it != whole_.end()) return it->second;
    return ir::globalShape(mod_, x.v->type, denormalize(x.s));
  }
  // Whether dim `d` of whole shape `G` is padded when split over `axes`.
  bool padded(const Shape& G, int d, const std::string& meshName, const std::vector<std::string>& axes) {
    return !axes.empty() && G[d] % product(meshName, axes) != 0;
  }
  // `v` with zeros appended along dim d up to `rows` rows (a concat with a
  // zero constant): a padded whole, ready to be split evenly.
  Value* padTo(Value* v, int d, int64_t rows, SourceLoc loc) {
    TensorType z = v->type;
    z.shape[d] = rows - v->type.shape[d];
    AttrMap c;
    c.set("value", 0.0);
    Value* zeros = out_->append(OpKind::Constant, {}, c, z, loc)->result;
    AttrMap at;
    at.set("axis", (int64_t)d);
    return emit(OpKind::Concat, {v, zeros}, at, loc);
  }
  // Dim `d` of `x` gathered whole: all_gather of each of its axes, minor
  // first, then a slice dropping the padding rows (a padded dim gathered
  // holds blocks * ceil(size / blocks) rows, the padding at its end).
  Local gatherWhole(Local x, int d, const Shape& G, SourceLoc loc) {
    const std::string& mn = x.s.mesh;
    while (!x.s.dims[d].empty()) {
      AttrMap at = collectiveAttrs(mn, {x.s.dims[d].back()});
      at.set("dim", (int64_t)d);
      x.v = emit(OpKind::AllGather, {x.v}, at, loc);
      x.s.dims[d].pop_back();
      whole_[x.v] = G;
      tagged(x);
    }
    return dropPadding(x, d, G, loc);
  }
  // Dim `d` of `x`, held whole but with its padding rows at the end (a
  // padded dim joined by a collective), sliced to its G[d] true rows.
  Local dropPadding(Local x, int d, const Shape& G, SourceLoc loc) {
    if (x.v->type.shape[d] == G[d]) return x;
    AttrMap at;
    at.set("axis", (int64_t)d);
    at.set("start", (int64_t)0);
    at.set("end", G[d]);
    x.v = emit(OpKind::Slice, {x.v}, at, loc);
    whole_[x.v] = G;
    tagged(x);
    return x;
  }

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
    // A reduction, gather or exchange within groups of one device (every
    // axis of size 1: a mesh axis at -np 1) is its operand: no op, so no
    // copy at run time.
    if (k == OpKind::AllReduce || k == OpKind::AllGather || k == OpKind::ReduceScatter || k == OpKind::AllToAll) {
      const Mesh& m = mesh(at.getString("mesh"));
      int64_t group = 1;
      for (int64_t a : at.getInts("axes")) group *= m.axes.at((size_t)a).size;
      if (group == 1) return operands.at(0);
    }
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
    Shape G = wholeOf(x);
    x.v = emit(OpKind::CollectivePermute, {x.v}, at, loc);
    whole_[x.v] = G;
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
    const Shape G = wholeOf(x);
    auto keep = [&](const Local& l) { whole_[l.v] = G; };
    // 1. Pending partial sums: reduce_scatter where the target splits a dim
    //    further on that axis, all_reduce for the rest.
    if (!x.s.partial.empty()) {
      // A padded dim the target splits over several of the pending axes
      // (docs/sharding.md, "Uneven dims"): zeros appended to n * ceil(size
      // / n) rows, then one reduce_scatter over those axes (the group's
      // members in the target's axis order, as its blocks lie).
      for (int d = 0; d < rank; ++d) {
        const auto& want = t.dims[d];
        if (want.size() < 2 || !x.s.dims[d].empty() || x.v->type.shape[d] != G[d] || !padded(G, d, mn, want))
          continue;
        bool pending = true;
        for (const auto& a : want)
          pending &= std::find(x.s.partial.begin(), x.s.partial.end(), a) != x.s.partial.end();
        if (!pending) continue;
        const int64_t n = product(mn, want);
        x.v = padTo(x.v, d, n * ((G[d] + n - 1) / n), loc);
        keep(x);
        tagged(x);
        AttrMap at = collectiveAttrs(mn, want);
        at.set("dim", (int64_t)d);
        x.v = emit(OpKind::ReduceScatter, {x.v}, at, loc);
        keep(x);
        x.s.dims[d] = want;
        for (const auto& a : want) x.s.partial.erase(std::find(x.s.partial.begin(), x.s.partial.end(), a));
        tagged(x);
      }
      std::vector<std::string> rest;
      for (const auto& a : x.s.partial) {
        bool done = false;
        for (int d = 0; d < rank && !done; ++d) {
          auto want = x.s.dims[d];
          want.push_back(a);
          if (t.dims[d] == want && want.size() == 1 && padded(G, d, mn, want) && x.v->type.shape[d] == G[d]) {
            // A padded dim (docs/sharding.md, "Uneven dims"): zeros appended
            // to n * ceil(size / n) rows, then reduce_scatter to padded blocks.
            x.v = padTo(x.v, d, product(mn, want) * ((G[d] + product(mn, want) - 1) / product(mn, want)), loc);
            keep(x);
            tagged(x);
          }
          if (t.dims[d] == want && x.v->type.shape[d] % product(mn, {a}) == 0 &&
              (!padded(G, d, mn, want) || x.v->type.shape[d] != G[d])) {
            AttrMap at = collectiveAttrs(mn, {a});
            at.set("dim", (int64_t)d);
            x.v = emit(OpKind::ReduceScatter, {x.v}, at, loc);
            keep(x);
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
        keep(x);
      }
      x.s.partial.clear();
      tagged(x);
    }
    auto isPrefix = [](const std::vector<std::string>& a, const std::vector<std::string>& b) {
      return a.size() <= b.size() && std::equal(a.begin(), a.end(), b.begin());
    };
    // 1b. Padded dims (docs/sharding.md, "Uneven dims") whose split changes,
    //     other than to the same axes in another order, and split dims that
    //     are to become padded under more axes: gathered whole first (their
    //     blocks do not nest), then split as the target wants (3.).
    //     Except a dim split over one axis that moves whole to an unsplit
    //     dim wanting exactly that axis: a padded all_to_all (2.).
    auto movesWhole = [&](int d) {
      const auto& cur = x.s.dims[d];
      if (cur.empty() || !t.dims[d].empty()) return -1;
      for (int k = 0; k < rank; ++k)
        if (k != d && x.s.dims[k].empty() && t.dims[k] == cur) return k;
      return -1;
    };
    for (int d = 0; d < rank; ++d) {
      const auto& cur = x.s.dims[d];
      if (cur.empty() || cur == t.dims[d] || movesWhole(d) >= 0) continue;
      bool permuted = cur.size() == t.dims[d].size() && std::is_permutation(cur.begin(), cur.end(), t.dims[d].begin());
      if ((padded(G, d, mn, cur) && !permuted) || (padded(G, d, mn, t.dims[d]) && !permuted))
        x = gatherWhole(x, d, G, loc);
    }
    // 2. Dims whose current split is not a prefix of the target: move the
    //    minor axis to the dim that wants it (all_to_all) or gather it.
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
      if (int e = movesWhole(d); e >= 0 && (padded(G, d, mn, x.s.dims[d]) || padded(G, e, mn, x.s.dims[d]))) {
        // A padded all_to_all over the dim's axes (one or several, the
        // group's members in the axes' order, as the blocks lie): dim e
        // padded with zeros to n whole blocks and split over them; dim d
        // joined from the n blocks, its padding rows (at the end once
        // joined) sliced off.
        const std::vector<std::string> axes = x.s.dims[d];
        const int64_t n = product(mn, axes);
        if (padded(G, e, mn, axes)) {
          x.v = padTo(x.v, e, n * ((G[e] + n - 1) / n), loc);
          keep(x);
          tagged(x);
        }
        AttrMap at = collectiveAttrs(mn, axes);
        at.set("split_dim", (int64_t)e);
        at.set("concat_dim", (int64_t)d);
        x.v = emit(OpKind::AllToAll, {x.v}, at, loc);
        keep(x);
        x.s.dims[e] = axes;
        x.s.dims[d].clear();
        tagged(x);
        x = dropPadding(x, d, G, loc);
        continue;
      }
      int e = -1;
      for (int k = 0; k < rank; ++k) {
        if (k == d) continue;
        auto want = x.s.dims[k];
        want.push_back(a);
        if (isPrefix(want, t.dims[k]) && x.v->type.shape[k] % product(mn, {a}) == 0 && !padded(G, k, mn, want) &&
            !padded(G, k, mn, t.dims[k]) && !padded(G, d, mn, x.s.dims[d])) {
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
      keep(x);
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
      keep(x);
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

  // Whether `label` of `op` may be split into n blocks: n divides every dim
  // carrying it, or (padding, docs/sharding.md "Uneven dims") every dim
  // carrying it has the same size, so all of them pad alike.
  bool splitFits(const Op& op, const DimLabels& L, int label, int64_t n) {
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
    // Drop splits that neither divide every dim carrying the label nor pad
    // them alike.
    for (auto it = p.T.begin(); it != p.T.end();)
      it = splitFits(op, L, it->first, product(p.mesh, it->second)) ? std::next(it) : p.T.erase(it);
    return p;
  }

  // The result's layout under plan `p`: the result labels' splits, and the
  // axes of split contracted labels as pending partial sums (mesh order).
  Sharding resultLayout(const DimLabels& L, const Plan& p) {
    Sharding rs = p.shardingFor(L.result);
    std::set<int> resultLabels(L.result.begin(), L.result.end());
    std::vector<std::string> partialAxes;
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

  // Operand i's local block `v` under plan `p`, with the padding rows of
  // every contracted label split over axes that do not divide it set to 0
  // (pad_mask): a contraction or sum over a padded dim must not add them
  // (docs/sharding.md, "Uneven dims"). Other labels need no mask.
  // An index operand (the row's IndexOperand trait: take's indices) has
  // its padding set to 0 along every padded split dim, so that indices
  // computed from padding rows stay in range.
  Value* maskPadding(const Op& op, const DimLabels& L, const Plan& p, size_t i, Value* v, SourceLoc loc) {
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
      v->sharding = denormalize(p.shardingFor(L.operands[i]));
      whole_[v] = G;
    }
    return v;
  }

  // What a plan costs one rank: a dry run into a scratch function of the
  // operands' reshards, the local op, and the reshard of its result (partial
  // sums included) to the decided sharding; bytes and FLOPs measured by the
  // cost model, memory as the bytes the local op holds (its local operands
  // and result).
  PlanCost costPlan(const Op& op, const DimLabels& L, const Plan& p, const Sharding& decided) {
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

  // Every legal plan of a contraction: each label split as the decided
  // result splits it, as an operand currently splits it, or not at all; no
  // axis twice, no unsplittable label split, every split dividing its dims.
  std::vector<Plan> enumeratePlans(const Op& op, const DimLabels& L, const Sharding& decided) {
    std::string meshName = decided.mesh;
    for (size_t i = 0; i < op.operands.size() && meshName.empty(); ++i) meshName = map_.at(op.operands[i]).s.mesh;
    if (meshName.empty()) return {};
    std::vector<int> labels;
    std::map<int, std::vector<std::vector<std::string>>> options;
    auto offer = [&](int label, const std::vector<std::string>& axes) {
      auto& o = options[label];
      if (std::find(labels.begin(), labels.end(), label) == labels.end()) {
        labels.push_back(label);
        o.push_back({});
      }
      if (axes.empty() || L.unsplittable.count(label)) return;
      if (std::find(o.begin(), o.end(), axes) == o.end()) o.push_back(axes);
    };
    for (size_t d = 0; d < L.result.size(); ++d)
      offer(L.result[d], decided.mesh == meshName ? decided.dims[d] : std::vector<std::string>{});
    for (size_t i = 0; i < op.operands.size(); ++i) {
      const Sharding& s = map_.at(op.operands[i]).s;
      for (size_t d = 0; d < L.operands[i].size(); ++d)
        offer(L.operands[i][d], s.mesh == meshName ? s.dims[d] : std::vector<std::string>{});
    }
    // Drop splits that neither divide every dim carrying the label nor pad
    // them alike.
    auto divides = [&](int label, const std::vector<std::string>& axes) {
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

  static bool cheaper(const PlanCost& a, const PlanCost& b) {
    return std::tie(a.bytes, a.flops, a.memory) < std::tie(b.bytes, b.flops, b.memory);
  }

  // Chooses a contraction's plan: the result-first plan, then the
  // operands-first one, then every other legal plan, each replacing the
  // best so far only when strictly cheaper (fewest bytes sent, then fewest
  // FLOPs, then least peak memory). Records the candidates for `target`.
  Plan choosePlan(const Op& op, const DimLabels& L, const Sharding& decided, const std::set<int>& resultLabels) {
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
  void setResult(LocalValue l) override {
    map_[cur_->result] = l;
    whole_[l.v] = cur_->result->type.shape;
  }
  Op* emitLoop(std::vector<Value*> operands, AttrMap attrs, const std::vector<TensorType>& types,
               std::unique_ptr<Function> body) override {
    return out_->appendMulti(OpKind::Loop, std::move(operands), std::move(attrs), types, std::move(body), cur_->loc);
  }
  void setResults(std::vector<LocalValue> ls) override {
    GSL_ASSERT(ls.size() == cur_->results.size(), "partitioner: wrong number of local results");
    for (size_t k = 0; k < ls.size(); ++k) {
      map_[cur_->results[k]] = ls[k];
      whole_[ls[k].v] = cur_->results[k]->type.shape;
    }
  }

  // A reshape whose operand already lies as its decided result would (the
  // same contiguous block on every rank): it runs locally, no collective.
  bool localReshape(const Op& op, LocalPlan& p) {
    if (op.kind != OpKind::Reshape || op.operands.size() != 1) return false;
    const Local& in = map_.at(op.operands[0]);
    if (!in.s.partial.empty() || decided_.mesh.empty() || in.s.mesh != decided_.mesh) return false;
    if (in.s.isReplicated() || decided_.isReplicated()) return false;
    auto a = contiguousLayout(mod_, op.operands[0]->type.shape, in.s);
    auto b = contiguousLayout(mod_, op.result->type.shape, decided_);
    if (!a || !b || *a != *b) return false;
    p.operands = {in.v};
    p.result = decided_;
    p.localShape = shapeOf(op.result->type, decided_);
    return true;
  }

  LocalPlan plan(const Op& op) override {
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
    p.localShape = shapeOf(op.result->type, p.result);
    if (!p.result.partial.empty()) p.partialGroup = product(plan.mesh, p.result.partial);
    return p;
  }

  std::map<const Value*, std::vector<const Op*>> users_;  // of g_'s values, built on first use
  std::set<const Op*> folded_;                             // ops whose user computes their part

  std::vector<const Op*> users(const Value* v) override {
    if (users_.empty()) {
      for (const auto& o : g_.ops)
        for (const Value* x : o->operands) users_[x].push_back(o.get());
      for (const Value* r : g_.results) users_[r].push_back(nullptr);
    }
    auto it = users_.find(v);
    return it == users_.end() ? std::vector<const Op*>{} : it->second;
  }
  void fold() override { folded_.insert(cur_); }

  Value* shiftAmongGroup(Value* v, const Sharding& s, int d, int64_t q) override {
    const auto& axes = s.dims[d];
    int64_t n = product(s.mesh, axes);
    std::vector<int64_t> perm(n);
    for (int64_t j = 0; j < n; ++j) perm[j] = ((j + q) % n + n) % n;
    AttrMap at = collectiveAttrs(s.mesh, axes);
    at.set("perm", perm);
    return emit(OpKind::CollectivePermute, {v}, at, cur_->loc);
  }

  Value* memberIndex(const Sharding& s, int d) override {
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

  Cost dryRun(const std::vector<LocalValue>& inputs,
              const std::function<LocalValue(const std::vector<LocalValue>&)>& plan) override {
    auto saved = std::move(out_);
    out_ = std::make_unique<Function>();
    std::vector<LocalValue> in;
    for (const auto& l : inputs) in.push_back({out_->addArg(l.v->type), l.s});
    LocalValue r = plan(in);
    out_->results.push_back(r.v);
    gsl::passes::Cost c = estimateCost(mod_, *out_);
    out_ = std::move(saved);
    Cost pc;
    for (auto& [k, cc] : c.collectives) pc.bytes += cc.bytes;
    pc.flops = c.flops;
    pc.memory = c.peakActivationBytes;
    return pc;
  }

  void reportPlans(const std::vector<PlanReport>& plans, size_t chosen) override {
    if (target_ != cur_->result) return;
    for (size_t i = 0; i < plans.size(); ++i) {
      PlanCandidate c;
      c.operands = plans[i].inputs;
      c.result = plans[i].result;
      c.cost = {plans[i].cost.bytes, plans[i].cost.flops, plans[i].cost.memory};
      c.chosen = i == chosen;
      report_.candidates.push_back(std::move(c));
    }
    report_.found = true;
  }

  void finish(const Op& op, const LocalPlan& p, Value* v) override {
    GSL_ASSERT(v->type.shape == p.localShape,
               std::string("partitioner: local ") + opName(op.kind) + " has shape " + shapeStr(v->type.shape) +
                   ", expected " + shapeStr(p.localShape));
    Sharding rs = p.result;
    if (rs.mesh.empty()) rs = Sharding::replicated("", op.result->type.rank());
    map_[op.result] = tagged({v, rs});
    whole_[v] = op.result->type.shape;
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
    GSL_ASSERT(map_.count(op.result) || folded_.count(&op),
               std::string("the partition rule of '") + info.mnemonic + "' set no result");
  }
};

}  // namespace

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
