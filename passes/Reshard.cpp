// Resharding: a value moved from one sharding to another with collectives
// (passes/SpmdPartitioner.h lists the steps), padded dims included.
#include "passes/Partitioner.h"

#include <algorithm>

#include "support/Diagnostics.h"

namespace gsl::passes::partitioner {

Shape Partitioner::wholeOf(const Local& x) {
  if (auto it = whole_.find(x.v); it != whole_.end()) return it->second;
  return ir::globalShape(mod_, x.v->type, annotationOf(x.s));
}

Value* Partitioner::padTo(Value* v, int d, int64_t rows, SourceLoc loc) {
  TensorType z = v->type;
  z.shape[d] = rows - v->type.shape[d];
  AttrMap c;
  c.set("value", 0.0);
  Value* zeros = out_->append(OpKind::Constant, {}, c, z, loc)->result;
  AttrMap at;
  at.set("axis", (int64_t)d);
  return emit(OpKind::Concat, {v, zeros}, at, loc);
}

Local Partitioner::gatherWhole(Local x, int d, const Shape& G, SourceLoc loc) {
  const std::string& mn = x.s.mesh;
  while (!x.s.dims[d].empty()) {
    AttrMap at = collectiveAttrs(mn, {x.s.dims[d].back()});
    at.set("dim", (int64_t)d);
    x.v = emit(OpKind::AllGather, {x.v}, at, loc);
    x.s.dims[d].pop_back();
    whole_[x.v] = G;
    tag(x);
  }
  return dropPadding(x, d, G, loc);
}

Local Partitioner::dropPadding(Local x, int d, const Shape& G, SourceLoc loc) {
  if (x.v->type.shape[d] == G[d]) return x;
  AttrMap at;
  at.set("axis", (int64_t)d);
  at.set("start", (int64_t)0);
  at.set("end", G[d]);
  x.v = emit(OpKind::Slice, {x.v}, at, loc);
  whole_[x.v] = G;
  tag(x);
  return x;
}

const Mesh& Partitioner::mesh(const std::string& name) {
  const Mesh* m = mod_.findMesh(name);
  GSL_ASSERT(m, "unknown mesh '" + name + "' in partitioner");
  return *m;
}

int64_t Partitioner::product(const std::string& meshName, const Axes& axes) {
  if (axes.empty()) return 1;
  const Mesh& m = mesh(meshName);
  int64_t p = 1;
  for (const auto& a : axes) p *= m.axisSize(a);
  return p;
}

std::vector<int64_t> Partitioner::axisIndices(const std::string& meshName, const Axes& axes) {
  const Mesh& m = mesh(meshName);
  std::vector<int64_t> r;
  for (const auto& a : axes) r.push_back(m.axisIndex(a));
  return r;
}

Value* Partitioner::emit(OpKind k, std::vector<Value*> operands, AttrMap at, SourceLoc loc) {
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

AttrMap Partitioner::collectiveAttrs(const std::string& meshName, const Axes& axes) {
  AttrMap at;
  at.set("mesh", meshName);
  at.set("axes", axisIndices(meshName, axes));
  at.set("n", product(meshName, axes));
  return at;
}

Local Partitioner::tag(Local l) {
  l.v->sharding = annotationOf(l.s);
  if (l.v->sharding && l.v->sharding->isReplicated() && l.s.partial.empty()) l.v->sharding = std::nullopt;
  return l;
}

Local Partitioner::permuteBlocks(Local x, int d, const Axes& order, SourceLoc loc) {
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
  return tag(x);
}

Local Partitioner::reshard(Local x, Sharding t, SourceLoc loc) {
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
      tag(x);
      AttrMap at = collectiveAttrs(mn, want);
      at.set("dim", (int64_t)d);
      x.v = emit(OpKind::ReduceScatter, {x.v}, at, loc);
      keep(x);
      x.s.dims[d] = want;
      for (const auto& a : want) x.s.partial.erase(std::find(x.s.partial.begin(), x.s.partial.end(), a));
      tag(x);
    }
    Axes rest;
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
          tag(x);
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
      at.set("reduce", ReduceOp::Sum);
      x.v = emit(OpKind::AllReduce, {x.v}, at, loc);
      keep(x);
    }
    x.s.partial.clear();
    tag(x);
  }
  auto isPrefix = [](const Axes& a, const Axes& b) {
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
    Symbol a = x.s.dims[d].back();
    if (int e = movesWhole(d); e >= 0 && (padded(G, d, mn, x.s.dims[d]) || padded(G, e, mn, x.s.dims[d]))) {
      // A padded all_to_all over the dim's axes (one or several, the
      // group's members in the axes' order, as the blocks lie): dim e
      // padded with zeros to n whole blocks and split over them; dim d
      // joined from the n blocks, its padding rows (at the end once
      // joined) sliced off.
      const Axes axes = x.s.dims[d];
      const int64_t n = product(mn, axes);
      if (padded(G, e, mn, axes)) {
        x.v = padTo(x.v, e, n * ((G[e] + n - 1) / n), loc);
        keep(x);
        tag(x);
      }
      AttrMap at = collectiveAttrs(mn, axes);
      at.set("split_dim", (int64_t)e);
      at.set("concat_dim", (int64_t)d);
      x.v = emit(OpKind::AllToAll, {x.v}, at, loc);
      keep(x);
      x.s.dims[e] = axes;
      x.s.dims[d].clear();
      tag(x);
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
    tag(x);
  }
  // 3. Split further where the target wants more axes: a local slice.
  for (int d = 0; d < rank; ++d) {
    if (x.s.dims[d].size() == t.dims[d].size()) continue;
    Axes extra(t.dims[d].begin() + x.s.dims[d].size(), t.dims[d].end());
    AttrMap at = collectiveAttrs(mn, extra);
    at.set("dim", (int64_t)d);
    x.v = emit(OpKind::ShardSlice, {x.v}, at, loc);
    keep(x);
    x.s.dims[d] = t.dims[d];
    tag(x);
  }
  GSL_ASSERT(x.s == t, "reshard did not reach its target: " + x.s.str() + " vs " + t.str());
  return x;
}

}  // namespace gsl::passes::partitioner
