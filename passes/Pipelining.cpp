#include "passes/Pipelining.h"

#include <algorithm>

#include "ir/GradRules.h"
#include "ir/Loop.h"
#include "support/Diagnostics.h"

namespace gsl::passes {

using namespace ir;

namespace {

Op* appendLoop(Function& f, std::vector<Value*> operands, const AttrMap& at, std::unique_ptr<Function> body,
               SourceLoc loc) {
  std::vector<TensorType> in, types;
  for (Value* v : operands) in.push_back(v->type);
  std::string why = inferLoopTypes(in, at, *body, types);
  GSL_ASSERT(why.empty(), "internal error: pipelining built an ill-typed loop: " + why);
  return f.appendMulti(OpKind::Loop, std::move(operands), at, types, std::move(body), loc);
}

// The param a loop operand reads, if it is a param of a group whose layer
// dim is split (its stage axes).
const Param* stagedParam(const Module& m, const Value* v) {
  if (!v->def || v->def->kind != OpKind::Param) return nullptr;
  const Param* p = m.findParam(v->def->attrs.getString("name"));
  if (!p || !p->sharding || p->sharding->dims.empty() || p->sharding->dims[0].empty()) return nullptr;
  return p;
}

// Rewrites the microbatch loop `mb` (an op of f) into the pipeline's
// schedule; returns false (and changes nothing) when it has one stage.
bool pipelineLoop(const Module& m, Function& f, Op& mb) {
  const LoopInfo outer(mb);
  const int64_t M = mb.attrs.getInt("microbatches");
  const Function& mbBody = *mb.body;
  // The microbatch body: a dynamic_index per carried value, the layer loop, yield.
  const Op* layers = nullptr;
  for (const auto& op : mbBody.ops)
    if (op->kind == OpKind::Loop) layers = op.get();
  GSL_ASSERT(layers && outer.carried == 1, "internal error: a microbatch loop without its layer loop");
  const LoopInfo inner(*layers);
  const size_t C = inner.carried;
  const int64_t L = inner.trip;
  // The loop's operands: the token, the C microbatched inputs, then the
  // layer loop's invariants (in the layer loop's order).
  GSL_ASSERT(mb.operands.size() == 1 + C + (layers->operands.size() - C),
             "internal error: a microbatch loop's operands do not match its layer loop");
  std::vector<Value*> xs(mb.operands.begin() + 1, mb.operands.begin() + 1 + C);
  std::vector<Value*> inv(mb.operands.begin() + 1 + C, mb.operands.end());
  const Param* stagedAny = nullptr;
  std::vector<bool> staged(inv.size(), false);
  for (size_t k = 0; k < inv.size(); ++k)
    if (const Param* p = stagedParam(m, inv[k])) staged[k] = true, stagedAny = p;
  GSL_ASSERT(stagedAny, "internal error: a microbatch loop reads no staged param group");
  const std::string meshName = stagedAny->sharding->mesh;
  const std::vector<std::string> axes = stagedAny->sharding->dims[0];
  const Mesh* mesh = m.findMesh(meshName);
  GSL_ASSERT(mesh, "internal error: unknown stage mesh");
  int64_t S = 1;
  std::vector<int64_t> axisIdx;
  for (const auto& a : axes) {
    S *= mesh->axes[mesh->axisIndex(a)].size;
    axisIdx.push_back(mesh->axisIndex(a));
  }
  if (S == 1) return false;
  GSL_ASSERT(L % S == 0, "internal error: the layers do not divide into the stages");
  const int64_t k = L / S, T = M + S - 1;
  const SourceLoc loc = mb.loc;

  GradBuilder g(f);
  g.setLoc(loc);
  // The stages' layers: [L, ...] as [S, L/S, ...].
  std::vector<Value*> timeInv = xs;
  for (size_t j = 0; j < inv.size(); ++j) {
    if (!staged[j]) {
      timeInv.push_back(inv[j]);
      continue;
    }
    Shape s{S, k};
    s.insert(s.end(), inv[j]->type.shape.begin() + 1, inv[j]->type.shape.end());
    timeInv.push_back(g.reshape(inv[j], s));
  }
  std::vector<Value*> timeOperands;
  for (size_t c = 0; c < C; ++c) {
    Shape s{S};
    s.insert(s.end(), xs[c]->type.shape.begin() + 1, xs[c]->type.shape.end());  // [S, b, ...]
    timeOperands.push_back(g.constant(0.0, xs[c]->type.dtype, s));
  }
  timeOperands.insert(timeOperands.end(), timeInv.begin(), timeInv.end());

  // The time loop's body: shift, then every stage's layers.
  auto tb = std::make_unique<Function>();
  tb->name = f.name + ".pipeline";
  Value* t = tb->addArg({DType::I32, {}});
  std::vector<Value*> state, xsArg, invArg;
  for (size_t c = 0; c < C; ++c) state.push_back(tb->addArg(timeOperands[c]->type));
  for (size_t c = 0; c < C; ++c) xsArg.push_back(tb->addArg(xs[c]->type));
  for (size_t j = 0; j < inv.size(); ++j) invArg.push_back(tb->addArg(timeInv[C + j]->type));
  GradBuilder tg(*tb);
  tg.setLoc(loc);
  Value* tc = tg.op(OpKind::Minimum, {t, tg.constant((double)(M - 1), DType::I32)});
  std::vector<Value*> stageIn;
  for (size_t c = 0; c < C; ++c) {
    const TensorType& st = state[c]->type;
    Value* in = tg.op(OpKind::DynamicIndex, {xsArg[c], tc});  // [b, ...]
    AttrMap sl;
    sl.set("axis", (int64_t)0);
    sl.set("start", (int64_t)0);
    sl.set("end", S - 1);
    Shape one = st.shape;
    one[0] = 1;
    AttrMap cat;
    cat.set("axis", (int64_t)0);
    Value* shifted = tg.op(OpKind::Concat, {tg.constant(0.0, st.dtype, one), tg.op(OpKind::Slice, {state[c]}, sl)}, cat);
    Shape rowShape(st.rank(), 1);
    rowShape[0] = S;
    AttrMap io;
    io.set("shape", rowShape);
    io.set("axis", (int64_t)0);
    Value* first = tg.op(OpKind::Eq, {tg.op(OpKind::Iota, {}, io), tg.constant(0.0, DType::I32)});
    stageIn.push_back(tg.where(first, in, shifted));  // row 0: the next microbatch
  }
  // The loop over stages: stage s runs its L/S layers on row s.
  auto sb = std::make_unique<Function>();
  sb->name = f.name + ".stages";
  Value* s = sb->addArg({DType::I32, {}});
  Value* token = sb->addArg({DType::I32, {}});
  std::vector<Value*> stageOperands{tg.constant(0.0, DType::I32)};
  std::vector<Value*> layerOperands;
  GradBuilder sg(*sb);
  sg.setLoc(loc);
  for (size_t c = 0; c < C; ++c) {
    stageOperands.push_back(stageIn[c]);
    layerOperands.push_back(sg.op(OpKind::DynamicIndex, {sb->addArg(stageIn[c]->type), s}));
  }
  for (size_t j = 0; j < inv.size(); ++j) {
    stageOperands.push_back(invArg[j]);
    Value* a = sb->addArg(invArg[j]->type);
    layerOperands.push_back(staged[j] ? sg.op(OpKind::DynamicIndex, {a, s}) : a);
  }
  Op* stageLayers = sb->appendClone(*layers, layerOperands);
  stageLayers->attrs.set("trip", k);
  for (size_t j = 0; j < inv.size(); ++j)
    if (staged[j]) stageLayers->body->args[1 + C + j]->type = layerOperands[C + j]->type;
  sb->results.push_back(token);
  for (size_t c = 0; c < C; ++c) sb->results.push_back(stageLayers->results[c]);
  AttrMap sat;
  sat.set("trip", S);
  sat.set("carried", (int64_t)1);
  sat.set("stage_mesh", meshName);
  sat.set("stage_axes", axisIdx);
  Op* stages = appendLoop(*tb, stageOperands, sat, std::move(sb), loc);
  for (size_t c = 0; c < C; ++c) tb->results.push_back(stages->results[1 + c]);
  for (size_t c = 0; c < C; ++c) tb->results.push_back(stages->results[1 + c]);
  AttrMap tat;
  tat.set("trip", T);
  tat.set("carried", (int64_t)C);
  Op* time = appendLoop(f, timeOperands, tat, std::move(tb), loc);
  // Microbatch m left the last stage at iteration m + S - 1.
  std::vector<Value*> outs;
  for (size_t c = 0; c < C; ++c) {
    Value* z = time->results[C + c];  // [T, S, b, ...]
    AttrMap a0, a1;
    a0.set("axis", (int64_t)0);
    a0.set("start", S - 1);
    a0.set("end", T);
    a1.set("axis", (int64_t)1);
    a1.set("start", S - 1);
    a1.set("end", S);
    outs.push_back(g.reshape(g.op(OpKind::Slice, {g.op(OpKind::Slice, {z}, a0)}, a1),
                             mb.results[1 + c]->type.shape));
  }
  // Uses of the microbatch loop's results now read the pipeline's.
  auto replace = [&](Value*& v) {
    for (size_t c = 0; c < C; ++c)
      if (v == mb.results[1 + c]) v = outs[c];
    GSL_ASSERT(v != mb.results[0], "internal error: a microbatch loop's token is used");
  };
  for (auto& op : f.ops)
    if (op.get() != &mb)
      for (Value*& v : op->operands) replace(v);
  for (Value*& v : f.results) replace(v);
  return true;
}

}  // namespace

bool hasPipelines(const Module& m) {
  for (const auto& f : m.functions)
    for (const auto& op : f->ops)
      if (op->kind == OpKind::Loop && op->attrs.has("microbatches")) return true;
  return false;
}

void pipelineLoops(Module& m) {
  for (auto& fp : m.functions) {
    Function& f = *fp;
    for (size_t i = 0; i < f.ops.size(); ++i) {
      Op& op = *f.ops[i];
      if (op.kind != OpKind::Loop || !op.attrs.has("microbatches")) continue;
      size_t before = f.ops.size();
      if (!pipelineLoop(m, f, op)) continue;
      // The new ops go where the microbatch loop was, and it goes.
      std::rotate(f.ops.begin() + i + 1, f.ops.begin() + before, f.ops.end());
      f.ops.erase(f.ops.begin() + i);
      i += f.ops.size() - before;
    }
    f.renumber();
  }
}

}  // namespace gsl::passes
