#include "passes/Pipelining.h"

#include <algorithm>
#include <map>

#include "ir/GradRules.h"
#include "ir/Loop.h"
#include "support/Diagnostics.h"
#include <set>

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

// v[start:end] along dim `axis`.
Value* sliceAlong(GradBuilder& b, Value* v, int64_t axis, int64_t start, int64_t end) {
  AttrMap at;
  at.set("axis", axis);
  at.set("start", start);
  at.set("end", end);
  return b.op(OpKind::Slice, {v}, at);
}

// u then v along dim 0.
Value* concat0(GradBuilder& b, Value* u, Value* v) {
  AttrMap at;
  at.set("axis", (int64_t)0);
  return b.op(OpKind::Concat, {u, v}, at);
}

// v rotated down one row along dim 0: row 0 gets its last row.
Value* rotateDown(GradBuilder& b, Value* v) {
  const int64_t n = v->type.shape[0];
  Value* rest = sliceAlong(b, v, 0, 0, n - 1);
  return concat0(b, sliceAlong(b, v, 0, n - 1, n), rest);
}

// Row `row` of v along `axis`, a dim split over the stages, as a masked
// sum over that dim: the partitioner gives it one all_reduce of the row,
// where a slice of the row would all_gather every stage's rows first.
Value* pickRow(GradBuilder& b, Value* v, int64_t axis, int64_t row) {
  Shape maskShape(v->type.rank(), 1);
  maskShape[axis] = v->type.shape[axis];
  AttrMap io;
  io.set("shape", maskShape);
  io.set("axis", axis);
  Value* mask = b.op(OpKind::Eq, {b.op(OpKind::Iota, {}, io), b.constant((double)row, DType::I32)});
  return b.sum(b.where(mask, v, b.zerosLike(v)), {axis}, false);
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
  const Axes axes = stagedAny->sharding->dims[0];
  const Mesh* mesh = m.findMesh(meshName);
  GSL_ASSERT(mesh, "internal error: unknown stage mesh");
  int64_t S = 1;
  std::vector<int64_t> axisIdx;
  for (const auto& a : axes) {
    S *= mesh->axes[mesh->axisIndex(a)].size;
    axisIdx.push_back(mesh->axisIndex(a));
  }
  if (S == 1) return false;
  // Circular: R rounds through the stages, stage s running layers
  // (r*S + s)*k .. (r*S + s)*k + k-1 in round r.
  const int64_t R = mb.attrs.has("rounds") ? mb.attrs.getInt("rounds") : 1;
  GSL_ASSERT(L % (S * R) == 0, "internal error: the layers do not divide into the stages and rounds");
  GSL_ASSERT(R == 1 || M >= S, "internal error: a circular pipeline with fewer microbatches than stages");
  const int64_t k = L / (S * R), T = M * R + S - 1;
  const SourceLoc loc = mb.loc;
  const bool circular = R > 1;

  GradBuilder g(f);
  g.setLoc(loc);
  auto rowOf = [&](size_t c) { return Shape(xs[c]->type.shape.begin() + 1, xs[c]->type.shape.end()); };  // [b, ...]
  auto withLead = [](Shape lead, const Shape& rest) {
    lead.insert(lead.end(), rest.begin(), rest.end());
    return lead;
  };
  // The microbatches [M, b, ...] as [M, S, b, ...], a column per stage:
  // split over the stages like the state, stage 0 reads its own column
  // with no communication, and the input's gradient is summed over the
  // stages once after the loop (not an all_reduce in every iteration).
  std::vector<Value*> cols;
  for (size_t c = 0; c < C; ++c)
    cols.push_back(g.broadcast(g.reshape(xs[c], withLead({M, 1}, rowOf(c))), withLead({M, S}, rowOf(c))));
  // The stages' layers: [L, ...] as [S, L/S, ...], or [S, R, k, ...] in rounds.
  std::vector<Value*> timeInv;
  if (!circular) timeInv = cols;
  for (size_t j = 0; j < inv.size(); ++j) {
    if (!staged[j]) {
      timeInv.push_back(inv[j]);
      continue;
    }
    const Shape rest(inv[j]->type.shape.begin() + 1, inv[j]->type.shape.end());
    Shape s = circular ? Shape{R, S, k} : Shape{S, k};
    s.insert(s.end(), rest.begin(), rest.end());
    Value* w = g.reshape(inv[j], s);
    if (circular) {
      std::vector<int64_t> perm{1, 0};
      for (int d = 2; d < (int)s.size(); ++d) perm.push_back(d);
      w = g.transpose(w, perm);
      // Split over the stages on dim 0, the member's other dims as the
      // param's: propagation alone may put the stage axes on the rounds'
      // dim (the param's block of layers), and the stages could not run
      // apart.
      Sharding sh = *stagedParam(m, inv[j])->sharding;
      sh.dims.insert(sh.dims.begin() + 1, 2, Axes{});
      w->sharding = sh;
    }
    timeInv.push_back(w);
  }
  // Carried: the stages' state [S, b, ...]; in rounds also the microbatches
  // waiting for stage 0, [M + 1, S, b, ...]: slot m holds microbatch m in
  // column 0 (the inputs, then the last stage's rows), slot M takes what the
  // rotation brings before the pipe is full. A column per stage keeps the
  // slots split over the stages like the state: the rotation's row 0 goes
  // into them, and stage 0 reads its column, with no communication.
  std::vector<Value*> timeOperands;
  for (size_t c = 0; c < C; ++c)
    timeOperands.push_back(g.constant(0.0, xs[c]->type.dtype, withLead({S}, rowOf(c))));  // [S, b, ...]
  if (circular)
    for (size_t c = 0; c < C; ++c) {
      timeOperands.push_back(concat0(g, cols[c], g.constant(0.0, xs[c]->type.dtype, withLead({1, S}, rowOf(c)))));
    }
  const size_t timeCarried = timeOperands.size();
  timeOperands.insert(timeOperands.end(), timeInv.begin(), timeInv.end());

  // The time loop's body: shift, then every stage's layers.
  auto tb = std::make_unique<Function>();
  tb->name = f.name + ".pipeline";
  Value* t = tb->addArg({DType::I32, {}});
  std::vector<Value*> state, waiting, xsArg, invArg;
  for (size_t c = 0; c < C; ++c) state.push_back(tb->addArg(timeOperands[c]->type));
  for (size_t c = 0; c < C; ++c)
    (circular ? waiting : xsArg).push_back(tb->addArg(timeOperands[C + c]->type));
  const size_t invBase = timeOperands.size() - inv.size();
  for (size_t j = 0; j < inv.size(); ++j) invArg.push_back(tb->addArg(timeOperands[invBase + j]->type));
  GradBuilder tg(*tb);
  tg.setLoc(loc);
  auto i32 = [&](int64_t v) { return tg.constant((double)v, DType::I32); };
  // In rounds the state rotates (row 0 gets the last stage's row, one
  // collective_permute), and that row goes to the slot of its microbatch,
  // t - S mod M (slot M before iteration S); stage 0 then takes slot t mod M.
  Value* slot = nullptr;
  if (circular)
    slot = tg.where(tg.op(OpKind::Ge, {t, i32(S)}), tg.op(OpKind::Mod, {tg.op(OpKind::Sub, {t, i32(S)}), i32(M)}), i32(M));
  // Stage 0's next microbatch: microbatch t (the last one again in the
  // drain), or in rounds slot t mod M of the waiting ones.
  Value* tc = circular ? tg.op(OpKind::Mod, {t, i32(M)}) : tg.op(OpKind::Minimum, {t, i32(M - 1)});
  std::vector<Value*> stageIn, waitingOut;
  for (size_t c = 0; c < C; ++c) {
    const TensorType& st = state[c]->type;
    Value* shifted;
    Value* in;  // [S, b, ...]: stage 0's column is row 0
    if (circular) {
      shifted = rotateDown(tg, state[c]);
      waitingOut.push_back(tg.op(OpKind::DynamicUpdate, {waiting[c], shifted, slot}));
      in = tg.op(OpKind::DynamicIndex, {waitingOut.back(), tc});
    } else {
      Shape one = st.shape;
      one[0] = 1;
      Value* rest = sliceAlong(tg, state[c], 0, 0, S - 1);
      shifted = concat0(tg, tg.constant(0.0, st.dtype, one), rest);
      in = tg.op(OpKind::DynamicIndex, {xsArg[c], tc});
    }
    Shape rowShape(st.rank(), 1);
    rowShape[0] = S;
    AttrMap io;
    io.set("shape", rowShape);
    io.set("axis", (int64_t)0);
    Value* first = tg.op(OpKind::Eq, {tg.op(OpKind::Iota, {}, io), i32(0)});
    stageIn.push_back(tg.where(first, in, shifted));  // row 0: the next microbatch
  }
  // In rounds, each stage's round: clamp((t - s) floordiv M, 0, R-1).
  Value* rounds = nullptr;
  if (circular) {
    AttrMap io;
    io.set("shape", Shape{S});
    io.set("axis", (int64_t)0);
    Value* r = tg.op(OpKind::FloorDiv, {tg.op(OpKind::Sub, {t, tg.op(OpKind::Iota, {}, io)}), i32(M)});
    rounds = tg.op(OpKind::Minimum, {tg.op(OpKind::Maximum, {r, i32(0)}), i32(R - 1)});
  }
  // The loop over stages: stage s runs its layers on row s.
  auto sb = std::make_unique<Function>();
  sb->name = f.name + ".stages";
  Value* s = sb->addArg({DType::I32, {}});
  Value* token = sb->addArg({DType::I32, {}});
  std::vector<Value*> stageOperands{i32(0)};
  std::vector<Value*> layerOperands;
  GradBuilder sg(*sb);
  sg.setLoc(loc);
  for (size_t c = 0; c < C; ++c) {
    stageOperands.push_back(stageIn[c]);
    layerOperands.push_back(sg.op(OpKind::DynamicIndex, {sb->addArg(stageIn[c]->type), s}));
  }
  Value* round = nullptr;
  if (circular) {
    stageOperands.push_back(rounds);
    round = sg.op(OpKind::DynamicIndex, {sb->addArg(rounds->type), s});
  }
  for (size_t j = 0; j < inv.size(); ++j) {
    stageOperands.push_back(invArg[j]);
    Value* a = sb->addArg(invArg[j]->type);
    Value* w = staged[j] ? sg.op(OpKind::DynamicIndex, {a, s}) : a;
    if (staged[j] && circular) w = sg.op(OpKind::DynamicIndex, {w, round});
    layerOperands.push_back(w);
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
  if (circular) {
    for (Value* w : waitingOut) tb->results.push_back(w);
  } else {
    for (size_t c = 0; c < C; ++c) tb->results.push_back(stages->results[1 + c]);
  }
  AttrMap tat;
  tat.set("trip", T);
  tat.set("carried", (int64_t)timeCarried);
  // The schedule, for the tools (ir::findPipelines: the REPL, the trace's bubble).
  tat.set("pipeline_mesh", meshName);
  tat.set("pipeline_axes", axisIdx);
  tat.set("pipeline_microbatches", M);
  tat.set("pipeline_rounds", R);
  Op* time = appendLoop(f, timeOperands, tat, std::move(tb), loc);
  // Microbatch m left the last stage at iteration m + S - 1 (in rounds, its
  // last round's row is in its waiting slot).
  std::vector<Value*> outs;
  for (size_t c = 0; c < C; ++c) {
    if (circular) {
      // The last iteration's row of the last stage goes to its slot (M - 1)
      // as the next iteration would; the microbatches are column 0.
      Value* st = time->results[c];
      Value* rotated = rotateDown(g, st);
      Value* w = g.op(OpKind::DynamicUpdate, {time->results[C + c], rotated, g.constant((double)(M - 1), DType::I32)});
      outs.push_back(g.reshape(pickRow(g, sliceAlong(g, w, 0, 0, M), 1, 0), mb.results[1 + c]->type.shape));
      continue;
    }
    Value* z = time->results[C + c];  // [T, S, b, ...]
    outs.push_back(g.reshape(pickRow(g, sliceAlong(g, z, 0, S - 1, T), 1, S - 1), mb.results[1 + c]->type.shape));
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

// ---- the stage dims of a per-rank pass's function (shardPipelineStages)

struct StageAxes {
  std::string mesh;
  Axes axes;
  int64_t n = 1;
};

// Union-find over (value, dim): the dims that hold one row per stage.
class StageDims {
 public:
  explicit StageDims(const Module& m) : m_(m) {}

  void walk(Function& f) {
    for (auto& op : f.ops) visit(*op);
  }

  void apply() {
    for (auto& [node, parent] : parent_) {
      (void)parent;
      auto seed = seeds_.find(find(node));
      if (seed == seeds_.end()) continue;
      Value* v = const_cast<Value*>(node.first);
      const StageAxes& a = stages_[seed->second];
      const int d = node.second;
      if (v->type.shape[d] % a.n != 0 || fixed_.count(v)) continue;
      Sharding s = v->sharding ? *v->sharding : Sharding::replicated(a.mesh, v->type.rank());
      if (s.mesh.empty()) s = Sharding::replicated(a.mesh, v->type.rank());
      if (s.mesh != a.mesh || !s.partial.empty() || !s.dims[d].empty()) continue;
      // The stage axes go to the stage dim, also from another dim that
      // propagation gave them (with S R layers in rounds, a param's block
      // of layers can look like the rounds' dim).
      for (auto& dim : s.dims)
        for (const auto& ax : a.axes) dim.erase(std::remove(dim.begin(), dim.end(), ax), dim.end());
      s.dims[d] = a.axes;
      v->sharding = s;
    }
  }

  // A stage's own rows (the stage loop's per-iteration outputs) do not
  // use the stage axes: each rank computes its rows whole.
  void applyRows() {
    for (auto& [v, id] : rows_) {
      if (!v->sharding || fixed_.count(v)) continue;
      Sharding s = *v->sharding;
      for (auto& dim : s.dims)
        for (const auto& ax : stages_[id].axes) dim.erase(std::remove(dim.begin(), dim.end(), ax), dim.end());
      const_cast<Value*>(v)->sharding = s;
    }
  }

  // Values whose sharding is not the pass's to change (the function's own
  // arguments and results: the host's layouts).
  void fix(const Value* v) { fixed_.insert(v); }

 private:
  using Node = std::pair<const Value*, int>;
  const Module& m_;
  std::map<Node, Node> parent_;
  std::map<Node, size_t> seeds_;  // root -> stage
  std::vector<StageAxes> stages_;
  std::set<const Value*> fixed_;
  std::map<const Value*, size_t> rows_;  // a stage loop's per-iteration row -> its stage

  Node find(Node x) {
    auto it = parent_.find(x);
    if (it == parent_.end()) return parent_[x] = x;
    if (it->second == x) return x;
    return it->second = find(it->second);
  }
  void link(const Value* a, int da, const Value* b, int db) {
    if (da < 0 || db < 0 || da >= a->type.rank() || db >= b->type.rank()) return;
    Node ra = find({a, da}), rb = find({b, db});
    if (ra == rb) return;
    auto sa = seeds_.find(ra), sb = seeds_.find(rb);
    parent_[ra] = rb;
    if (sa != seeds_.end()) {
      if (sb == seeds_.end()) seeds_[rb] = sa->second;
      seeds_.erase(sa);
    }
  }
  void seed(const Value* v, int d, size_t stage) {
    Node r = find({v, d});
    if (!seeds_.count(r)) seeds_[r] = stage;
  }
  // Dims aligned from the right (NumPy broadcasting), where sizes agree.
  void linkAligned(const Value* x, const Value* r) {
    const int off = r->type.rank() - x->type.rank();
    for (int d = 0; d < x->type.rank(); ++d)
      if (d + off >= 0 && x->type.shape[d] == r->type.shape[d + off]) link(x, d, r, d + off);
  }

  void visit(Op& op) {
    const OpInfo& info = op.info();
    switch (op.kind) {
      case OpKind::Loop: {
        const LoopInfo L(op);
        Function& body = *op.body;
        for (size_t k = 0; k < op.operands.size(); ++k)
          for (int d = 0; d < op.operands[k]->type.rank(); ++d) link(op.operands[k], d, body.args[k + 1], d);
        for (size_t j = 0; j < L.carried; ++j)
          for (int d = 0; d < op.results[j]->type.rank(); ++d) {
            link(body.results[j], d, op.results[j], d);
            link(body.args[j + 1], d, op.results[j], d);
          }
        for (size_t o = 0; o < L.outputs; ++o) {
          const Value* row = body.results[L.carried + o];
          for (int d = 0; d < row->type.rank(); ++d) link(row, d, op.results[L.carried + o], d + 1);
        }
        if (op.attrs.has("stage_mesh")) {
          StageAxes a;
          a.mesh = op.attrs.getString("stage_mesh");
          const Mesh* mesh = m_.findMesh(a.mesh);
          GSL_ASSERT(mesh, "internal error: a stage loop names an unknown mesh");
          for (int64_t i : op.attrs.getInts("stage_axes")) {
            a.axes.emplace_back(mesh->axes[i].name);
            a.n *= mesh->axes[i].size;
          }
          stages_.push_back(a);
          const size_t id = stages_.size() - 1;
          for (size_t k = L.carried; k < op.operands.size(); ++k)
            if (op.operands[k]->type.rank() > 0 && op.operands[k]->type.shape[0] == L.trip) seed(op.operands[k], 0, id);
          for (size_t o = 0; o < L.outputs; ++o) {
            seed(op.results[L.carried + o], 0, id);
            rows_[body.results[L.carried + o]] = id;
          }
        }
        walk(body);
        return;
      }
      case OpKind::DynamicIndex:
        for (int d = 0; d < op.result->type.rank(); ++d) link(op.operands[0], d + 1, op.result, d);
        return;
      case OpKind::DynamicUpdate:
        for (int d = 0; d < op.result->type.rank(); ++d) link(op.operands[0], d, op.result, d);
        for (int d = 0; d < op.operands[1]->type.rank(); ++d) link(op.operands[1], d, op.result, d + 1);
        return;
      case OpKind::Slice:
      case OpKind::Concat:
      case OpKind::Copy:
        for (const Value* x : op.operands)
          for (int d = 0; d < op.result->type.rank(); ++d) link(x, d, op.result, d);
        return;
      case OpKind::Broadcast: linkAligned(op.operands[0], op.result); return;
      default: break;
    }
    if (info.cls == OpClass::Unary || info.cls == OpClass::Binary || info.cls == OpClass::Ternary)
      for (const Value* x : op.operands) linkAligned(x, op.result);
  }
};

bool hasStageLoops(const Function& f) {
  for (const auto& op : f.ops)
    if (op->kind == OpKind::Loop && (op->attrs.has("stage_mesh") || hasStageLoops(*op->body))) return true;
  return false;
}

}  // namespace

void shardPipelineStages(const Module& m, Function& f) {
  if (!hasStageLoops(f)) return;
  StageDims dims(m);
  for (const Value* a : f.args) dims.fix(a);
  for (const Value* r : f.results) dims.fix(r);
  dims.walk(f);
  dims.apply();
  dims.applyRows();
}

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
