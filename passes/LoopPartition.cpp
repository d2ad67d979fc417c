#include "passes/LoopPartition.h"

#include <algorithm>
#include <map>

#include "ir/Loop.h"
#include "passes/SpmdPartitioner.h"
#include "support/Diagnostics.h"

namespace gsl::passes {

using namespace ir;

namespace {

// The normal form (ir/Sharding.h) without partial axes.
Sharding decidedOf(const std::optional<Sharding>& s, int rank) {
  Sharding t = normalForm(s, rank);
  t.partial.clear();
  return t;
}

// Whether a value of `body` is read by an op or returned.
bool isUsed(const Function& body, const Value* v) {
  for (const auto& o : body.ops)
    for (const Value* x : o->operands)
      if (x == v) return true;
  return std::find(body.results.begin(), body.results.end(), v) != body.results.end();
}

// The result types of a per-rank loop with body `local`: its carried
// values, then its per-iteration outputs stacked `trip` deep.
std::vector<TensorType> loopResultTypes(const Function& local, size_t carried, int64_t trip) {
  std::vector<TensorType> types;
  for (size_t j = 0; j < local.results.size(); ++j) {
    TensorType t = local.results[j]->type;
    if (j >= carried) t.shape.insert(t.shape.begin(), trip);
    types.push_back(t);
  }
  return types;
}

// Records per-rank loop `l`'s results as the local values of global loop
// `op`'s: carried ones lie as the body arguments (argS), stacked outputs as
// their rows (outS) with the stacked dim 0 split over `stackAxes` of mesh
// `stackMesh` (none: unsplit).
void setLoopResults(partitioner::Partitioner& b, const Op& op, Op* l, size_t carried, const std::vector<Sharding>& argS,
                    const std::vector<Sharding>& outS, const std::string& stackMesh,
                    const Axes& stackAxes) {
  std::vector<partitioner::LocalValue> results;
  for (size_t j = 0; j < l->results.size(); ++j) {
    Sharding s;
    if (j < carried) {
      s = argS[j];
    } else {
      s = outS[j - carried];
      if (!stackAxes.empty()) {
        if (s.mesh.empty()) s = Sharding::replicated(stackMesh, op.results[j]->type.rank() - 1);
        s.dims.insert(s.dims.begin(), stackAxes);
      } else if (s.mesh.empty()) {
        s = Sharding::replicated("", op.results[j]->type.rank());
      } else {
        s.dims.insert(s.dims.begin(), Axes{});
      }
    }
    results.push_back(b.tag({l->results[j], s}));
  }
  b.setResults(std::move(results));
}

Value* appendTyped(Function& f, OpKind k, std::vector<Value*> operands, SourceLoc loc) {
  std::vector<TensorType> in;
  for (Value* v : operands) in.push_back(v->type);
  AttrMap at;
  TensorType t;
  std::string why = inferType(k, in, at, t);
  GSL_ASSERT(why.empty(), "internal error: " + why);
  return f.append(k, std::move(operands), std::move(at), t, loc)->result;
}

// The stage loop split over its stage axes (see the header); false if it
// does not qualify, having emitted nothing.
bool partitionStageLoop(const Module& m, partitioner::Partitioner& b, const Op& op) {
  const LoopInfo info(op);
  const Function& body = *op.body;
  const std::string meshName = op.attrs.getString("stage_mesh");
  const Mesh* mesh = m.findMesh(meshName);
  GSL_ASSERT(mesh, "internal error: a stage loop names an unknown mesh");
  Axes axes;
  int64_t n = 1;
  for (int64_t i : op.attrs.getInts("stage_axes")) {
    axes.emplace_back(mesh->axes[i].name);
    n *= mesh->axes[i].size;
  }
  if (n == 1 || info.trip % n != 0) return false;
  for (size_t j = 0; j < info.carried; ++j)
    if (body.results[j] != body.args[j + 1]) return false;
  std::vector<bool> sliced(op.operands.size(), false);
  for (size_t k = info.carried; k < op.operands.size(); ++k)
    sliced[k] = readByIteration(body, body.args[k + 1]);
  // The index only picks rows of the sliced operands.
  for (const auto& o : body.ops)
    for (size_t k = 0; k < o->operands.size(); ++k)
      if (o->operands[k] == body.args[0]) {
        const Value* x = o->operands[0];
        if (o->kind != OpKind::DynamicIndex || k != 1 || x->def || x->argIndex < 1 || !sliced[x->argIndex - 1])
          return false;
      }
  auto usesStage = [&](const Sharding& s) {
    for (const auto& dim : s.dims)
      for (const auto& a : dim)
        if (std::count(axes.begin(), axes.end(), a)) return true;
    return !s.partial.empty();
  };
  // How each operand lies per rank: a sliced one split over the stage axes
  // on dim 0 (its rows), the others as the body reads them.
  std::vector<Sharding> argS;
  for (size_t k = 0; k < op.operands.size(); ++k) {
    const Value* a = body.args[k + 1];
    Sharding s = decidedOf(a->sharding, a->type.rank());
    if (sliced[k]) {
      if (s.mesh.empty()) s = Sharding::replicated(meshName, a->type.rank());
      if (s.mesh != meshName) return false;
      Sharding rest = s;
      rest.dims[0].clear();
      if (usesStage(rest)) return false;
      s.dims[0] = axes;
    } else if (usesStage(s) && isUsed(body, a)) {  // an unused one may lie as it does
      return false;
    }
    argS.push_back(s);
  }
  // One iteration on one row: the body with row i of each sliced operand
  // as an argument of its own.
  auto row = std::make_unique<Function>();
  row->name = body.name;
  row->loc = body.loc;
  std::map<const Value*, Value*> vmap;
  vmap[body.args[0]] = row->addArg(body.args[0]->type);
  for (size_t k = 0; k < op.operands.size(); ++k) {
    const Value* a = body.args[k + 1];
    TensorType t = a->type;
    Sharding s = argS[k];
    if (sliced[k]) {
      t.shape.erase(t.shape.begin());
      s.dims.erase(s.dims.begin());
    }
    Value* r = row->addArg(t);
    r->sharding = annotationOf(s);
    vmap[a] = r;
  }
  for (const auto& o : body.ops) {
    if (o->kind == OpKind::DynamicIndex && o->operands[0]->def == nullptr && o->operands[0]->argIndex > 0 &&
        sliced[o->operands[0]->argIndex - 1] && o->operands[1] == body.args[0]) {
      vmap[o->result] = vmap.at(o->operands[0]);
      continue;
    }
    std::vector<Value*> ops;
    for (const Value* x : o->operands) ops.push_back(vmap.at(x));
    Op* c = row->appendClone(*o, ops);
    for (size_t r = 0; r < o->results.size(); ++r) vmap[o->results[r]] = c->results[r];
  }
  std::vector<Sharding> outS;
  for (size_t j = 0; j < body.results.size(); ++j) {
    row->results.push_back(vmap.at(body.results[j]));
    Sharding s = j < info.carried ? argS[j] : decidedOf(body.results[j]->sharding, body.results[j]->type.rank());
    if (j >= info.carried && usesStage(s)) return false;
    row->resultShardings.push_back(s.mesh.empty() ? Sharding::replicated("", body.results[j]->type.rank()) : s);
    if (j >= info.carried) outS.push_back(s);
  }
  std::unique_ptr<Function> local = partitionFunction(m, *row);

  // The per-rank loop: iteration i of the rank's rows.
  std::vector<Value*> operands;
  for (size_t k = 0; k < op.operands.size(); ++k) operands.push_back(b.reshard(b.local(op.operands[k]), argS[k]).v);
  auto pb = std::make_unique<Function>();
  pb->name = body.name;
  pb->loc = body.loc;
  std::map<const Value*, Value*> lmap;
  Value* i = pb->addArg(local->args[0]->type);
  lmap[local->args[0]] = i;
  for (size_t k = 0; k < op.operands.size(); ++k) {
    Value* a = pb->addArg(operands[k]->type);
    a->sharding = annotationOf(argS[k]);
    lmap[local->args[k + 1]] = sliced[k] ? appendTyped(*pb, OpKind::DynamicIndex, {a, i}, op.loc) : a;
  }
  for (const auto& o : local->ops) {
    std::vector<Value*> ops;
    for (const Value* x : o->operands) ops.push_back(lmap.at(x));
    Op* c = pb->appendClone(*o, ops);
    for (size_t r = 0; r < o->results.size(); ++r) lmap[o->results[r]] = c->results[r];
  }
  for (const Value* r : local->results) pb->results.push_back(lmap.at(r));
  pb->resultShardings = local->resultShardings;
  const int64_t trip = info.trip / n;
  std::vector<TensorType> types = loopResultTypes(*local, info.carried, trip);
  AttrMap at = op.attrs;
  at.set("trip", trip);
  at.erase("stage_mesh");
  at.erase("stage_axes");
  Op* l = b.emitLoop(std::move(operands), at, types, std::move(pb));
  setLoopResults(b, op, l, info.carried, argS, outS, meshName, axes);
  return true;
}

}  // namespace

void partitionLoop(const Module& m, partitioner::Partitioner& b, const Op& op) {
  if (op.attrs.has("stage_mesh") && partitionStageLoop(m, b, op)) return;
  const LoopInfo info(op);
  const Function& body = *op.body;
  // How each body argument lies: carried values keep one sharding in every
  // iteration (their argument's, the fixed point of propagation), the
  // invariants theirs; the index is a replicated scalar.
  std::unique_ptr<Function> g = body.clone();
  std::vector<Sharding> argS;
  for (size_t k = 0; k < op.operands.size(); ++k) {
    Value* a = g->args[k + 1];
    argS.push_back(decidedOf(a->sharding, a->type.rank()));
    a->sharding = annotationOf(argS.back());
  }
  g->args[0]->sharding = std::nullopt;
  g->resultShardings.assign(g->results.size(), std::nullopt);
  std::vector<Sharding> outS;  // per-iteration outputs (rows)
  for (size_t j = 0; j < g->results.size(); ++j) {
    Sharding s = j < info.carried ? argS[j] : decidedOf(g->results[j]->sharding, g->results[j]->type.rank());
    // The partitioner reads mesh "" in resultShardings as replicated.
    g->resultShardings[j] = s.mesh.empty() ? Sharding::replicated("", g->results[j]->type.rank()) : s;
    if (j >= info.carried) outS.push_back(s);
  }
  std::unique_ptr<Function> local = partitionFunction(m, *g);

  std::vector<Value*> operands;
  for (size_t k = 0; k < op.operands.size(); ++k)
    operands.push_back(b.reshard(b.local(op.operands[k]), argS[k]).v);
  std::vector<TensorType> types = loopResultTypes(*local, info.carried, info.trip);
  Op* l = b.emitLoop(std::move(operands), op.attrs, types, std::move(local));
  setLoopResults(b, op, l, info.carried, argS, outS, "", {});
}

}  // namespace gsl::passes
