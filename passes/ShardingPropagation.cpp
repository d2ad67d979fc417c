#include "passes/ShardingPropagation.h"

#include <algorithm>
#include <map>
#include <set>

#include "ir/ShardRules.h"

namespace gsl::passes {

using namespace ir;

namespace {

int splitDims(const Sharding& s) {
  int n = 0;
  for (const auto& d : s.dims) n += !d.empty();
  return n;
}

struct Propagator {
  const Module& mod;
  Function& f;

  int64_t axesProduct(const Mesh& m, const std::vector<std::string>& axes) {
    int64_t p = 1;
    for (const auto& a : axes) p *= m.axisSize(a);
    return p;
  }

  // Builds a sharding for value `v` whose dims carry `labels`, from a
  // label -> axes map, applying rule 4.
  Sharding build(const std::string& mesh, const Value* v, const std::vector<int>& labels,
                 const std::map<int, std::vector<std::string>>& axes, const DimLabels& L) {
    const Mesh* m = mod.findMesh(mesh);
    Sharding s = Sharding::replicated(mesh, v->type.rank());
    std::set<std::string> used;
    for (int d = 0; d < v->type.rank(); ++d) {
      auto it = axes.find(labels[d]);
      if (it == axes.end() || L.unsplittable.count(labels[d])) continue;
      bool clash = false;
      for (const auto& a : it->second) clash |= used.count(a) > 0;
      if (clash || !m || v->type.shape[d] % axesProduct(*m, it->second) != 0) continue;
      for (const auto& a : it->second) used.insert(a);
      s.dims[d] = it->second;
    }
    return s;
  }

  // Collects label -> axes proposals from the given (value, labels) pairs
  // that have a sharding on `mesh`, most-split first (rule 2).
  void collect(std::vector<std::pair<const Sharding*, const std::vector<int>*>> srcs, const DimLabels& L,
               std::map<int, std::vector<std::string>>& out) {
    std::stable_sort(srcs.begin(), srcs.end(),
                     [](auto& a, auto& b) { return splitDims(*a.first) > splitDims(*b.first); });
    for (auto& [s, labels] : srcs)
      for (size_t d = 0; d < s->dims.size() && d < labels->size(); ++d)
        if (!s->dims[d].empty() && !L.unsplittable.count((*labels)[d]) && !out.count((*labels)[d]))
          out[(*labels)[d]] = s->dims[d];
  }

  bool forward(Op& op) {
    if (op.result->sharding) return false;
    DimLabels L = dimLabels(op);
    std::string mesh;
    std::vector<std::pair<const Sharding*, const std::vector<int>*>> srcs;
    for (size_t i = 0; i < op.operands.size(); ++i) {
      const auto& s = op.operands[i]->sharding;
      if (!s || s->mesh.empty()) continue;  // mesh "": fixed as replicated
      if (mesh.empty()) mesh = s->mesh;
      if (s->mesh == mesh) srcs.push_back({&*s, &L.operands[i]});
    }
    if (mesh.empty()) return false;
    std::map<int, std::vector<std::string>> axes;
    collect(srcs, L, axes);
    op.result->sharding = build(mesh, op.result, L.result, axes, L);
    op.result->shardingVia = &op;
    // The source: the operand with the most split dims (rule 2).
    const Value* best = nullptr;
    for (Value* v : op.operands)
      if (v->sharding && v->sharding->mesh == mesh && (!best || splitDims(*v->sharding) > splitDims(*best->sharding)))
        best = v;
    op.result->shardingSource = best;
    return true;
  }

  bool backward(Op& op) {
    if (!op.result->sharding || op.result->sharding->mesh.empty()) return false;
    bool changed = false;
    DimLabels L = dimLabels(op);
    const std::string& mesh = op.result->sharding->mesh;
    for (size_t i = 0; i < op.operands.size(); ++i) {
      Value* v = op.operands[i];
      if (v->sharding) continue;
      std::vector<std::pair<const Sharding*, const std::vector<int>*>> srcs{{&*op.result->sharding, &L.result}};
      for (size_t j = 0; j < op.operands.size(); ++j)
        if (j != i && op.operands[j]->sharding && op.operands[j]->sharding->mesh == mesh)
          srcs.push_back({&*op.operands[j]->sharding, &L.operands[j]});
      std::map<int, std::vector<std::string>> axes;
      collect(srcs, L, axes);
      v->sharding = build(mesh, v, L.operands[i], axes, L);
      v->shardingVia = &op;
      v->shardingSource = op.result;
      changed = true;
    }
    return changed;
  }

  void run() {
    // Function results annotated by the user constrain the returned values.
    for (size_t i = 0; i < f.results.size(); ++i)
      if (i < f.resultShardings.size() && f.resultShardings[i] && !f.results[i]->sharding &&
          f.results[i]->def)
        f.results[i]->sharding = f.resultShardings[i];
    for (size_t round = 0; round <= f.ops.size() + 1; ++round) {
      bool changed = false;
      for (auto& op : f.ops) changed |= forward(*op);
      for (auto it = f.ops.rbegin(); it != f.ops.rend(); ++it) changed |= backward(**it);
      if (!changed) break;
    }
  }
};

}  // namespace

void propagateShardings(const Module& m, Function& f) {
  Propagator p{m, f};
  p.run();
}

void propagateShardings(Module& m) {
  for (auto& f : m.functions) propagateShardings(m, *f);
}

}  // namespace gsl::passes
