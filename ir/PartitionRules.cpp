#include "ir/PartitionRules.h"

#include <algorithm>
#include <optional>
#include <tuple>

namespace gsl::ir {

void partitionLocal(LocalBuilder& b, const Op& op) {
  LocalPlan p = b.plan(op);
  b.finish(op, p, b.emit(op.kind, p.operands, op.attrs));
}

void partitionLocalShape(LocalBuilder& b, const Op& op) {
  LocalPlan p = b.plan(op);
  AttrMap at = op.attrs;
  at.set("shape", p.localShape);
  b.finish(op, p, b.emit(op.kind, p.operands, at));
}

void partitionMean(LocalBuilder& b, const Op& op) {
  LocalPlan p = b.plan(op);
  Value* v = b.emit(op.kind, p.operands, op.attrs);
  if (!p.result.partial.empty()) {
    // mean over a split dim: each rank's local mean, weighted by its share
    // of the elements, sums to the global mean. The share is the local
    // count of reduced elements over the whole count: 1 / partialGroup when
    // the blocks divide the reduced dims; over a padded dim the local block
    // counts its padding rows (masked to 0 by the plan), so the local mean
    // times this share is the block's sum over the true count.
    const TensorType& gi = op.operands[0]->type;
    const TensorType& li = p.operands[0]->type;
    int64_t localCount = li.numElements() / std::max<int64_t>(1, TensorType{li.dtype, p.localShape}.numElements());
    int64_t wholeCount = gi.numElements() / std::max<int64_t>(1, op.result->type.numElements());
    AttrMap c;
    c.set("value", (double)localCount / (double)wholeCount);
    Value* k = b.emitSource(OpKind::Constant, c, {op.result->type.dtype, {}});  // f32 or bf16
    v = b.emit(OpKind::Mul, {v, k}, {});
  }
  b.finish(op, p, v);
}

void partitionParam(LocalBuilder& b, const Op& op) {
  const TensorType& t = op.result->type;
  Sharding storage = b.paramStorage(op.attrs.getString("name"));
  Value* v = b.emitSource(OpKind::Param, op.attrs, {t.dtype, b.localShape(t, storage)});
  b.setResult(b.tag({v, storage}));
}

void partitionConstant(LocalBuilder& b, const Op& op) {
  const TensorType& t = op.result->type;
  Value* v = b.emitSource(OpKind::Constant, op.attrs, {t.dtype, b.localShape(t, b.decided())});
  b.setResult(b.tag({v, b.decided()}));
}

void partitionCopy(LocalBuilder& b, const Op& op) {
  b.setResult(b.reshard(b.local(op.operands[0]), b.decided()));
}

void partitionRandom(LocalBuilder& b, const Op& op) {
  LocalValue seed = b.reshard(b.local(op.operands[0]), Sharding::replicated("", 0));
  Value* v = b.emit(OpKind::RandomUniform, {seed.v}, op.attrs);
  LocalValue whole = b.tag({v, Sharding::replicated("", op.result->type.rank())});
  b.setResult(b.reshard(whole, b.decided()));
}

}  // namespace gsl::ir

// ---------------------------------------------------------------- shifts

namespace gsl::ir {

namespace {

// A concat along dim d that shifts one value x (N rows on d) by k:
// out[i] = x[(i + k) mod N], except rows [fillLo, fillHi), which hold the
// splat `fillValue` (a shift; a rotation has no fill).
struct Shift {
  const Value* x = nullptr;
  int d = 0;
  int64_t k = 0;
  bool hasFill = false;
  double fillValue = 0;
  int64_t fillLo = 0, fillHi = 0;
};

const Op* sliceAlong(const Value* v, int64_t d) {
  const Op* o = v->def;
  if (!o || o->kind != OpKind::Slice || o->attrs.getInt("axis") != d) return nullptr;
  return o;
}

// The value of a tensor every element of which is the same constant
// (a constant, or a broadcast of a scalar constant).
std::optional<double> splatValue(const Value* v) {
  const Op* o = v->def;
  if (o && o->kind == OpKind::Broadcast && o->operands[0]->type.rank() == 0) o = o->operands[0]->def;
  if (!o || o->kind != OpKind::Constant) return std::nullopt;
  const Attr* a = o->attrs.get("value");
  if (!a || std::holds_alternative<bool>(*a) || v->type.dtype == DType::Bool) return std::nullopt;
  return o->attrs.getFloat("value");
}

Sharding decidedOf(const Value* v) {
  if (!v->sharding) return Sharding::replicated("", v->type.rank());
  Sharding s = *v->sharding;
  s.partial.clear();
  return s;
}

// `concat` as a shift, when its result is split along the concat dim
// evenly and the slices it reads are used by it alone.
std::optional<Shift> matchShift(LocalBuilder& b, const Op& concat) {
  if (concat.kind != OpKind::Concat || concat.operands.size() != 2) return std::nullopt;
  const int d = (int)concat.attrs.getInt("axis");
  const Sharding s = decidedOf(concat.result);
  if (s.mesh.empty() || s.dims[d].empty()) return std::nullopt;
  const Shape local = b.localShape(concat.result->type, s);
  if (local[d] <= 0 || concat.result->type.shape[d] % local[d] != 0) return std::nullopt;
  auto onlyHere = [&](const Op* slice) {
    auto u = b.users(slice->result);
    return u.size() == 1 && u[0] == &concat;
  };
  const Value *a = concat.operands[0], *c = concat.operands[1];
  const Op *s0 = sliceAlong(a, d), *s1 = sliceAlong(c, d);
  Shift sh;
  sh.d = d;
  // A shift or rotation keeps the size of the dim (a concat that grows or
  // shrinks it moves each rank's window by a rank-dependent offset).
  const Op* any = s0 ? s0 : s1;
  if (!any || any->operands[0]->type.shape[d] != concat.result->type.shape[d]) return std::nullopt;
  if (s0 && s1 && s0->operands[0] == s1->operands[0]) {  // a rotation
    const int64_t n = s0->operands[0]->type.shape[d];
    if (s0->attrs.getInt("end") != n || s1->attrs.getInt("start") != 0 ||
        s1->attrs.getInt("end") != s0->attrs.getInt("start") || !onlyHere(s0) || !onlyHere(s1))
      return std::nullopt;
    sh.x = s0->operands[0];
    sh.k = s0->attrs.getInt("start");
    return sh;
  }
  if (s0 && !s1) {  // x[k:] then k rows of fill: a shift towards 0
    const int64_t n = s0->operands[0]->type.shape[d];
    auto f = splatValue(c);
    if (!f || s0->attrs.getInt("end") != n || !onlyHere(s0)) return std::nullopt;
    sh.x = s0->operands[0];
    sh.k = s0->attrs.getInt("start");
    sh.hasFill = true;
    sh.fillValue = *f;
    sh.fillLo = n - sh.k;
    sh.fillHi = n;
    return sh;
  }
  if (s1 && !s0) {  // k rows of fill then x[:n-k]: a shift away from 0
    const int64_t n = s1->operands[0]->type.shape[d];
    auto f = splatValue(a);
    if (!f || s1->attrs.getInt("start") != 0 || !onlyHere(s1)) return std::nullopt;
    sh.x = s1->operands[0];
    const int64_t k = a->type.shape[d];
    sh.k = n - k;
    sh.hasFill = true;
    sh.fillValue = *f;
    sh.fillLo = 0;
    sh.fillHi = k;
    return sh;
  }
  return std::nullopt;
}

Value* constant(LocalBuilder& b, DType t, double v, Shape shape = {}) {
  AttrMap at;
  if (t == DType::I32) at.set("value", (int64_t)v);
  else at.set("value", v);
  return b.emitSource(OpKind::Constant, at, {t, std::move(shape)});
}

Value* sliceRows(LocalBuilder& b, Value* v, int d, int64_t start, int64_t end) {
  AttrMap at;
  at.set("axis", (int64_t)d);
  at.set("start", start);
  at.set("end", end);
  return b.emit(OpKind::Slice, {v}, at);
}

Value* concatRows(LocalBuilder& b, Value* u, Value* v, int d) {
  AttrMap at;
  at.set("axis", (int64_t)d);
  return b.emit(OpKind::Concat, {u, v}, at);
}

// The halo plan: x (resharded to the result's sharding `s`, blocks of `blk`
// rows on d over n ranks) is rotated by k: member j's rows are the last
// blk - r rows of block j + q and the first r rows of block j + q + 1
// (k = q blk + r); only those move. A shift then masks its fill rows in.
LocalValue haloShift(LocalBuilder& b, LocalValue x, const Shift& sh, const Sharding& s) {
  const int d = sh.d;
  const int64_t blk = x.v->type.shape[d];
  const int64_t n = sh.x->type.shape[d] / blk;
  const int64_t q = sh.k / blk, r = sh.k % blk;
  Value* y = r ? sliceRows(b, x.v, d, r, blk) : x.v;
  if (q % n) y = b.shiftAmongGroup(y, s, d, q % n);
  if (r) {
    Value* head = sliceRows(b, x.v, d, 0, r);
    if ((q + 1) % n) head = b.shiftAmongGroup(head, s, d, (q + 1) % n);
    y = concatRows(b, y, head, d);
  }
  if (sh.hasFill) {
    // Global row of each local row: member * blk + i.
    AttrMap cs;
    cs.set("axis", (int64_t)0);
    cs.set("exclusive", true);
    Value* iota = b.emit(OpKind::CumSum, {constant(b, DType::I32, 1, {blk})}, cs);
    Value* base = b.emit(OpKind::Mul, {b.memberIndex(s, d), constant(b, DType::I32, (double)blk)}, {});
    Value* pos = b.emit(OpKind::Add, {iota, base}, {});
    Shape col((size_t)x.v->type.rank(), 1);
    col[d] = blk;
    AttrMap rs;
    rs.set("shape", col);
    pos = b.emit(OpKind::Reshape, {pos}, rs);
    Value* mask = sh.fillLo == 0 ? b.emit(OpKind::Lt, {pos, constant(b, DType::I32, (double)sh.fillHi)}, {})
                                 : b.emit(OpKind::Ge, {pos, constant(b, DType::I32, (double)sh.fillLo)}, {});
    y = b.emit(OpKind::Where, {mask, constant(b, x.v->type.dtype, sh.fillValue), y}, {});
  }
  return b.tag({y, s});
}

// The all_gather plan: x whole along d, the slices and the concat as
// written, then the result split as decided. in[0] is x, in[1] the fill.
LocalValue gatherShift(LocalBuilder& b, const std::vector<LocalValue>& in, const Op& concat, const Shift& sh,
                       const Sharding& s) {
  const int d = sh.d;
  Sharding whole = s;
  whole.dims[d].clear();
  LocalValue x = b.reshard(in[0], whole);
  std::vector<Value*> parts;
  for (const Value* o : concat.operands) {
    if (o->def && o->def->kind == OpKind::Slice && o->def->operands[0] == sh.x)
      parts.push_back(sliceRows(b, x.v, d, o->def->attrs.getInt("start"), o->def->attrs.getInt("end")));
    else
      parts.push_back(b.reshard(in.at(1), whole).v);
  }
  LocalValue y = b.tag({concatRows(b, parts[0], parts[1], d), whole});
  return b.reshard(y, s);
}

}  // namespace

void partitionSlice(LocalBuilder& b, const Op& op) {
  auto u = b.users(op.result);
  if (u.size() == 1 && u[0] && matchShift(b, *u[0])) return b.fold();
  partitionLocal(b, op);
}

void partitionConcat(LocalBuilder& b, const Op& op) {
  auto sh = matchShift(b, op);
  if (!sh) return partitionLocal(b, op);
  const Sharding& s = b.decided();
  // The inputs: x, and the fill operand of a shift (partitioned on its own;
  // the gather plan reads it, the halo plan only its value).
  std::vector<LocalValue> ins{b.local(sh->x)};
  for (const Value* o : op.operands)
    if (!(o->def && o->def->kind == OpKind::Slice && o->def->operands[0] == sh->x)) ins.push_back(b.local(o));
  auto halo = [&](const std::vector<LocalValue>& in) { return haloShift(b, b.reshard(in[0], s), *sh, s); };
  auto gather = [&](const std::vector<LocalValue>& in) { return gatherShift(b, in, op, *sh, s); };
  LocalBuilder::Cost ch = b.dryRun(ins, halo), cg = b.dryRun(ins, gather);
  bool useHalo = std::tie(ch.bytes, ch.flops, ch.memory) <= std::tie(cg.bytes, cg.flops, cg.memory);
  Sharding whole = s;
  whole.dims[sh->d].clear();
  std::vector<Sharding> atS{s}, atWhole{whole};
  for (size_t i = 1; i < ins.size(); ++i) {
    atS.push_back(ins[i].s);
    atWhole.push_back(whole);
  }
  b.reportPlans({{atS, s, ch}, {atWhole, s, cg}}, useHalo ? 0 : 1);
  b.setResult(useHalo ? halo(ins) : gather(ins));
}

// ---------------------------------------------------------------- take

// With the table's rows split over a group of n ranks (blocks of `rl`
// rows), member j holds rows [j rl, (j + 1) rl): it gathers the ids in that
// range from its block and zeros the rest; the members' results sum to the
// whole (the plan's pending partial sum: one all_reduce, or a
// reduce_scatter where the result is wanted split). An id outside the
// whole table is passed on unchanged, so the local take reports it.
void partitionTake(LocalBuilder& b, const Op& op) {
  LocalPlan p = b.plan(op);
  if (p.result.partial.empty()) {
    b.finish(op, p, b.emit(op.kind, p.operands, op.attrs));
    return;
  }
  if (p.partialGroup == 1) {  // rows "split" over axes of size one: the table is whole
    Sharding whole = p.operandLayouts[0];
    whole.dims[0].clear();
    LocalValue t = b.reshard(b.local(op.operands[0]), whole);
    p.result.partial.clear();
    b.finish(op, p, b.emit(op.kind, {t.v, p.operands[1]}, op.attrs));
    return;
  }
  Value *table = p.operands[0], *ids = p.operands[1];
  const Sharding& ts = p.operandLayouts[0];
  const int64_t rl = table->type.shape[0], rows = op.operands[0]->type.shape[0];
  AttrMap scalar;
  scalar.set("shape", Shape{});
  Value* member = b.emit(OpKind::Reshape, {b.memberIndex(ts, 0)}, scalar);
  Value* offset = b.emit(OpKind::Mul, {member, constant(b, DType::I32, (double)rl)}, {});
  Value* local = b.emit(OpKind::Sub, {ids, offset}, {});
  Value* zero = constant(b, DType::I32, 0);
  auto within = [&](Value* v, int64_t n) {
    return b.emit(OpKind::And,
                  {b.emit(OpKind::Ge, {v, zero}, {}), b.emit(OpKind::Lt, {v, constant(b, DType::I32, (double)n)}, {})},
                  {});
  };
  Value* mine = within(local, rl);
  Value* safe = b.emit(OpKind::Where, {within(ids, rows), zero, ids}, {});
  safe = b.emit(OpKind::Where, {mine, local, safe}, {});
  Value* v = b.emit(OpKind::Take, {table, safe}, op.attrs);
  Shape maskShape = ids->type.shape;
  for (int d = 1; d < table->type.rank(); ++d) maskShape.push_back(1);
  AttrMap ms;
  ms.set("shape", maskShape);
  Value* mask = b.emit(OpKind::Reshape, {mine}, ms);
  v = b.emit(OpKind::Where, {mask, v, constant(b, table->type.dtype, 0)}, {});
  b.finish(op, p, v);
}

}  // namespace gsl::ir
