#include "passes/UpdateSharding.h"

#include <algorithm>
#include <map>
#include <set>

#include "support/Diagnostics.h"

namespace gsl::passes {

using namespace ir;

namespace {

bool isMarker(const Op &op) {
  return op.kind == OpKind::Copy && op.attrs.get("update") &&
         op.attrs.get("param");
}

// Removes marker copy `op`: its users read its operand.
void unmark(Function &f, Op *op) {
  Value *from = op->result;
  Value *to = op->operands[0];
  for (auto &o : f.ops)
    for (Value *&v : o->operands)
      if (v == from)
        v = to;
  for (Value *&r : f.results)
    if (r == from)
      r = to;
  f.names.appendCallPaths(to, from);
  f.ops.erase(std::find_if(f.ops.begin(), f.ops.end(),
                           [&](const auto &o) { return o.get() == op; }));
}

size_t users(const Function &f, const Value *v) {
  size_t n = 0;
  for (const auto &o : f.ops)
    n += (size_t)std::count(o->operands.begin(), o->operands.end(), v);
  return n + (size_t)std::count(f.results.begin(), f.results.end(), v);
}

struct DataAxes {
  std::string mesh;
  Axes axes; // in the mesh's axis order
};

// The mesh axes (size > 1) that split a data input of the step: argument
// i < nData as it lies, or as the step's annotation of it wants it.
DataAxes dataAxes(const Module &m, const Function &f, size_t nData) {
  std::vector<const Sharding *> seen;
  for (size_t i = 0; i < nData; ++i) {
    if (f.args[i]->sharding)
      seen.push_back(&*f.args[i]->sharding);
    if (const auto &w = f.wantedSharding(i))
      seen.push_back(&*w);
  }
  DataAxes r;
  std::set<std::string> used;
  for (const Sharding *s : seen) {
    if (s->mesh.empty())
      continue;
    if (r.mesh.empty())
      r.mesh = s->mesh;
    if (s->mesh != r.mesh)
      continue;
    for (const auto &d : s->dims)
      used.insert(d.begin(), d.end());
  }
  if (const Mesh *mesh = m.findMesh(r.mesh))
    for (const auto &a : mesh->axes)
      if (used.count(a.name) && a.size > 1)
        r.axes.emplace_back(a.name);
  return r;
}

// The sharding of param p's update: its own plus the data axes it is not
// split over, on one dim it leaves unsplit; none when it stays replicated.
std::optional<Sharding> updateSharding(const Module &m, const Param &p,
                                       const DataAxes &data) {
  const Mesh *mesh = m.findMesh(data.mesh);
  if (!mesh)
    return std::nullopt;
  const int rank = p.type.rank();
  Sharding s = p.sharding && !p.sharding->mesh.empty()
                   ? *p.sharding
                   : Sharding::replicated(data.mesh, rank);
  if (s.mesh != data.mesh || !s.partial.empty())
    return std::nullopt;
  std::set<std::string> used;
  int64_t local = p.type.numElements();
  for (const auto &d : s.dims) {
    used.insert(d.begin(), d.end());
    for (const auto &a : d)
      local /= mesh->axisSize(a);
  }
  Axes add;
  int64_t n = 1;
  for (const auto &a : data.axes)
    if (!used.count(a)) {
      add.push_back(a);
      n *= mesh->axisSize(a);
    }
  if (add.empty() || local < kMinUpdateShardElements)
    return std::nullopt;
  // The dim: unsplit (or split over axes of size 1 only), not a stacked
  // layer dim, at least n long; the largest that n divides, else the
  // largest (padded).
  int best = -1;
  bool bestEven = false;
  for (int d = p.init.stacked; d < rank; ++d) {
    const int64_t size = p.type.shape[d];
    int64_t split = 1;
    for (const auto &a : s.dims[d])
      split *= mesh->axisSize(a);
    if (split != 1 || size < n)
      continue;
    const bool even = size % n == 0;
    if (best < 0 || (even && !bestEven) ||
        (even == bestEven && size > p.type.shape[best])) {
      best = d;
      bestEven = even;
    }
  }
  if (best < 0)
    return std::nullopt;
  // The dim's axes in the mesh's order (its size-1 axes kept).
  Axes &axes = s.dims[best];
  axes.insert(axes.end(), add.begin(), add.end());
  Axes ordered;
  for (const auto &a : mesh->axes)
    if (std::find(axes.begin(), axes.end(), a.name) != axes.end())
      ordered.emplace_back(a.name);
  axes = ordered;
  return s;
}

// A state's sharding from its param's update sharding: Adafactor's factored
// statistics drop the averaged dim (row: the last, col: the one before).
Sharding stateSharding(const Sharding &u, const std::string &slot) {
  Sharding s = u;
  const int r = (int)s.dims.size();
  if (slot == "row")
    s.dims.erase(s.dims.begin() + (r - 1));
  if (slot == "col")
    s.dims.erase(s.dims.begin() + (r - 2));
  return s;
}

} // namespace

void shardWeightUpdates(const Module &m, Function &f,
                        ShardingProvenance *provenance) {
  if (!f.train || f.train->kind != TrainRequest::Minimize)
    return;
  const TrainRequest &tr = *f.train;
  std::vector<Op *> markers;
  for (auto &op : f.ops)
    if (isMarker(*op))
      markers.push_back(op.get());
  if (markers.empty())
    return;
  // The step's arguments: its data inputs, the step counter, the host's
  // scalars, the states (ir::TrainRequest).
  GSL_ASSERT(f.args.size() >= tr.states.size() + tr.scalars.size() + 1,
             "internal error: a training step without its arguments");
  const size_t firstState = f.args.size() - tr.states.size();
  const size_t nData = firstState - tr.scalars.size() - 1;
  std::map<std::string, Sharding> updates; // param -> its update's sharding
  if (m.updateSharding) {
    const DataAxes data = dataAxes(m, f, nData);
    if (!data.axes.empty())
      for (const auto &name : tr.params)
        if (auto u = updateSharding(m, *m.findParam(name), data))
          updates.emplace(name, *u);
  }
  for (Op *op : markers) {
    auto it = updates.find(op->attrs.getString("param"));
    const std::string role = op->attrs.getString("update");
    if (it == updates.end()) {
      unmark(f, op);
      continue;
    }
    Value *v = op->result;
    if (role == "new") {
      // Computed split, gathered back to the param's own sharding.
      const Param &p = *m.findParam(op->attrs.getString("param"));
      v->sharding =
          p.sharding ? *p.sharding : Sharding::replicated("", p.type.rank());
      continue;
    }
    v->sharding = it->second;
    // The gradient's producer computes the split directly: its plan leaves
    // the sum over the data axes partial and reduce_scatters it (in a layer
    // loop, each layer's gradient), instead of an all_reduce and a slice.
    Value *g = op->operands[0];
    if (role == "grad" && g->def && !g->sharding && users(f, g) == 1) {
      g->sharding = it->second;
      if (provenance)
        provenance->record(g, op, v);
    }
  }
  for (size_t k = 0; k < tr.states.size(); ++k) {
    auto it = updates.find(tr.states[k].param);
    if (it == updates.end())
      continue;
    const Sharding s = stateSharding(it->second, tr.states[k].slot);
    f.args[firstState + k]->sharding = s;
    const size_t res = 1 + tr.params.size() + k;
    if (res < f.resultShardings.size())
      f.resultShardings[res] = s;
  }
}

} // namespace gsl::passes
