#include "ir/Loop.h"

#include "ir/GradRules.h"
#include "ir/Module.h"
#include "support/Diagnostics.h"

namespace gsl::ir {

LoopInfo::LoopInfo(const Op& loop) {
  GSL_ASSERT(loop.kind == OpKind::Loop && loop.body, "LoopInfo of an op that is not a loop");
  trip = loop.attrs.getInt("trip");
  carried = (size_t)loop.attrs.getInt("carried");
  reverse = loop.attrs.has("reverse") && loop.attrs.getBool("reverse");
  GSL_ASSERT(carried <= loop.operands.size() && carried <= loop.body->results.size(),
             "malformed loop: carries more values than it has operands or body results");
  invariants = loop.operands.size() - carried;
  outputs = loop.body->results.size() - carried;
}

static std::string nth(size_t i) { return std::to_string(i); }

std::string inferLoopTypes(const std::vector<TensorType>& operands, const AttrMap& attrs,
                           const Function& body, std::vector<TensorType>& results) {
  results.clear();
  int64_t trip = attrs.getInt("trip"), carried = attrs.getInt("carried");
  if (trip < 1) return "loop trip count must be >= 1, got " + std::to_string(trip);
  if (carried < 0 || carried > (int64_t)operands.size())
    return "loop carries " + std::to_string(carried) + " values but has " + nth(operands.size()) +
           " operands";
  const size_t nc = (size_t)carried;
  if (body.args.size() != operands.size() + 1)
    return "loop body takes " + nth(body.args.size()) + " arguments, expected " +
           nth(operands.size() + 1) + " (the index, " + nth(nc) + " carried and " +
           nth(operands.size() - nc) + " invariant)";
  const TensorType index{DType::I32, {}};
  if (body.args[0]->type != index)
    return "loop body argument 0 (the iteration index) has type " + body.args[0]->type.str() +
           ", expected i32";
  for (size_t k = 0; k < operands.size(); ++k)
    if (body.args[k + 1]->type != operands[k])
      return "loop body argument " + nth(k + 1) + " has type " + body.args[k + 1]->type.str() +
             " but the loop's " + (k < nc ? "carried" : "invariant") + " operand " + nth(k) +
             " is " + operands[k].str();
  if (body.results.size() < nc)
    return "loop body yields " + nth(body.results.size()) + " values, fewer than the " + nth(nc) +
           " carried";
  for (size_t j = 0; j < nc; ++j)
    if (body.results[j]->type != operands[j])
      return "loop carried value " + nth(j) + " has type " + operands[j].str() +
             " but the body yields " + body.results[j]->type.str() + " for it";
  for (size_t j = 0; j < nc; ++j) results.push_back(operands[j]);
  for (size_t j = nc; j < body.results.size(); ++j) {
    TensorType t = body.results[j]->type;
    t.shape.insert(t.shape.begin(), trip);
    if (!t.sizeFits())
      return "loop output " + nth(j - nc) + " stacked over " + std::to_string(trip) +
             " iterations is too large (its byte size overflows 64 bits)";
    results.push_back(t);
  }
  return "";
}

static std::string needIndex(const TensorType& i, const char* op) {
  if (i != TensorType{DType::I32, {}}) return std::string(op) + " needs an i32 scalar index, got " + i.str();
  return "";
}

std::string ruleDynamicIndex(const std::vector<TensorType>& in, AttrMap&, TensorType& out) {
  if (in[0].rank() == 0) return "dynamic_index needs a tensor of rank >= 1, got " + in[0].str();
  if (auto e = needIndex(in[1], "dynamic_index"); !e.empty()) return e;
  out.dtype = in[0].dtype;
  out.shape.assign(in[0].shape.begin() + 1, in[0].shape.end());
  return "";
}

std::string ruleDynamicUpdate(const std::vector<TensorType>& in, AttrMap&, TensorType& out) {
  if (in[0].rank() == 0) return "dynamic_update needs a tensor of rank >= 1, got " + in[0].str();
  TensorType row{in[0].dtype, Shape(in[0].shape.begin() + 1, in[0].shape.end())};
  if (in[1] != row)
    return "dynamic_update of " + in[0].str() + " needs a row of type " + row.str() + ", got " +
           in[1].str();
  if (auto e = needIndex(in[2], "dynamic_update"); !e.empty()) return e;
  out = in[0];
  return "";
}

// dynamic_index(x, i): the adjoint of x is zeros with row i = g.
void gradDynamicIndex(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  og.assign(op.operands.size(), nullptr);
  if (!b.wants(0)) return;
  Value* x = op.operands[0];
  og[0] = b.op(OpKind::DynamicUpdate, {b.zerosLike(x), g, op.operands[1]});
}

// dynamic_update(x, u, i): x's adjoint is g with row i zeroed, u's is row i of g.
void gradDynamicUpdate(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  og.assign(op.operands.size(), nullptr);
  Value *u = op.operands[1], *i = op.operands[2];
  if (b.wants(0)) og[0] = b.op(OpKind::DynamicUpdate, {g, b.zerosLike(u), i});
  if (b.wants(1)) og[1] = b.op(OpKind::DynamicIndex, {g, i});
}

// x: [s, 1, .., r-1] with s unsplittable; the row (result of dynamic_index,
// operand u of dynamic_update): [1, .., r-1]; the index: no dims.
static DimLabels indexedLabels(const Op& op, std::vector<int>& row) {
  DimLabels L;
  const int r = op.operands[0]->type.rank();
  std::vector<int> x{0};
  L.unsplittable.insert(0);
  for (int d = 1; d < r; ++d) {
    x.push_back(d);
    row.push_back(d);
  }
  L.operands.push_back(x);
  return L;
}

DimLabels shardDynamicIndex(const Op& op) {
  std::vector<int> row;
  DimLabels L = indexedLabels(op, row);
  L.operands.push_back({});  // i
  L.result = row;
  return L;
}

DimLabels shardDynamicUpdate(const Op& op) {
  std::vector<int> row;
  DimLabels L = indexedLabels(op, row);
  L.result = L.operands[0];
  L.operands.push_back(row);  // u
  L.operands.push_back({});   // i
  return L;
}

int64_t PipelineSchedule::stageOf(const Module& m, int64_t rank) const {
  const Mesh* msh = m.findMesh(mesh);
  GSL_ASSERT(msh, "internal error: a pipeline names an unknown mesh");
  const std::vector<int64_t> c = msh->coords(rank);
  int64_t s = 0;
  for (int64_t a : axes) s = s * msh->axes[a].size + c[a];
  return s;
}

std::vector<PipelineSchedule> findPipelines(const Function& f, const Module& m) {
  std::vector<PipelineSchedule> out;
  for (const auto& op : f.ops) {
    if (op->kind != OpKind::Loop) continue;
    if (!op->attrs.has("pipeline_microbatches")) {
      auto inner = findPipelines(*op->body, m);
      out.insert(out.end(), inner.begin(), inner.end());
      continue;
    }
    if (op->attrs.has("reverse") && op->attrs.getBool("reverse")) continue;  // a backward pipeline
    out.push_back(pipelineScheduleOf(*op, m));
  }
  return out;
}

PipelineSchedule pipelineScheduleOf(const Op& timeLoop, const Module& m) {
  PipelineSchedule p;
  p.timeLoop = &timeLoop;
  p.microbatches = timeLoop.attrs.getInt("pipeline_microbatches");
  p.rounds = timeLoop.attrs.getInt("pipeline_rounds");
  p.iterations = timeLoop.attrs.getInt("trip");
  p.mesh = timeLoop.attrs.getString("pipeline_mesh");
  p.axes = timeLoop.attrs.getInts("pipeline_axes");
  const Mesh* mesh = m.findMesh(p.mesh);
  GSL_ASSERT(mesh, "internal error: a pipeline names an unknown mesh");
  for (int64_t a : p.axes) p.stages *= mesh->axes[a].size;
  return p;
}

bool readByIteration(const Function& body, const Value* a) {
  bool any = false;
  for (const auto& o : body.ops)
    for (size_t k = 0; k < o->operands.size(); ++k)
      if (o->operands[k] == a) {
        if (o->kind != OpKind::DynamicIndex || k != 0 || o->operands[1] != body.args[0]) return false;
        any = true;
      }
  for (const Value* r : body.results)
    if (r == a) return false;
  return any;
}

}  // namespace gsl::ir
