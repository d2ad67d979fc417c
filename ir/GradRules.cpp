#include "ir/GradRules.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "support/Diagnostics.h"

namespace gsl::ir {

// ================================================================ GradBuilder

Value* GradBuilder::op(OpKind k, std::vector<Value*> operands, AttrMap attrs) {
  std::vector<TensorType> in;
  for (Value* v : operands) in.push_back(v->type);
  TensorType out;
  std::string e = inferType(k, in, attrs, out);
  GSL_ASSERT(e.empty(), std::string("gradient rule built an ill-typed ") + opName(k) + ": " + e);
  return f_.append(k, std::move(operands), std::move(attrs), out, loc_)->result;
}

Value* GradBuilder::constant(double value, DType dt, const Shape& shape) {
  Value*& s = scalars_[{value, dt}];
  if (!s) {
    AttrMap at;
    at.set("value", value);
    s = f_.append(OpKind::Constant, {}, std::move(at), TensorType{dt, {}}, loc_)->result;
  }
  return broadcast(s, shape);
}

Value* GradBuilder::cast(Value* a, DType dt) {
  if (a->type.dtype == dt) return a;
  AttrMap at;
  at.set("dtype", dt);
  return op(OpKind::Cast, {a}, std::move(at));
}

Value* GradBuilder::reshape(Value* v, const Shape& shape) {
  if (v->type.shape == shape) return v;
  AttrMap at;
  at.set("shape", std::vector<int64_t>(shape));
  return op(OpKind::Reshape, {v}, std::move(at));
}

Value* GradBuilder::broadcast(Value* v, const Shape& shape) {
  if (v->type.shape == shape) return v;
  AttrMap at;
  at.set("shape", std::vector<int64_t>(shape));
  return op(OpKind::Broadcast, {v}, std::move(at));
}

Value* GradBuilder::transpose(Value* v, const std::vector<int64_t>& perm) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == (int64_t)i;
  if (identity) return v;
  AttrMap at;
  at.set("perm", perm);
  return op(OpKind::Transpose, {v}, std::move(at));
}

Value* GradBuilder::transposeLast2(Value* v) {
  int r = v->type.rank();
  GSL_ASSERT(r >= 2, "transposeLast2 needs rank >= 2, got " + v->type.str());
  std::vector<int64_t> perm;
  for (int i = 0; i < r; ++i) perm.push_back(i);
  std::swap(perm[r - 1], perm[r - 2]);
  return transpose(v, perm);
}

Value* GradBuilder::sum(Value* v, const std::vector<int64_t>& axes, bool keepdims) {
  if (axes.empty()) return v;
  AttrMap at;
  at.set("axis", axes);
  at.set("keepdims", keepdims);
  return op(OpKind::Sum, {v}, std::move(at));
}

Value* GradBuilder::sumTo(Value* v, const Shape& shape) {
  const Shape& vs = v->type.shape;
  if (vs == shape) return v;
  GSL_ASSERT(vs.size() >= shape.size(),
             "sumTo: " + v->type.str() + " is not a broadcast of " + shapeStr(shape));
  size_t lead = vs.size() - shape.size();
  std::vector<int64_t> axes;
  for (size_t d = 0; d < vs.size(); ++d) {
    if (d < lead) {
      axes.push_back((int64_t)d);
    } else if (shape[d - lead] != vs[d]) {
      GSL_ASSERT(shape[d - lead] == 1,
                 "sumTo: " + v->type.str() + " is not a broadcast of " + shapeStr(shape));
      axes.push_back((int64_t)d);
    }
  }
  return reshape(sum(v, axes, false), shape);
}

Value* GradBuilder::keepDims(Value* g, const Shape& inShape, const std::vector<int64_t>& axes) {
  Shape kept = inShape;
  for (int64_t a : axes) kept[a] = 1;
  return reshape(g, kept);
}

Value* GradBuilder::unreduce(Value* g, const Shape& inShape, const std::vector<int64_t>& axes) {
  // Broadcasting adds leading dims itself: reshape only when a reduced
  // axis comes after a kept one.
  Shape kept = inShape;
  for (int64_t a : axes) kept[a] = 1;
  size_t lead = 0;
  while (lead < kept.size() && kept[lead] == 1 && lead < axes.size() && axes[lead] == (int64_t)lead) ++lead;
  if (g->type.shape == Shape(kept.begin() + lead, kept.end())) return broadcast(g, inShape);
  return broadcast(reshape(g, kept), inShape);
}

// ================================================================ rules

namespace {

AttrMap attrs(std::initializer_list<std::pair<const char*, Attr>> kv) {
  AttrMap m;
  for (auto& [k, v] : kv) m.set(k, v);
  return m;
}

void start(const Op& op, std::vector<Value*>& og) { og.assign(op.operands.size(), nullptr); }

Value* cmp(GradBuilder& b, OpKind k, Value* x, Value* y) { return b.op(k, {x, y}); }

// Elementwise unary rule: operand adjoint = g * d, d built by `deriv`.
template <class F>
void unaryRule(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og, F deriv) {
  start(op, og);
  if (b.wants(0)) og[0] = deriv(op.operands[0], op.result);
}

// An identity matrix f32[n, n]: one_hot of 0..n-1 (an exclusive cumsum of ones).
Value* eye(GradBuilder& b, int64_t n) {
  Value* ones = b.constant(1.0, DType::I32, {n});
  Value* iota = b.op(OpKind::CumSum, {ones}, attrs({{"axis", int64_t(0)}, {"exclusive", true}}));
  return b.op(OpKind::OneHot, {iota}, attrs({{"n", n}}));
}

}  // namespace

void gradCopy(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  unaryRule(b, op, g, og, [&](Value*, Value*) { return g; });
}

// dropout(x, key) = x * mask / (1 - p), linear in x: the adjoint is the same
// mask (the same key, site and global shape) applied to g, so
// dropout(g, key) with the op's attributes. Without a key: the identity.
void gradDropout(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  unaryRule(b, op, g, og, [&](Value*, Value*) {
    if (op.operands.size() < 2) return g;
    return b.op(OpKind::Dropout, {g, op.operands[1]}, op.attrs);
  });
}

void gradNeg(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  unaryRule(b, op, g, og, [&](Value*, Value*) { return b.neg(g); });
}

// d exp(x) = exp(x) = y
void gradExp(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  unaryRule(b, op, g, og, [&](Value*, Value* y) { return b.mul(g, y); });
}

// d log(x) = 1 / x
void gradLog(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  unaryRule(b, op, g, og, [&](Value* x, Value*) { return b.div(g, x); });
}

// d sqrt(x) = 0.5 / sqrt(x) = 0.5 / y
void gradSqrt(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  unaryRule(b, op, g, og, [&](Value*, Value* y) { return b.div(b.mul(g, b.scalar(0.5)), y); });
}

// d x^-1/2 = -0.5 x^-3/2 = -0.5 y^3
void gradRsqrt(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  unaryRule(b, op, g, og, [&](Value*, Value* y) {
    return b.mul(g, b.mul(b.scalar(-0.5), b.mul(y, b.mul(y, y))));
  });
}

// d tanh(x) = 1 - y^2
void gradTanh(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  unaryRule(b, op, g, og, [&](Value*, Value* y) { return b.mul(g, b.sub(b.scalar(1), b.mul(y, y))); });
}

// relu'(x) = 1 for x > 0, else 0 (0 at the kink, as JAX).
void gradRelu(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  unaryRule(b, op, g, og, [&](Value* x, Value*) {
    Value* zero = b.constant(0.0, x->type.dtype);
    return b.where(cmp(b, OpKind::Gt, x, zero), g, zero);
  });
}

// gelu(x) = 0.5 x (1 + t), t = tanh(u), u = c (x + k x^3):
// gelu'(x) = 0.5 (1 + t) + 0.5 c x (1 - t^2) (1 + 3 k x^2).
void gradGelu(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  unaryRule(b, op, g, og, [&](Value* x, Value*) {
    const double c = (double)std::sqrt(2.0f / (float)M_PI), k = (double)0.044715f;
    Value* x2 = b.mul(x, x);
    Value* u = b.mul(b.mul(x, b.add(b.scalar(1), b.mul(b.scalar(k), x2))), b.scalar(c));
    Value* t = b.op(OpKind::Tanh, {u});
    Value* first = b.mul(b.scalar(0.5), b.add(b.scalar(1), t));
    Value* second = b.mul(b.mul(b.mul(b.scalar(0.5 * c), x), b.sub(b.scalar(1), b.mul(t, t))),
                          b.add(b.scalar(1), b.mul(b.scalar(3 * k), x2)));
    return b.mul(g, b.add(first, second));
  });
}

// erf'(x) = 2 / sqrt(pi) exp(-x^2).
void gradErf(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  unaryRule(b, op, g, og, [&](Value* x, Value*) {
    Value* e = b.op(OpKind::Exp, {b.neg(b.mul(x, x))});
    return b.mul(g, b.mul(b.scalar(2.0 / std::sqrt(M_PI)), e));
  });
}

// gelu_exact(x) = x Phi(x), Phi(x) = (1 + erf(x / sqrt(2))) / 2:
// gelu_exact'(x) = Phi(x) + x exp(-x^2 / 2) / sqrt(2 pi).
void gradGeluExact(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  unaryRule(b, op, g, og, [&](Value* x, Value*) {
    Value* phi = b.mul(b.scalar(0.5), b.add(b.scalar(1), b.op(OpKind::Erf, {b.mul(x, b.scalar(M_SQRT1_2))})));
    Value* pdf = b.mul(b.scalar(1.0 / std::sqrt(2.0 * M_PI)), b.op(OpKind::Exp, {b.mul(b.scalar(-0.5), b.mul(x, x))}));
    return b.mul(g, b.add(phi, b.mul(x, pdf)));
  });
}

// sigmoid' = y (1 - y)
void gradSigmoid(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  unaryRule(b, op, g, og, [&](Value*, Value* y) { return b.mul(g, b.mul(y, b.sub(b.scalar(1), y))); });
}

// abs' = sign(x) (0 at 0)
void gradAbs(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  unaryRule(b, op, g, og, [&](Value* x, Value*) {
    Value* zero = b.constant(0.0, x->type.dtype);
    Value* pos = b.cast(cmp(b, OpKind::Gt, x, zero), g->type.dtype);
    Value* negs = b.cast(cmp(b, OpKind::Lt, x, zero), g->type.dtype);
    return b.mul(g, b.sub(pos, negs));
  });
}

// A cast between float dtypes (f32, bf16) passes the gradient, cast back to
// the operand's dtype (mixed precision: an f32 param cast to bf16 gets an
// f32 gradient); casts to or from i32 and bool pass none.
void gradCast(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  start(op, og);
  if (b.wants(0) && isFloat(op.operands[0]->type.dtype) && isFloat(op.result->type.dtype))
    og[0] = b.cast(g, op.operands[0]->type.dtype);
}

// Binary ops: the elementwise adjoint (in the broadcast result shape) is
// summed back to each operand's shape.
void gradAdd(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  start(op, og);
  if (b.wants(0)) og[0] = b.sumTo(g, op.operands[0]->type.shape);
  if (b.wants(1)) og[1] = b.sumTo(g, op.operands[1]->type.shape);
}

void gradSub(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  start(op, og);
  if (b.wants(0)) og[0] = b.sumTo(g, op.operands[0]->type.shape);
  if (b.wants(1)) og[1] = b.sumTo(b.neg(g), op.operands[1]->type.shape);
}

void gradMul(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  start(op, og);
  Value *x = op.operands[0], *y = op.operands[1];
  if (b.wants(0)) og[0] = b.sumTo(b.mul(g, y), x->type.shape);
  if (b.wants(1)) og[1] = b.sumTo(b.mul(g, x), y->type.shape);
}

// r = x / y: dx = g / y, dy = -g x / y^2 = -(g / y) r.
void gradDiv(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  start(op, og);
  Value *x = op.operands[0], *y = op.operands[1];
  Value* gy = b.div(g, y);
  if (b.wants(0)) og[0] = b.sumTo(gy, x->type.shape);
  if (b.wants(1)) og[1] = b.sumTo(b.neg(b.mul(gy, op.result)), y->type.shape);
}

// r = a^e: da = g e a^(e-1); de = g r log(a), taken as 0 where a <= 0
// (log is evaluated on where(a > 0, a, 1), so no NaN is produced).
void gradPow(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  start(op, og);
  Value *a = op.operands[0], *e = op.operands[1];
  if (b.wants(0)) {
    Value* p = b.op(OpKind::Pow, {a, b.sub(e, b.scalar(1))});
    og[0] = b.sumTo(b.mul(g, b.mul(e, p)), a->type.shape);
  }
  if (b.wants(1)) {
    Value* pos = cmp(b, OpKind::Gt, a, b.scalar(0));
    Value* logA = b.op(OpKind::Log, {b.where(pos, a, b.scalar(1))});
    og[1] = b.sumTo(b.mul(g, b.mul(op.result, logA)), e->type.shape);
  }
}

// maximum/minimum: the gradient goes to the selected operand; a tie goes to
// the first operand.
static void selectRule(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og, OpKind firstWins) {
  start(op, og);
  Value *x = op.operands[0], *y = op.operands[1];
  Value* mask = cmp(b, firstWins, x, y);
  Value* zero = b.constant(0.0, g->type.dtype);
  if (b.wants(0)) og[0] = b.sumTo(b.where(mask, g, zero), x->type.shape);
  if (b.wants(1)) og[1] = b.sumTo(b.where(mask, zero, g), y->type.shape);
}

void gradMaximum(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  selectRule(b, op, g, og, OpKind::Ge);
}

void gradMinimum(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  selectRule(b, op, g, og, OpKind::Le);
}

// where(c, x, y): g to x where c holds, to y elsewhere; none to c. A
// compile-time constant c (`where(DENSE == 1, dense, moe)`) gives all of g
// to the branch it picks and none to the other, so the other's backward
// pass is never built.
void gradWhere(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  start(op, og);
  Value *c = op.operands[0], *x = op.operands[1], *y = op.operands[2];
  if (auto k = scalarConstant(c)) {
    int picked = *k != 0 ? 1 : 2;
    if (b.wants(picked)) og[picked] = b.sumTo(g, op.operands[picked]->type.shape);
    return;
  }
  Value* zero = b.constant(0.0, g->type.dtype);
  if (b.wants(1)) og[1] = b.sumTo(b.where(c, g, zero), x->type.shape);
  if (b.wants(2)) og[2] = b.sumTo(b.where(c, zero, g), y->type.shape);
}

// matmul with NumPy promotion: a 1-D left operand is [1, K], a 1-D right
// operand [K, 1]. With A: [..., M, K], B: [..., K, N], G: [batch, M, N]:
// dA = G @ B^T, dB = A^T @ G, each summed over the batch dims that operand
// was broadcast along, then reshaped back (dropping the promoted dims).
void gradMatMul(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  start(op, og);
  Value *a = op.operands[0], *w = op.operands[1];
  const Shape &sa = a->type.shape, &sb = w->type.shape;
  const bool aVec = sa.size() == 1, bVec = sb.size() == 1;
  Shape pa = sa, pb = sb;
  if (aVec) pa.insert(pa.begin(), 1);
  if (bVec) pb.push_back(1);
  const Shape& rs = op.result->type.shape;
  size_t nBatch = rs.size() - (aVec ? 0 : 1) - (bVec ? 0 : 1);
  Shape gp(rs.begin(), rs.begin() + nBatch);
  gp.push_back(pa[pa.size() - 2]);
  gp.push_back(pb.back());
  Value* G = b.reshape(g, gp);
  Value* A = b.reshape(a, pa);
  Value* B = b.reshape(w, pb);
  if (b.wants(0)) og[0] = b.reshape(b.sumTo(b.op(OpKind::MatMul, {G, b.transposeLast2(B)}), pa), sa);
  if (b.wants(1)) og[1] = b.reshape(b.sumTo(b.op(OpKind::MatMul, {b.transposeLast2(A), G}), pb), sb);
}

// einsum: the adjoint of operand i is the einsum of g (output labels) with
// the other operands into operand i's labels. Then:
//  - labels of operand i found in no other operand nor the output were
//    summed out by the forward pass: the einsum leaves them out and the
//    result is broadcast back along them;
//  - a label repeated within operand i (a diagonal, "ii->i") gets the
//    adjoint on the diagonal only: the adjoint over the distinct labels is
//    multiplied, in a last einsum, by one identity matrix per repeat.
void gradEinsum(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  start(op, og);
  const EinsumSpec& es = op.attrs.getEinsum("spec");
  std::map<char, int64_t> size;
  std::set<char> used(es.output.begin(), es.output.end());
  for (size_t i = 0; i < es.inputs.size(); ++i)
    for (size_t d = 0; d < es.inputs[i].size(); ++d) {
      size[es.inputs[i][d]] = op.operands[i]->type.shape[d];
      used.insert(es.inputs[i][d]);
    }
  auto has = [](const std::string& s, char c) { return s.find(c) != std::string::npos; };

  for (size_t i = 0; i < op.operands.size(); ++i) {
    if (!b.wants(i)) continue;
    const std::string& li = es.inputs[i];
    std::string distinct, kept;  // distinct labels of operand i; those also found elsewhere
    for (char c : li)
      if (!has(distinct, c)) distinct += c;
    for (char c : distinct) {
      bool elsewhere = has(es.output, c);
      for (size_t j = 0; j < es.inputs.size(); ++j) elsewhere |= j != i && has(es.inputs[j], c);
      if (elsewhere) kept += c;
    }
    // The adjoint over `kept`.
    Value* r;
    if (es.inputs.size() == 1 && es.output.size() == kept.size() &&
        std::is_permutation(kept.begin(), kept.end(), es.output.begin())) {
      std::vector<int64_t> perm;  // a plain transpose of g
      for (char c : kept) perm.push_back((int64_t)es.output.find(c));
      r = b.transpose(g, perm);
    } else {
      std::string spec = es.output;
      std::vector<Value*> ins{g};
      for (size_t j = 0; j < es.inputs.size(); ++j) {
        if (j == i) continue;
        spec += "," + es.inputs[j];
        ins.push_back(op.operands[j]);
      }
      spec += "->" + kept;
      r = b.op(OpKind::Einsum, ins, attrs({{"spec", einsumSpec(spec, ins.size())}}));
    }
    // Broadcast back along the labels summed out in the forward pass.
    if (kept != distinct) {
      Shape keepShape, full;
      for (char c : distinct) {
        full.push_back(size[c]);
        keepShape.push_back(has(kept, c) ? size[c] : 1);
      }
      r = b.broadcast(b.reshape(r, keepShape), full);
    }
    // Embed on the diagonal for repeated labels.
    if (distinct.size() != li.size()) {
      std::string spec = distinct, outLabels;
      std::vector<Value*> ins{r};
      std::set<char> usedHere = used;
      for (size_t d = 0; d < li.size(); ++d) {
        char c = li[d];
        if (li.find(c) == d) {
          outLabels += c;
          continue;
        }
        char fresh = 0;
        for (char cand : std::string("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"))
          if (!usedHere.count(cand)) {
            fresh = cand;
            break;
          }
        GSL_ASSERT(fresh, "einsum gradient: no free label for a diagonal");
        usedHere.insert(fresh);
        outLabels += fresh;
        spec += std::string(",") + c + fresh;
        ins.push_back(b.cast(eye(b, size[c]), r->type.dtype));  // bf16 einsums: a bf16 identity
      }
      spec += "->" + outLabels;
      r = b.op(OpKind::Einsum, ins, attrs({{"spec", einsumSpec(spec, ins.size())}}));
    }
    og[i] = r;
  }
}

// sum: g broadcast back along the reduced axes.
void gradSum(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  start(op, og);
  if (b.wants(0)) og[0] = b.unreduce(g, op.operands[0]->type.shape, op.attrs.getInts("axis"));
}

// mean: g / count broadcast back.
void gradMean(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  start(op, og);
  if (!b.wants(0)) return;
  const Shape& s = op.operands[0]->type.shape;
  const auto& axes = op.attrs.getInts("axis");
  int64_t count = 1;
  for (int64_t a : axes) count *= s[a];
  Value* scaled = count == 1 ? g : b.mul(g, b.scalar(1.0 / (double)std::max<int64_t>(count, 1)));
  og[0] = b.unreduce(scaled, s, axes);
}

// max/min reductions: g goes to the positions equal to the result, split
// evenly among ties.
void gradMaxMin(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  start(op, og);
  if (!b.wants(0)) return;
  Value* x = op.operands[0];
  const Shape& s = x->type.shape;
  const auto& axes = op.attrs.getInts("axis");
  Value* yk = b.keepDims(op.result, s, axes);
  Value* gk = b.keepDims(g, s, axes);
  Value* mask = b.cast(cmp(b, OpKind::Eq, x, yk), g->type.dtype);
  Value* count = b.sum(mask, axes, true);
  og[0] = b.mul(mask, b.div(gk, count));
}

// softmax: dx = y (g - sum(g y)) along the axis.
void gradSoftmax(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  start(op, og);
  if (!b.wants(0)) return;
  Value* y = op.result;
  Value* s = b.sum(b.mul(g, y), {op.attrs.getInt("axis")}, true);
  og[0] = b.mul(y, b.sub(g, s));
}

// log_softmax: dx = g - exp(y) sum(g) along the axis.
void gradLogSoftmax(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  start(op, og);
  if (!b.wants(0)) return;
  Value* s = b.sum(g, {op.attrs.getInt("axis")}, true);
  og[0] = b.sub(g, b.mul(b.op(OpKind::Exp, {op.result}), s));
}

// layer_norm (y = (x - mean) / sigma, sigma = sqrt(var + eps), over `axis`):
// dx = (1 / sigma) (g - mean(g) - y mean(g y)). 1 / sigma is recomputed
// from x (rsqrt of the variance plus eps).
void gradLayerNorm(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  start(op, og);
  if (!b.wants(0)) return;
  Value *x = op.operands[0], *y = op.result;
  const auto& axes = op.attrs.getInts("axis");
  auto mean = [&](Value* v) {
    return b.op(OpKind::Mean, {v}, attrs({{"axis", axes}, {"keepdims", true}}));
  };
  Value* d = b.sub(x, mean(x));
  Value* inv = b.op(OpKind::Rsqrt, {b.add(mean(b.mul(d, d)), b.scalar(op.attrs.getFloat("eps")))});
  Value* inner = b.sub(b.sub(g, mean(g)), b.mul(y, mean(b.mul(g, y))));
  og[0] = b.mul(inv, inner);
}

// cumsum: the adjoint is the reverse cumulative sum of g, computed as the
// lane total minus a forward cumsum of g: inclusive forward -> total minus
// the exclusive cumsum; exclusive forward -> total minus the inclusive one.
void gradCumSum(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  start(op, og);
  if (!b.wants(0)) return;
  int64_t axis = op.attrs.getInt("axis");
  bool exclusive = op.attrs.has("exclusive") && op.attrs.getBool("exclusive");
  Value* total = b.sum(g, {axis}, true);
  Value* c = b.op(OpKind::CumSum, {g}, attrs({{"axis", axis}, {"exclusive", !exclusive}}));
  og[0] = b.sub(total, c);
}

void gradReshape(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  start(op, og);
  if (b.wants(0)) og[0] = b.reshape(g, op.operands[0]->type.shape);
}

// transpose: g transposed by the inverse permutation.
void gradTranspose(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  start(op, og);
  if (!b.wants(0)) return;
  const auto& perm = op.attrs.getInts("perm");
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = (int64_t)i;
  og[0] = b.transpose(g, inv);
}

// concat: operand i's adjoint is its slice of g.
void gradConcat(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  start(op, og);
  int64_t axis = op.attrs.getInt("axis"), at = 0;
  for (size_t i = 0; i < op.operands.size(); ++i) {
    int64_t n = op.operands[i]->type.shape[axis];
    if (b.wants(i)) {
      if (op.operands.size() == 1) og[i] = g;
      else og[i] = b.op(OpKind::Slice, {g}, attrs({{"axis", axis}, {"start", at}, {"end", at + n}}));
    }
    at += n;
  }
}

// slice: g padded back to the operand's shape with zeros (a concat with
// broadcast zero constants before and after).
void gradSlice(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  start(op, og);
  if (!b.wants(0)) return;
  const Shape& s = op.operands[0]->type.shape;
  int64_t axis = op.attrs.getInt("axis"), lo = op.attrs.getInt("start"), hi = op.attrs.getInt("end");
  std::vector<Value*> parts;
  auto zeros = [&](int64_t n) {
    Shape z = s;
    z[axis] = n;
    return b.constant(0.0, g->type.dtype, z);
  };
  if (lo > 0) parts.push_back(zeros(lo));
  parts.push_back(g);
  if (hi < s[axis]) parts.push_back(zeros(s[axis] - hi));
  og[0] = parts.size() == 1 ? g : b.op(OpKind::Concat, parts, attrs({{"axis", axis}}));
}

void gradBroadcast(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  start(op, og);
  if (b.wants(0)) og[0] = b.sumTo(g, op.operands[0]->type.shape);
}

// take(table [R, ...], idx [I...]) -> [I..., ...]: the table's adjoint is
// one_hot(idx as [N], R)^T @ g as [N, D], reshaped to the table's shape
// (rows read several times accumulate). No gradient to the indices.
void gradTake(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& og) {
  start(op, og);
  if (!b.wants(0)) return;
  Value *table = op.operands[0], *idx = op.operands[1];
  const Shape& ts = table->type.shape;
  int64_t rows = ts[0], n = idx->type.numElements(), d = 1;
  for (size_t i = 1; i < ts.size(); ++i) d *= ts[i];
  Value* oh = b.cast(b.op(OpKind::OneHot, {b.reshape(idx, {n})}, attrs({{"n", rows}})), g->type.dtype);
  Value* dt = b.op(OpKind::MatMul, {b.transposeLast2(oh), b.reshape(g, {n, d})});
  og[0] = b.reshape(dt, ts);
}

}  // namespace gsl::ir
