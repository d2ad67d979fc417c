#include "passes/PartitionRules.h"

#include <algorithm>
#include <optional>
#include <tuple>

#include "passes/Partitioner.h"
#include "support/Diagnostics.h"

namespace gsl::passes::partitioner {

void partitionLocal(Partitioner& b, const Op& op) {
  LocalPlan p = b.plan(op);
  b.finish(op, p, b.emit(op.kind, p.operands, op.attrs));
}

void partitionLocalShape(Partitioner& b, const Op& op) {
  LocalPlan p = b.plan(op);
  AttrMap at = op.attrs;
  at.set("shape", p.localShape);
  b.finish(op, p, b.emit(op.kind, p.operands, at));
}

void partitionMean(Partitioner& b, const Op& op) {
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

void partitionParam(Partitioner& b, const Op& op) {
  const TensorType& t = op.result->type;
  Sharding storage = b.paramStorage(op.attrs.getString("name"));
  Value* v = b.emitSource(OpKind::Param, op.attrs, {t.dtype, b.localShape(t, storage)});
  b.setResult(b.tag({v, storage}));
}

void partitionConstant(Partitioner& b, const Op& op) {
  const TensorType& t = op.result->type;
  Value* v = b.emitSource(OpKind::Constant, op.attrs, {t.dtype, b.localShape(t, b.decided())});
  b.setResult(b.tag({v, b.decided()}));
}

void partitionCopy(Partitioner& b, const Op& op) {
  b.setResult(b.reshard(b.local(op.operands[0]), b.decided()));
}

void partitionWhole(Partitioner& b, const Op& op) {
  std::vector<Value*> in;
  for (Value* x : op.operands) in.push_back(b.reshard(b.local(x), Sharding::replicated("", x->type.rank())).v);
  Value* v = b.emit(op.kind, in, op.attrs);
  LocalValue whole = b.tag({v, Sharding::replicated("", op.result->type.rank())});
  b.setResult(b.reshard(whole, b.decided()));
}

void partitionDropout(Partitioner& b, const Op& op) {
  LocalPlan p = b.plan(op);
  if (op.operands.size() < 2) {  // the identity (no key): as any local op
    b.finish(op, p, b.emit(op.kind, p.operands, op.attrs));
    return;
  }
  const TensorType& t = op.result->type;
  const Sharding& s = p.result;
  auto i32s = [&](int64_t v) {
    AttrMap c;
    c.set("value", v);
    return b.emitSource(OpKind::Constant, c, {DType::I32, {1}});
  };
  // [0, offset_0, ..., offset_{r-1}]: block j of a split dim starts at
  // j * (local size), the local size of a padded dim being ceil(dim / n).
  std::vector<Value*> parts{i32s(0)};
  bool split = false;
  for (int d = 0; d < t.rank(); ++d) {
    if (s.mesh.empty() || (size_t)d >= s.dims.size() || s.dims[d].empty()) {
      parts.push_back(i32s(0));
      continue;
    }
    parts.push_back(b.emit(OpKind::Mul, {b.memberIndex(s, d), i32s(p.localShape[d])}, {}));
    split = true;
  }
  Value* key = p.operands[1];
  if (split) {
    AttrMap c;
    c.set("axis", (int64_t)0);
    key = b.emit(OpKind::Add, {key, b.emit(OpKind::Concat, parts, c)}, {});
  }
  AttrMap at = op.attrs;
  if (!at.has("shape")) at.set("shape", t.shape);
  b.finish(op, p, b.emit(op.kind, {p.operands[0], key}, at));
}

// ---------------------------------------------------------------- shifts

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
  Sharding s = normalForm(v->sharding, (int)v->type.rank());
  s.partial.clear();
  return s;
}

// `concat` as a shift, when its result is split along the concat dim
// evenly and the slices it reads are used by it alone.
std::optional<Shift> matchShift(Partitioner& b, const Op& concat) {
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

Value* constant(Partitioner& b, DType t, double v, Shape shape = {}) {
  AttrMap at;
  if (t == DType::I32) at.set("value", (int64_t)v);
  else at.set("value", v);
  return b.emitSource(OpKind::Constant, at, {t, std::move(shape)});
}

Value* sliceRows(Partitioner& b, Value* v, int d, int64_t start, int64_t end) {
  AttrMap at;
  at.set("axis", (int64_t)d);
  at.set("start", start);
  at.set("end", end);
  return b.emit(OpKind::Slice, {v}, at);
}

Value* concatRows(Partitioner& b, Value* u, Value* v, int d) {
  AttrMap at;
  at.set("axis", (int64_t)d);
  return b.emit(OpKind::Concat, {u, v}, at);
}

// The global row along dim d of each local row of a block of `blk` rows
// (member * blk + i), shaped [1, .., blk, .., 1] to broadcast over a block
// of rank `rank`.
Value* globalRows(Partitioner& b, const Sharding& s, int d, int64_t blk, int rank) {
  AttrMap cs;
  cs.set("axis", (int64_t)0);
  cs.set("exclusive", true);
  Value* iota = b.emit(OpKind::CumSum, {constant(b, DType::I32, 1, {blk})}, cs);
  Value* base = b.emit(OpKind::Mul, {b.memberIndex(s, d), constant(b, DType::I32, (double)blk)}, {});
  Value* pos = b.emit(OpKind::Add, {iota, base}, {});
  Shape col((size_t)rank, 1);
  col[d] = blk;
  AttrMap rs;
  rs.set("shape", col);
  return b.emit(OpKind::Reshape, {pos}, rs);
}

// The halo plan: x (resharded to the result's sharding `s`, blocks of `blk`
// rows on d over n ranks) is rotated by k: member j's rows are the last
// blk - r rows of block j + q and the first r rows of block j + q + 1
// (k = q blk + r); only those move. A shift then masks its fill rows in.
LocalValue haloShift(Partitioner& b, LocalValue x, const Shift& sh, const Sharding& s) {
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
    Value* pos = globalRows(b, s, d, blk, x.v->type.rank());
    Value* mask = sh.fillLo == 0 ? b.emit(OpKind::Lt, {pos, constant(b, DType::I32, (double)sh.fillHi)}, {})
                                 : b.emit(OpKind::Ge, {pos, constant(b, DType::I32, (double)sh.fillLo)}, {});
    y = b.emit(OpKind::Where, {mask, constant(b, x.v->type.dtype, sh.fillValue), y}, {});
  }
  return b.tag({y, s});
}

// The all_gather plan: x whole along d, the slices and the concat as
// written, then the result split as decided. in[0] is x, in[1] the fill.
LocalValue gatherShift(Partitioner& b, const std::vector<LocalValue>& in, const Op& concat, const Shift& sh,
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


// ---- windows: a slice or a concat that changes the split dim's size
//
// out[i] = x[i + k] for the result rows i in [vlo, vhi) and a splat fill
// outside (`lo` before, `hi` after): a slice of x (k = start), a concat of
// a fill, x or a slice of it, and a fill (XLA's pad along a partitioned
// dim), or their gradients (slice and pad are each other's transposes).
// The result's blocks (b' rows) and x's (b rows) differ in size, so member
// r's window [r b' + k, r b' + k + b') of x moves against its own block
// by r (b' - b) + k rows: a rank-dependent offset.
struct Window {
  const Op* op = nullptr;
  const Value* x = nullptr;
  int d = 0;
  int64_t k = 0, vlo = 0, vhi = 0;
  double lo = 0, hi = 0;        // the fill values (where vlo > 0, vhi < size)
  int xPart = -1;               // concat: the operand that reads x
  const Op* slice = nullptr;    // concat: that operand's slice of x, folded
  int64_t n = 1, blk = 0, rblk = 0;  // members, x's and the result's block rows
};

// `op` (a slice, or a concat other than a shift) as a window, when its
// result is split along the dim over more than one rank and x and the
// result both divide evenly into the group's blocks (a padded dim keeps
// the all_gather plan).
std::optional<Window> matchWindow(Partitioner& b, const Op& op) {
  if (op.kind != OpKind::Slice && op.kind != OpKind::Concat) return std::nullopt;
  const int d = (int)op.attrs.getInt("axis");
  const Sharding s = decidedOf(op.result);
  if (s.mesh.empty() || s.dims[d].empty()) return std::nullopt;
  Window w;
  w.op = &op;
  w.d = d;
  const int64_t M = op.result->type.shape[d];
  if (op.kind == OpKind::Slice) {
    w.x = op.operands[0];
    w.k = op.attrs.getInt("start");
    w.vlo = 0;
    w.vhi = M;
  } else {
    if (matchShift(b, op)) return std::nullopt;
    int before = 0, after = 0;
    int64_t at = 0, xAt = 0;
    for (size_t i = 0; i < op.operands.size(); ++i) {
      const Value* o = op.operands[i];
      auto f = splatValue(o);
      if (f && w.xPart < 0) {
        ++before;
        w.lo = *f;
      } else if (f) {
        ++after;
        w.hi = *f;
      } else if (w.xPart < 0) {
        w.xPart = (int)i;
        xAt = at;
      } else {
        return std::nullopt;  // two parts that are not fills
      }
      at += o->type.shape[d];
    }
    if (w.xPart < 0 || before > 1 || after > 1) return std::nullopt;
    const Value* part = op.operands[w.xPart];
    int64_t start = 0, rows = part->type.shape[d];
    if (const Op* sl = sliceAlong(part, d)) {
      auto u = b.users(sl->result);
      if (u.size() == 1 && u[0] == &op) {
        w.slice = sl;
        w.x = sl->operands[0];
        start = sl->attrs.getInt("start");
      }
    }
    if (!w.x) w.x = part;
    w.vlo = xAt;
    w.vhi = xAt + rows;
    w.k = start - xAt;
  }
  const Shape rl = b.localShape(op.result->type, s), xl = b.localShape(w.x->type, s);
  const int64_t N = w.x->type.shape[d];
  if (rl[d] <= 0 || xl[d] <= 0 || M % rl[d] || N % xl[d] || M / rl[d] != N / xl[d]) return std::nullopt;
  if (M / rl[d] == 1) return std::nullopt;  // axes of size one: the op runs whole, as written
  w.n = M / rl[d];
  w.rblk = rl[d];
  w.blk = xl[d];
  return w;
}

// A window's local result block `y` (b' rows on d) with its fill rows set:
// a `where` on the global row for each side that has a fill.
Value* maskFills(Partitioner& b, Value* y, const Window& w, const Sharding& s) {
  const int d = w.d;
  const int64_t M = w.op->result->type.shape[d];
  if (w.vlo <= 0 && w.vhi >= M) return y;
  Value* pos = globalRows(b, s, d, w.rblk, y->type.rank());
  if (w.vlo > 0)
    y = b.emit(OpKind::Where, {b.emit(OpKind::Lt, {pos, constant(b, DType::I32, (double)w.vlo)}, {}),
                               constant(b, y->type.dtype, w.lo), y},
               {});
  if (w.vhi < M)
    y = b.emit(OpKind::Where, {b.emit(OpKind::Ge, {pos, constant(b, DType::I32, (double)w.vhi)}, {}),
                               constant(b, y->type.dtype, w.hi), y},
               {});
  return y;
}

// The halo plan of a window, x laid out as the result (blocks of blk rows
// on d). Member r needs x's rows [r b' + k, r b' + k + b') that are not
// fill; over all members that is at most L rows before its own block and
// R after, so every member receives the last L rows of the blocks before
// it and the first R of the blocks after (collective_permutes, static
// slices), concatenated around its block. Its window then starts at the
// rank-dependent row o(r) = r (b' - b) + k + L of that: a shift by o(r) -
// min o, done by one `where` per bit of it (each chooses between two
// static slices by the member's bit, from its index in the group). The
// fills are masked in by a `where` on the global row.
LocalValue windowHalo(Partitioner& b, LocalValue x, const Window& w, const Sharding& s) {
  const int d = w.d, rank = x.v->type.rank();
  const int64_t n = w.n, blk = w.blk, rb = w.rblk, k = w.k;
  int64_t L = 0, R = 0;
  for (int64_t r = 0; r < n; ++r) {
    int64_t lo = std::max(r * rb, w.vlo) + k, hi = std::min((r + 1) * rb, w.vhi) + k;
    if (lo >= hi) continue;
    L = std::max(L, r * blk - lo);
    R = std::max(R, hi - (r + 1) * blk);
  }
  std::vector<Value*> parts;
  for (int64_t q = (L + blk - 1) / blk; q >= 1; --q) {  // the blocks before: their last rows
    int64_t rows = std::min(blk, L - (q - 1) * blk);
    parts.push_back(b.shiftAmongGroup(rows == blk ? x.v : sliceRows(b, x.v, d, blk - rows, blk), s, d, -q));
  }
  parts.push_back(x.v);
  for (int64_t q = 1; q <= (R + blk - 1) / blk; ++q) {  // the blocks after: their first rows
    int64_t rows = std::min(blk, R - (q - 1) * blk);
    parts.push_back(b.shiftAmongGroup(rows == blk ? x.v : sliceRows(b, x.v, d, 0, rows), s, d, q));
  }
  AttrMap ax;
  ax.set("axis", (int64_t)d);
  Value* y = parts.size() == 1 ? x.v : b.emit(OpKind::Concat, parts, ax);
  const int64_t E = L + blk + R;
  // Member r's rows start at row o(r) of y; o is linear in r.
  const int64_t delta = rb - blk, o0 = k + L, on = (n - 1) * delta + o0;
  const int64_t omin = std::min(o0, on), U = std::max(o0, on) - omin;
  int T = 0;
  while ((int64_t(1) << T) - 1 < U) ++T;
  const int64_t want = rb + (int64_t(1) << T) - 1;  // rows from omin, for T halving steps
  const int64_t front = std::max<int64_t>(0, -omin), back = std::max<int64_t>(0, omin + want - E);
  auto zeros = [&](int64_t rows) {
    Shape z = y->type.shape;
    z[d] = rows;
    return constant(b, y->type.dtype, 0, z);
  };
  if (front) y = concatRows(b, zeros(front), y, d);
  if (back) y = concatRows(b, y, zeros(back), d);
  if (omin + front != 0 || y->type.shape[d] != want) y = sliceRows(b, y, d, omin + front, omin + front + want);
  if (T > 0) {
    // u = o(r) - omin, this member's shift, shaped to broadcast.
    Value* u = b.memberIndex(s, d);
    if (delta != 1) u = b.emit(OpKind::Mul, {u, constant(b, DType::I32, (double)delta)}, {});
    if (o0 != omin) u = b.emit(OpKind::Add, {u, constant(b, DType::I32, (double)(o0 - omin))}, {});
    AttrMap rs;
    rs.set("shape", Shape((size_t)rank, 1));
    u = b.emit(OpKind::Reshape, {u}, rs);
    for (int t = 0; t < T; ++t) {
      const int64_t step = int64_t(1) << t, len = y->type.shape[d] - step;
      Value* bit = b.emit(OpKind::Ge, {b.emit(OpKind::Mod, {u, constant(b, DType::I32, (double)(2 * step))}, {}),
                                       constant(b, DType::I32, (double)step)},
                          {});
      y = b.emit(OpKind::Where, {bit, sliceRows(b, y, d, step, step + len), sliceRows(b, y, d, 0, len)}, {});
    }
  }
  return b.tag({maskFills(b, y, w, s), s});
}

// The all_gather plan of a window: x whole along d, the op as written,
// then the result split as decided. in[0] is x, then a concat's fills in
// operand order.
LocalValue windowGather(Partitioner& b, const std::vector<LocalValue>& in, const Window& w, const Sharding& s) {
  const int d = w.d;
  Sharding whole = s;
  whole.dims[d].clear();
  LocalValue x = b.reshard(in[0], whole);
  const Op& op = *w.op;
  Value* y = nullptr;
  if (op.kind == OpKind::Slice) {
    y = sliceRows(b, x.v, d, op.attrs.getInt("start"), op.attrs.getInt("end"));
  } else {
    std::vector<Value*> parts;
    size_t fill = 1;
    for (size_t i = 0; i < op.operands.size(); ++i) {
      if ((int)i != w.xPart) parts.push_back(b.reshard(in.at(fill++), whole).v);
      else if (w.slice) parts.push_back(sliceRows(b, x.v, d, w.slice->attrs.getInt("start"), w.slice->attrs.getInt("end")));
      else parts.push_back(x.v);
    }
    AttrMap ax;
    ax.set("axis", (int64_t)d);
    y = parts.size() == 1 ? parts[0] : b.emit(OpKind::Concat, parts, ax);
  }
  return b.reshard(b.tag({y, whole}), s);
}

// Emits the halo plan or the all_gather plan of a shift or a window along
// dim d, whichever the same dry run finds sends fewer bytes (then holds
// less memory, then fewer FLOPs; ties: the halo), and reports both for
// :plans. (At n = 2 both send one block: the halo's permute, which keeps
// only the rank's block and talks to one neighbour, wins over the gather's
// whole dim despite its mask's few FLOPs.) ins[0] is x
// (the halo reads it laid out as the result, the gather whole along d),
// then the fills (the halo reads them where they are).
using WindowPlan = std::function<LocalValue(const std::vector<LocalValue>&)>;
void haloOrGather(Partitioner& b, const std::vector<LocalValue>& ins, int d, const WindowPlan& halo,
                  const WindowPlan& gather) {
  const Sharding& s = b.decided();
  PlanCost ch = b.dryRun(ins, halo), cg = b.dryRun(ins, gather);
  bool useHalo = std::tie(ch.bytes, ch.memory, ch.flops) <= std::tie(cg.bytes, cg.memory, cg.flops);
  Sharding whole = s;
  whole.dims[d].clear();
  std::vector<Sharding> atS{s}, atWhole{whole};
  for (size_t i = 1; i < ins.size(); ++i) {
    atS.push_back(ins[i].s);
    atWhole.push_back(whole);
  }
  b.reportPlans({{atS, s, ch}, {atWhole, s, cg}}, useHalo ? 0 : 1);
  b.setResult(useHalo ? halo(ins) : gather(ins));
}

// Both plans of a window, costed by the same dry run; the one sending fewer
// bytes (then memory, then FLOPs; ties: the halo) is emitted.
void partitionWindow(Partitioner& b, const Window& w) {
  const Sharding& s = b.decided();
  std::vector<LocalValue> ins{b.local(w.x)};
  if (w.op->kind == OpKind::Concat)
    for (size_t i = 0; i < w.op->operands.size(); ++i)
      if ((int)i != w.xPart) ins.push_back(b.local(w.op->operands[i]));
  haloOrGather(
      b, ins, w.d, [&](const std::vector<LocalValue>& in) { return windowHalo(b, b.reshard(in[0], s), w, s); },
      [&](const std::vector<LocalValue>& in) { return windowGather(b, in, w, s); });
}

}  // namespace

void partitionSlice(Partitioner& b, const Op& op) {
  auto u = b.users(op.result);
  if (u.size() == 1 && u[0] && matchShift(b, *u[0])) return b.fold();
  if (u.size() == 1 && u[0]) {
    auto w = matchWindow(b, *u[0]);
    if (w && w->slice == &op) return b.fold();
  }
  if (auto w = matchWindow(b, op)) return partitionWindow(b, *w);
  partitionLocal(b, op);
}

void partitionConcat(Partitioner& b, const Op& op) {
  auto sh = matchShift(b, op);
  if (!sh) {
    if (auto w = matchWindow(b, op)) return partitionWindow(b, *w);
    return partitionLocal(b, op);
  }
  const Sharding& s = b.decided();
  // The inputs: x, and the fill operand of a shift (partitioned on its own;
  // the gather plan reads it, the halo plan only its value).
  std::vector<LocalValue> ins{b.local(sh->x)};
  for (const Value* o : op.operands)
    if (!(o->def && o->def->kind == OpKind::Slice && o->def->operands[0] == sh->x)) ins.push_back(b.local(o));
  haloOrGather(
      b, ins, sh->d, [&](const std::vector<LocalValue>& in) { return haloShift(b, b.reshard(in[0], s), *sh, s); },
      [&](const std::vector<LocalValue>& in) { return gatherShift(b, in, op, *sh, s); });
}

// ---------------------------------------------------------------- take

// With the table's rows split over a group of n ranks (blocks of `rl`
// rows), member j holds rows [j rl, (j + 1) rl): it gathers the ids in that
// range from its block and zeros the rest; the members' results sum to the
// whole (the plan's pending partial sum: one all_reduce, or a
// reduce_scatter where the result is wanted split). An id outside the
// whole table is passed on unchanged, so the local take reports it.
void partitionTake(Partitioner& b, const Op& op) {
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

// ---------------------------------------------------------------- dispatch

void applyPartitionRule(PartitionRule rule, Partitioner& b, const Op& op) {
  switch (rule) {
#define GSL_PARTITION_RULE_CASE(name) \
  case PartitionRule::name: return partition##name(b, op);
    GSL_PARTITION_RULES(GSL_PARTITION_RULE_CASE)
#undef GSL_PARTITION_RULE_CASE
    case PartitionRule::None: break;
  }
  GSL_ASSERT(false, std::string("internal error: op '") + op.info().mnemonic + "' has no partition rule");
}

}  // namespace gsl::passes::partitioner
