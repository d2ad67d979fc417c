// Reference kernels: one evaluation rule per op of the op table.
//
// Layout of this file:
//   1. index helpers shared by every kernel (broadcast strides, an odometer
//      over a shape that tracks offsets into several operands, lanes along
//      one axis);
//   2. the kernels, grouped as the op table groups ops (unary, binary,
//      where, contractions, reductions, normalisations, data movement,
//      sources);
//   3. `evalOp`, the dispatch on OpKind.
//
// Conventions: the result type is always `op.result->type` (inferred and
// canonicalised by the op table, so axes are non-negative and sorted, the
// reshape target has no -1, ...). f32, i32 and bool are 4 bytes wide (bool
// is an int32 0/1), so data movement works on raw 32-bit words whatever the
// dtype. bf16 (2 bytes) is evaluated by `evalOp` in f32: its operands are
// widened (exactly), the f32 kernel runs, and a bf16 result is rounded to
// nearest even, so elementwise ops compute in f32 and round once,
// reductions and contractions accumulate in f32. i32 arithmetic wraps (two's complement) instead of invoking C++
// undefined behaviour. Reductions accumulate in double (f32) or wrapping
// int32 (i32); einsum accumulates in float; matmul uses Eigen's float
// product.
#include "backend/Kernels.h"

// GCC 12 reports a spurious -Wmaybe-uninitialized inside Eigen's AVX-512
// product kernel (built with -march=native); the warning fires where the
// templates are instantiated, so it is silenced for this whole file.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <stdexcept>

#include "backend/Engine.h"
#include "backend/LoopKernels.h"
#include "backend/Random.h"
#include "backend/Strides.h"
#include "support/BF16.h"
#include "support/Diagnostics.h"

namespace gsl::backend {

using ir::Op;
using ir::OpKind;

namespace {

// ================================================================ helpers

int64_t numElements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Strides of a tensor of shape `in` read as if broadcast (NumPy rules,
// right-aligned) to `out`: 0 along dims where `in` has size 1 or is absent.
Strides broadcastStrides(const Shape& in, const Shape& out) {
  GSL_ASSERT(in.size() <= out.size(), "broadcastStrides: operand rank exceeds result rank");
  Strides st(out.size(), 0);
  Strides inSt = rowMajorStrides(in);
  size_t lead = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) {
    GSL_ASSERT(in[i] == out[lead + i] || in[i] == 1, "broadcastStrides: incompatible shapes");
    st[lead + i] = in[i] == 1 ? 0 : inSt[i];
  }
  return st;
}

// Visits every index of `shape` in row-major order and calls
// f(linearIndex, offsets) where offsets[k] = sum_d index[d] * strides[k][d].
// Each strides[k] has one entry per dim of `shape`.
template <class F>
void forEachIndex(const Shape& shape, const std::vector<Strides>& strides, F&& f) {
  const size_t r = shape.size(), nops = strides.size();
  for (const auto& s : strides) GSL_ASSERT(s.size() == r, "forEachIndex: stride rank mismatch");
  const int64_t total = numElements(shape);
  if (total == 0) return;
  std::vector<int64_t> idx(r, 0), off(nops, 0);
  for (int64_t lin = 0; lin < total; ++lin) {
    f(lin, (const int64_t*)off.data());
    // Odometer increment, updating the offsets incrementally.
    for (int d = (int)r - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) {
        for (size_t k = 0; k < nops; ++k) off[k] += strides[k][d];
        break;
      }
      for (size_t k = 0; k < nops; ++k) off[k] -= strides[k][d] * (shape[d] - 1);
      idx[d] = 0;
    }
  }
}

// Lanes along one axis of a row-major shape: calls f(base, stride, n, lane)
// for every combination of the other dims; element j of the lane is at
// base + j * stride, and `lane` numbers lanes 0.. in row-major order of the
// remaining dims (the layout of the shape with `axis` removed).
template <class F>
void forEachLane(const Shape& shape, int64_t axis, F&& f) {
  int64_t outer = 1, inner = 1, n = shape[axis];
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) f(o * n * inner + i, inner, n, o * inner + i);
}

// Maps every element of `shape` to its group when the dims listed in `axes`
// (sorted, non-negative) are reduced: calls f(inIndex, groupIndex), groups
// numbered row-major over the kept dims. Returns the number of groups.
template <class F>
int64_t forEachReduced(const Shape& shape, const std::vector<int64_t>& axes, F&& f) {
  Shape kept = shape;
  for (int64_t a : axes) kept[a] = 1;
  Strides st = broadcastStrides(kept, shape);  // 0 along reduced axes
  forEachIndex(shape, {st}, [&](int64_t lin, const int64_t* off) { f(lin, off[0]); });
  return numElements(kept);
}

const int32_t* words(const Tensor& t) { return static_cast<const int32_t*>(t.raw()); }
int32_t* words(Tensor& t) { return static_cast<int32_t*>(t.raw()); }

// Wrapping int32 arithmetic (no signed-overflow UB).
int32_t wrapAdd(int32_t a, int32_t b) { return (int32_t)((uint32_t)a + (uint32_t)b); }
int32_t wrapSub(int32_t a, int32_t b) { return (int32_t)((uint32_t)a - (uint32_t)b); }
int32_t wrapMul(int32_t a, int32_t b) { return (int32_t)((uint32_t)a * (uint32_t)b); }

// Copies x permuted: result dim i = x dim perm[i] (any dtype).
Tensor permute(const Tensor& x, const std::vector<int64_t>& perm) {
  TensorType t{x.dtype(), {}};
  Strides inSt = rowMajorStrides(x.shape()), st;
  for (int64_t p : perm) {
    t.shape.push_back(x.shape()[p]);
    st.push_back(inSt[p]);
  }
  Tensor out(t);
  const int32_t* src = words(x);
  int32_t* dst = words(out);
  forEachIndex(t.shape, {st}, [&](int64_t lin, const int64_t* off) { dst[lin] = src[off[0]]; });
  return out;
}

// Same words, new type (reshape; also used to view a result differently).
Tensor retype(const Tensor& x, const TensorType& t) {
  Tensor out(t);
  GSL_ASSERT(out.size() == x.size(), "retype: element count mismatch");
  if (x.size()) std::memcpy(out.raw(), x.raw(), x.bytes());
  return out;
}

// bf16 <-> f32 (widening is exact; narrowing rounds to nearest even).
Tensor widenToF32(const Tensor& x) {
  Tensor out(TensorType{DType::F32, x.shape()});
  widenBF16(x.bf16(), out.f32(), x.size());
  return out;
}
Tensor narrowToBF16(const Tensor& x) {
  Tensor out(TensorType{DType::BF16, x.shape()});
  narrowBF16(x.f32(), out.bf16(), x.size());
  return out;
}

// ================================================================ unary

float gelu(float x) {
  const float c = std::sqrt(2.0f / (float)M_PI);
  return 0.5f * x * (1.0f + std::tanh(c * (x + 0.044715f * x * x * x)));
}

// Exact GELU: x Phi(x) = 0.5 x (1 + erf(x / sqrt(2))), in f32 with the C
// library's erff (the JIT computes the same expression).
float geluExact(float x) { return 0.5f * x * (1.0f + std::erf(x * (float)M_SQRT1_2)); }

float sigmoid(float x) {
  if (x >= 0) return 1.0f / (1.0f + std::exp(-x));
  float e = std::exp(x);
  return e / (1.0f + e);
}

// f32 -> i32: truncation toward zero; saturates out-of-range values and
// maps NaN to 0 (as XLA's convert), instead of C++'s undefined behaviour.
int32_t castF32ToI32(float x) {
  if (std::isnan(x)) return 0;
  if (x >= 2147483648.0f) return std::numeric_limits<int32_t>::max();
  if (x <= -2147483648.0f) return std::numeric_limits<int32_t>::min();
  return (int32_t)x;
}

Tensor unaryF32(const Tensor& x, const TensorType& rt, float (*fn)(float)) {
  Tensor out(rt);
  const float* a = x.f32();
  float* r = out.f32();
  for (int64_t i = 0; i < x.size(); ++i) r[i] = fn(a[i]);
  return out;
}

Tensor unaryI32(const Tensor& x, const TensorType& rt, int32_t (*fn)(int32_t)) {
  Tensor out(rt);
  const int32_t* a = x.i32();
  int32_t* r = out.i32();
  for (int64_t i = 0; i < x.size(); ++i) r[i] = fn(a[i]);
  return out;
}

Tensor cast(const Tensor& x, const TensorType& rt) {
  if (x.dtype() == rt.dtype) return retype(x, rt);
  // bf16 goes through f32: widen first, or cast to f32 and round.
  if (x.dtype() == DType::BF16) return cast(widenToF32(x), rt);
  if (rt.dtype == DType::BF16) return narrowToBF16(cast(x, TensorType{DType::F32, rt.shape}));
  Tensor out(rt);
  const int64_t n = x.size();
  if (x.dtype() == DType::F32) {
    const float* a = x.f32();
    int32_t* r = out.i32();
    for (int64_t i = 0; i < n; ++i)
      r[i] = rt.dtype == DType::Bool ? (a[i] != 0.0f ? 1 : 0) : castF32ToI32(a[i]);
  } else if (rt.dtype == DType::F32) {
    const int32_t* a = x.i32();
    float* r = out.f32();
    for (int64_t i = 0; i < n; ++i) r[i] = (float)a[i];  // bool: 0/1 already
  } else {  // i32 <-> bool
    const int32_t* a = x.i32();
    int32_t* r = out.i32();
    for (int64_t i = 0; i < n; ++i) r[i] = rt.dtype == DType::Bool ? (a[i] != 0 ? 1 : 0) : a[i];
  }
  return out;
}

Tensor unary(OpKind k, const Tensor& x, const TensorType& rt) {
  const bool f = x.dtype() == DType::F32;
  switch (k) {
    case OpKind::Copy: return retype(x, rt);
    case OpKind::Neg:
      return f ? unaryF32(x, rt, [](float v) { return -v; })
               : unaryI32(x, rt, [](int32_t v) { return wrapSub(0, v); });
    case OpKind::Abs:
      return f ? unaryF32(x, rt, [](float v) { return std::fabs(v); })
               : unaryI32(x, rt, [](int32_t v) { return v < 0 ? wrapSub(0, v) : v; });
    case OpKind::Relu:  // NaN propagates (as max(x, 0) in JAX)
      return f ? unaryF32(x, rt, [](float v) { return v > 0 || std::isnan(v) ? v : 0.0f; })
               : unaryI32(x, rt, [](int32_t v) { return v > 0 ? v : 0; });
    case OpKind::Exp: return unaryF32(x, rt, [](float v) { return std::exp(v); });
    case OpKind::Log: return unaryF32(x, rt, [](float v) { return std::log(v); });
    case OpKind::Sqrt: return unaryF32(x, rt, [](float v) { return std::sqrt(v); });
    case OpKind::Rsqrt: return unaryF32(x, rt, [](float v) { return 1.0f / std::sqrt(v); });
    case OpKind::Tanh: return unaryF32(x, rt, [](float v) { return std::tanh(v); });
    case OpKind::Gelu: return unaryF32(x, rt, gelu);
    case OpKind::Erf: return unaryF32(x, rt, [](float v) { return std::erf(v); });
    case OpKind::GeluExact: return unaryF32(x, rt, geluExact);
    case OpKind::Sigmoid: return unaryF32(x, rt, sigmoid);
    case OpKind::Not: return unaryI32(x, rt, [](int32_t v) { return v ? 0 : 1; });
    case OpKind::Cast: return cast(x, rt);
    default: GSL_ASSERT(false, std::string("not a unary op: ") + ir::opName(k));
  }
  return {};
}

// ================================================================ binary

// NumPy floor-mod: the result has the sign of the divisor.
float floorModF32(float a, float b) {
  float r = std::fmod(a, b);
  if (r == 0.0f) return std::copysign(0.0f, b);
  if ((r < 0) != (b < 0)) r += b;
  return r;
}

int32_t floorModI32(int32_t a, int32_t b) {
  if (b == 0) return 0;       // NumPy gives 0 (with a warning); never trap
  if (b == -1) return 0;      // also avoids INT_MIN % -1
  int32_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

// Python's and NumPy's `//` on integers: the quotient rounded toward
// minus infinity (floorModI32's partner: a == (a // b) * b + a % b).
// b == 0 gives 0 (NumPy, with a warning) and INT_MIN // -1 wraps to
// INT_MIN (NumPy): never traps.
int32_t floorDivI32(int32_t a, int32_t b) {
  if (b == 0) return 0;
  if (b == -1) return (int32_t)(0u - (uint32_t)a);
  int32_t q = a / b;
  if (a % b != 0 && ((a % b < 0) != (b < 0))) --q;
  return q;
}

// Integer power by squaring, wrapping; negative exponents give the integer
// part of 1 / a^-e: 1 for a = 1, +-1 for a = -1, else 0 (0 ** -e as well).
int32_t powI32(int32_t a, int32_t e) {
  if (e < 0) {
    if (a == 1) return 1;
    if (a == -1) return (e & 1) ? -1 : 1;
    return 0;
  }
  int32_t r = 1;
  int32_t base = a;
  while (e) {
    if (e & 1) r = wrapMul(r, base);
    base = wrapMul(base, base);
    e >>= 1;
  }
  return r;
}

float maxF32(float a, float b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }
float minF32(float a, float b) { return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b); }

// Elementwise over the broadcast of `a` and `b` into result type `rt`.
// `fn(x, y)` gets the operands' elements as TIn and returns TOut.
template <class TIn, class TOut, class F>
Tensor broadcastBinary(const Tensor& a, const Tensor& b, const TensorType& rt, F fn) {
  Tensor out(rt);
  const TIn* pa = static_cast<const TIn*>(a.raw());
  const TIn* pb = static_cast<const TIn*>(b.raw());
  TOut* pr = static_cast<TOut*>(out.raw());
  if (a.shape() == rt.shape && b.shape() == rt.shape) {  // common fast case
    for (int64_t i = 0; i < out.size(); ++i) pr[i] = fn(pa[i], pb[i]);
    return out;
  }
  forEachIndex(rt.shape, {broadcastStrides(a.shape(), rt.shape), broadcastStrides(b.shape(), rt.shape)},
               [&](int64_t lin, const int64_t* off) { pr[lin] = fn(pa[off[0]], pb[off[1]]); });
  return out;
}

template <class T>
Tensor compare(OpKind k, const Tensor& a, const Tensor& b, const TensorType& rt) {
  auto cmp = [&](auto pred) {
    return broadcastBinary<T, int32_t>(a, b, rt, [pred](T x, T y) { return pred(x, y) ? 1 : 0; });
  };
  switch (k) {
    case OpKind::Eq: return cmp([](T x, T y) { return x == y; });
    case OpKind::Ne: return cmp([](T x, T y) { return x != y; });
    case OpKind::Lt: return cmp([](T x, T y) { return x < y; });
    case OpKind::Le: return cmp([](T x, T y) { return x <= y; });
    case OpKind::Gt: return cmp([](T x, T y) { return x > y; });
    case OpKind::Ge: return cmp([](T x, T y) { return x >= y; });
    default: GSL_ASSERT(false, "not a comparison");
  }
  return {};
}

Tensor binary(OpKind k, const Tensor& a, const Tensor& b, const TensorType& rt) {
  GSL_ASSERT(a.dtype() == b.dtype(), std::string(ir::opName(k)) + ": operand dtypes differ");
  switch (k) {
    case OpKind::Eq: case OpKind::Ne: case OpKind::Lt:
    case OpKind::Le: case OpKind::Gt: case OpKind::Ge:
      return a.dtype() == DType::F32 ? compare<float>(k, a, b, rt) : compare<int32_t>(k, a, b, rt);
    case OpKind::And:
      return broadcastBinary<int32_t, int32_t>(a, b, rt, [](int32_t x, int32_t y) { return (x && y) ? 1 : 0; });
    case OpKind::Or:
      return broadcastBinary<int32_t, int32_t>(a, b, rt, [](int32_t x, int32_t y) { return (x || y) ? 1 : 0; });
    default: break;
  }
  if (a.dtype() == DType::F32) {
    auto f = [&](auto fn) { return broadcastBinary<float, float>(a, b, rt, fn); };
    switch (k) {
      case OpKind::Add: return f([](float x, float y) { return x + y; });
      case OpKind::Sub: return f([](float x, float y) { return x - y; });
      case OpKind::Mul: return f([](float x, float y) { return x * y; });
      case OpKind::Div: return f([](float x, float y) { return x / y; });
      case OpKind::Pow: return f([](float x, float y) { return std::pow(x, y); });
      case OpKind::Mod: return f(floorModF32);
      case OpKind::Maximum: return f(maxF32);
      case OpKind::Minimum: return f(minF32);
      default: break;
    }
  } else if (a.dtype() == DType::I32) {
    auto f = [&](auto fn) { return broadcastBinary<int32_t, int32_t>(a, b, rt, fn); };
    switch (k) {
      case OpKind::Add: return f(wrapAdd);
      case OpKind::Sub: return f(wrapSub);
      case OpKind::Mul: return f(wrapMul);
      case OpKind::Pow: return f(powI32);
      case OpKind::Mod: return f(floorModI32);
      case OpKind::FloorDiv: return f(floorDivI32);
      case OpKind::Maximum: return f([](int32_t x, int32_t y) { return std::max(x, y); });
      case OpKind::Minimum: return f([](int32_t x, int32_t y) { return std::min(x, y); });
      default: break;
    }
  }
  GSL_ASSERT(false, std::string(ir::opName(k)) + " is not defined on " + ir::dtypeName(a.dtype()));
  return {};
}

Tensor where(const Tensor& c, const Tensor& a, const Tensor& b, const TensorType& rt) {
  Tensor out(rt);
  const int32_t *pc = c.i32(), *pa = words(a), *pb = words(b);
  int32_t* pr = words(out);
  forEachIndex(rt.shape,
               {broadcastStrides(c.shape(), rt.shape), broadcastStrides(a.shape(), rt.shape),
                broadcastStrides(b.shape(), rt.shape)},
               [&](int64_t lin, const int64_t* off) { pr[lin] = pc[off[0]] ? pa[off[1]] : pb[off[2]]; });
  return out;
}

// ================================================================ contractions

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// out[b] = a[b] (m x k) * b[b] (k x n) for every batch index b of
// `batch`; the operands' batch dims broadcast against `batch`.
void batchedMatMul(const float* a, const Shape& aBatch, const float* b, const Shape& bBatch,
                   float* out, const Shape& batch, int64_t m, int64_t k, int64_t n) {
  Strides sa = broadcastStrides(aBatch, batch), sb = broadcastStrides(bBatch, batch);
  for (auto& s : sa) s *= m * k;
  for (auto& s : sb) s *= k * n;
  forEachIndex(batch, {sa, sb}, [&](int64_t lin, const int64_t* off) {
    Eigen::Map<const RowMat> A(a + off[0], m, k);
    Eigen::Map<const RowMat> B(b + off[1], k, n);
    Eigen::Map<RowMat> C(out + lin * m * n, m, n);
    if (k == 0) C.setZero();
    else C.noalias() = A * B;
  });
}

// NumPy matmul: a 1-D left operand is a row vector, a 1-D right operand a
// column vector, and the promoted dim is removed from the result.
Tensor matmul(const Tensor& a, const Tensor& b, const TensorType& rt) {
  Shape sa = a.shape(), sb = b.shape();
  if (sa.size() == 1) sa.insert(sa.begin(), 1);
  if (sb.size() == 1) sb.push_back(1);
  int64_t m = sa[sa.size() - 2], k = sa.back(), n = sb.back();
  GSL_ASSERT(sb[sb.size() - 2] == k, "matmul: contracting dims differ");
  Shape aBatch(sa.begin(), sa.end() - 2), bBatch(sb.begin(), sb.end() - 2), batch;
  GSL_ASSERT(ir::broadcastShapes(aBatch, bBatch, batch), "matmul: batch dims do not broadcast");
  Tensor out(rt);
  GSL_ASSERT(out.size() == numElements(batch) * m * n, "matmul: result type mismatch");
  batchedMatMul(a.f32(), aBatch, b.f32(), bBatch, out.f32(), batch, m, k, n);
  return out;
}

// Generic einsum over the label space: iterates over every combination of
// output labels (outer) and summed labels (inner), multiplying the
// operands' elements. A label repeated within an operand addresses its
// diagonal (its strides add up).
Tensor einsumGeneric(const ir::EinsumSpec& es, const std::vector<Tensor>& in, const TensorType& rt) {
  std::map<char, int64_t> size;
  for (size_t i = 0; i < in.size(); ++i)
    for (size_t d = 0; d < es.inputs[i].size(); ++d) size[es.inputs[i][d]] = in[i].shape()[d];
  std::string loop = es.output;  // output labels first, then the summed ones
  for (auto& [c, n] : size)
    if (es.output.find(c) == std::string::npos) loop += c;
  Shape loopShape;
  for (char c : loop) loopShape.push_back(size[c]);
  int64_t summed = 1;
  for (size_t j = es.output.size(); j < loop.size(); ++j) summed *= loopShape[j];

  std::vector<Strides> strides;
  std::vector<const float*> ptr;
  for (size_t i = 0; i < in.size(); ++i) {
    Strides own = rowMajorStrides(in[i].shape()), st(loop.size(), 0);
    for (size_t d = 0; d < es.inputs[i].size(); ++d) st[loop.find(es.inputs[i][d])] += own[d];
    strides.push_back(st);
    ptr.push_back(in[i].f32());
  }
  Tensor out(rt);
  float* r = out.f32();
  if (summed == 0) return out;  // an empty sum is 0
  forEachIndex(loopShape, strides, [&](int64_t lin, const int64_t* off) {
    float p = 1.0f;
    for (size_t i = 0; i < ptr.size(); ++i) p *= ptr[i][off[i]];
    r[lin / summed] += p;
  });
  return out;
}

bool hasRepeatedLabel(const std::string& s) {
  for (size_t i = 0; i < s.size(); ++i)
    if (s.find(s[i], i + 1) != std::string::npos) return true;
  return false;
}

// Two-operand einsum as a batched matrix product: labels in A, B and the
// output are batch dims, in A and the output M dims, in B and the output N
// dims, in A and B only the contracted K dims. Operands are permuted to
// [batch, M, K] and [batch, K, N], multiplied with Eigen, and the
// [batch, M, N] result is permuted to the output order. Returns false (and
// leaves `out` alone) when the spec does not have that form (a label
// repeated in an operand, or summed over in only one operand).
bool einsumAsMatMul(const ir::EinsumSpec& es, const Tensor& a, const Tensor& b, const TensorType& rt,
                    Tensor& out) {
  const std::string &la = es.inputs[0], &lb = es.inputs[1], &lo = es.output;
  if (hasRepeatedLabel(la) || hasRepeatedLabel(lb)) return false;
  auto in = [](const std::string& s, char c) { return s.find(c) != std::string::npos; };
  std::string batch, ms, ns, ks;
  for (char c : lo) {
    if (in(la, c) && in(lb, c)) batch += c;
    else if (in(la, c)) ms += c;
    else ns += c;
  }
  for (char c : la) {
    if (in(lo, c)) continue;
    if (!in(lb, c)) return false;
    ks += c;
  }
  for (char c : lb)
    if (!in(lo, c) && !in(la, c)) return false;

  auto dimSize = [&](char c) {
    return in(la, c) ? a.shape()[la.find(c)] : b.shape()[lb.find(c)];
  };
  auto prod = [&](const std::string& s) {
    int64_t p = 1;
    for (char c : s) p *= dimSize(c);
    return p;
  };
  auto perm = [](const std::string& from, const std::string& to) {
    std::vector<int64_t> p;
    for (char c : to) p.push_back((int64_t)from.find(c));
    return p;
  };
  Tensor pa = permute(a, perm(la, batch + ms + ks));
  Tensor pb = permute(b, perm(lb, batch + ks + ns));
  int64_t nb = prod(batch), m = prod(ms), k = prod(ks), n = prod(ns);
  std::string cl = batch + ms + ns;
  Shape cShape;
  for (char c : cl) cShape.push_back(dimSize(c));
  Tensor c(TensorType{DType::F32, cShape});
  batchedMatMul(pa.f32(), {nb}, pb.f32(), {nb}, c.f32(), {nb}, m, k, n);
  out = retype(permute(c, perm(cl, lo)), rt);
  return true;
}

Tensor einsum(const Op& op, const std::vector<Tensor>& in, const TensorType& rt) {
  const ir::EinsumSpec& es = op.attrs.getEinsum("spec");
  if (in.size() == 2) {
    Tensor out;
    if (einsumAsMatMul(es, in[0], in[1], rt, out)) return out;
  }
  return einsumGeneric(es, in, rt);
}

// ================================================================ reductions

Tensor reduce(OpKind k, const Tensor& x, const std::vector<int64_t>& axes, const TensorType& rt) {
  Tensor out(rt);
  if (x.dtype() == DType::F32) {
    const float* a = x.f32();
    std::vector<double> acc(out.size(), 0.0);
    if (k == OpKind::Max) std::fill(acc.begin(), acc.end(), -INFINITY);
    if (k == OpKind::Min) std::fill(acc.begin(), acc.end(), INFINITY);
    int64_t groups = forEachReduced(x.shape(), axes, [&](int64_t i, int64_t g) {
      double v = a[i];
      double& s = acc[g];
      switch (k) {
        case OpKind::Sum: case OpKind::Mean: s += v; break;
        case OpKind::Max: if (v > s || std::isnan(v)) s = v; break;  // NaN sticks
        case OpKind::Min: if (v < s || std::isnan(v)) s = v; break;
        default: GSL_ASSERT(false, "not a reduction");
      }
    });
    GSL_ASSERT(groups == out.size(), "reduction: result type mismatch");
    double count = groups ? (double)x.size() / (double)groups : 0.0;
    float* r = out.f32();
    for (int64_t g = 0; g < groups; ++g) r[g] = (float)(k == OpKind::Mean ? acc[g] / count : acc[g]);
  } else {
    const int32_t* a = x.i32();
    int32_t* r = out.i32();
    if (k == OpKind::Max) std::fill(r, r + out.size(), std::numeric_limits<int32_t>::min());
    if (k == OpKind::Min) std::fill(r, r + out.size(), std::numeric_limits<int32_t>::max());
    int64_t groups = forEachReduced(x.shape(), axes, [&](int64_t i, int64_t g) {
      switch (k) {
        case OpKind::Sum: r[g] = wrapAdd(r[g], a[i]); break;
        case OpKind::Max: r[g] = std::max(r[g], a[i]); break;
        case OpKind::Min: r[g] = std::min(r[g], a[i]); break;
        default: GSL_ASSERT(false, std::string(ir::opName(k)) + " is not defined on i32");
      }
    });
    GSL_ASSERT(groups == out.size(), "reduction: result type mismatch");
  }
  return out;
}

// Index of the first maximum along `axis` (the first NaN, if any, as NumPy).
Tensor argmax(const Tensor& x, int64_t axis, const TensorType& rt) {
  Tensor out(rt);
  int32_t* r = out.i32();
  const bool f = x.dtype() == DType::F32;
  forEachLane(x.shape(), axis, [&](int64_t base, int64_t stride, int64_t n, int64_t lane) {
    double best = 0;
    int32_t bi = 0;
    for (int64_t j = 0; j < n; ++j) {
      double v = f ? (double)x.f32()[base + j * stride] : (double)x.i32()[base + j * stride];
      if (j == 0 || v > best || (std::isnan(v) && !std::isnan(best))) {
        best = v;
        bi = (int32_t)j;
      }
      if (std::isnan(best)) break;
    }
    r[lane] = bi;
  });
  return out;
}

// ================================================================ normalisations

Tensor softmax(const Tensor& x, int64_t axis, bool log, const TensorType& rt) {
  Tensor out(rt);
  const float* a = x.f32();
  float* r = out.f32();
  forEachLane(x.shape(), axis, [&](int64_t base, int64_t stride, int64_t n, int64_t) {
    float mx = -INFINITY;
    for (int64_t j = 0; j < n; ++j) mx = std::max(mx, a[base + j * stride]);
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) sum += std::exp((double)a[base + j * stride] - mx);
    for (int64_t j = 0; j < n; ++j) {
      double z = (double)a[base + j * stride] - mx;
      r[base + j * stride] = (float)(log ? z - std::log(sum) : std::exp(z) / sum);
    }
  });
  return out;
}

Tensor layerNorm(const Tensor& x, const std::vector<int64_t>& axes, double eps, const TensorType& rt) {
  Tensor out(rt);
  const float* a = x.f32();
  float* r = out.f32();
  Shape kept = x.shape();
  for (int64_t ax : axes) kept[ax] = 1;
  int64_t groups = numElements(kept);
  double count = groups ? (double)x.size() / (double)groups : 1.0;
  std::vector<double> mean(groups, 0.0), var(groups, 0.0);
  forEachReduced(x.shape(), axes, [&](int64_t i, int64_t g) { mean[g] += a[i]; });
  for (auto& m : mean) m /= count;
  forEachReduced(x.shape(), axes, [&](int64_t i, int64_t g) {
    double d = a[i] - mean[g];
    var[g] += d * d;
  });
  for (auto& v : var) v /= count;
  forEachReduced(x.shape(), axes, [&](int64_t i, int64_t g) {
    r[i] = (float)((a[i] - mean[g]) / std::sqrt(var[g] + eps));
  });
  return out;
}

Tensor cumsum(const Tensor& x, int64_t axis, bool exclusive, const TensorType& rt) {
  Tensor out(rt);
  const bool f = x.dtype() == DType::F32;
  forEachLane(x.shape(), axis, [&](int64_t base, int64_t stride, int64_t n, int64_t) {
    double sf = 0;
    int32_t si = 0;
    for (int64_t j = 0; j < n; ++j) {
      int64_t p = base + j * stride;
      if (f) {
        double v = x.f32()[p];
        if (!exclusive) sf += v;
        out.f32()[p] = (float)sf;
        if (exclusive) sf += v;
      } else {
        int32_t v = x.i32()[p];
        if (!exclusive) si = wrapAdd(si, v);
        out.i32()[p] = si;
        if (exclusive) si = wrapAdd(si, v);
      }
    }
  });
  return out;
}

// ================================================================ data movement

Tensor concat(const std::vector<Tensor>& in, int64_t axis, const TensorType& rt) {
  Tensor out(rt);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= rt.shape[d];
  for (size_t d = axis + 1; d < rt.shape.size(); ++d) inner *= rt.shape[d];
  const int64_t outRow = rt.shape[axis] * inner;
  int32_t* dst = words(out);
  int64_t at = 0;  // offset of this operand's block within an output row
  for (const Tensor& t : in) {
    const int64_t row = t.shape()[axis] * inner;
    const int32_t* src = words(t);
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + o * outRow + at, src + o * row, (size_t)row * 4);
    at += row;
  }
  GSL_ASSERT(at == outRow, "concat: result type mismatch");
  return out;
}

Tensor slice(const Tensor& x, int64_t axis, int64_t start, const TensorType& rt) {
  Tensor out(rt);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[d];
  for (size_t d = axis + 1; d < x.shape().size(); ++d) inner *= x.shape()[d];
  const int64_t inRow = x.shape()[axis] * inner, outRow = rt.shape[axis] * inner;
  const int32_t* src = words(x);
  int32_t* dst = words(out);
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(dst + o * outRow, src + o * inRow + start * inner, (size_t)outRow * 4);
  return out;
}

Tensor broadcastTo(const Tensor& x, const TensorType& rt) {
  Tensor out(rt);
  const int32_t* src = words(x);
  int32_t* dst = words(out);
  forEachIndex(rt.shape, {broadcastStrides(x.shape(), rt.shape)},
               [&](int64_t lin, const int64_t* off) { dst[lin] = src[off[0]]; });
  return out;
}

Tensor oneHot(const Tensor& idx, int64_t n, const TensorType& rt) {
  Tensor out(rt);  // zero-filled
  const int32_t* ix = idx.i32();
  float* r = out.f32();
  for (int64_t i = 0; i < idx.size(); ++i)
    if (ix[i] >= 0 && ix[i] < n) r[i * n + ix[i]] = 1.0f;  // out of range: all-zero row
  return out;
}

// An out-of-range index is a user error: RuntimeError (a std::runtime_error)
// at the op's source location, which the host reports as a diagnostic.
Tensor take(const Tensor& table, const Tensor& idx, const TensorType& rt, SourceLoc loc) {
  Tensor out(rt);
  const int64_t rows = table.shape()[0];
  const int64_t row = rows ? table.size() / rows : 0;
  const int32_t* ix = idx.i32();
  const int32_t* src = words(table);
  int32_t* dst = words(out);
  for (int64_t i = 0; i < idx.size(); ++i) {
    if (ix[i] < 0 || ix[i] >= rows)
      throw RuntimeError(loc, "take: index " + std::to_string(ix[i]) +
                               " is out of range for a table of " + std::to_string(rows) + " rows");
    std::memcpy(dst + i * row, src + ix[i] * row, (size_t)row * 4);
  }
  return out;
}

// ================================================================ sources

Tensor constant(const Op& op, const TensorType& rt) {
  const ir::Attr* v = op.attrs.get("value");
  GSL_ASSERT(v, "constant without a value");
  double d = 0;
  if (auto* b = std::get_if<bool>(v)) d = *b ? 1 : 0;
  else d = op.attrs.getFloat("value");  // double or int64
  Tensor out(rt);
  if (rt.dtype == DType::F32) {
    std::fill(out.f32(), out.f32() + out.size(), (float)d);
  } else {
    // i32: truncation toward zero, saturating (the value is a double, so
    // every int32 is exact); bool: nonzero is true.
    int32_t w = rt.dtype == DType::Bool ? (d != 0 ? 1 : 0)
                : std::isnan(d)         ? 0
                : d >= 2147483647.0     ? std::numeric_limits<int32_t>::max()
                : d <= -2147483648.0    ? std::numeric_limits<int32_t>::min()
                                        : (int32_t)d;
    std::fill(out.i32(), out.i32() + out.size(), w);
  }
  return out;
}

Tensor randomUniform(const Tensor& seed, const KernelContext& ctx, const TensorType& rt) {
  Tensor out(rt);
  const uint64_t stream = randomOpStream(seed.i32()[0]);
  float* r = out.f32();
  for (int64_t i = 0; i < out.size(); ++i) r[i] = uniformAt(ctx.seed, stream, (uint64_t)i);
  return out;
}

// iota (arange): each element its index along `axis`.
Tensor iota(const TensorType& rt, int64_t axis) {
  Tensor out(rt);
  int64_t n = rt.shape[axis], inner = 1;
  for (int d = (int)axis + 1; d < rt.rank(); ++d) inner *= rt.shape[d];
  int32_t* r = out.i32();
  for (int64_t i = 0; i < out.size(); ++i) r[i] = (int32_t)(i / inner % n);
  return out;
}

// dropout with a key, or the identity (kernel in dropoutInto).
Tensor dropout(const ir::Op& op, const std::vector<Tensor>& in, const KernelContext& ctx, const TensorType& rt) {
  Tensor out = retype(in[0], rt);
  if (in.size() == 2) dropoutInto(op, in[0].f32(), in[1].i32(), out.f32(), ctx.seed);
  return out;
}

}  // namespace

void dropoutInto(const ir::Op& op, const float* x, const int32_t* key, float* out, uint64_t seed) {
  const TensorType& rt = op.result->type;
  const int64_t n = rt.numElements();
  const double p = op.attrs.getFloat("p");
  if (p == 0) {  // the identity, as PyTorch's p = 0
    if (out != x) std::copy(x, x + n, out);
    return;
  }
  const int r = rt.rank();
  const Shape global = op.attrs.has("shape") ? op.attrs.getInts("shape") : rt.shape;
  const uint64_t stream = dropoutStream(op.attrs.has("site") ? op.attrs.getInt("site") : 0, key[0]);
  const float scale = (float)(1.0 / (1.0 - p));
  std::vector<int64_t> idx(r, 0);  // the local multi-index, C order
  for (int64_t i = 0; i < n; ++i) {
    uint64_t flat = 0;  // the global flat index (C order over `global`)
    for (int d = 0; d < r; ++d) flat = flat * (uint64_t)global[d] + (uint64_t)((int64_t)key[1 + d] + idx[d]);
    out[i] = (double)uniformAt(seed, stream, flat) >= p ? x[i] * scale : 0.0f;
    for (int d = r - 1; d >= 0 && ++idx[d] == rt.shape[d]; --d) idx[d] = 0;
  }
}

// ================================================================ dispatch

static Tensor evalAs(const ir::Op& op, const std::vector<Tensor>& in, const KernelContext& ctx,
                     const TensorType& rt);

Tensor evalOp(const ir::Op& op, const std::vector<Tensor>& in, const KernelContext& ctx) {
  GSL_ASSERT(op.result, "evalOp: op without a result");
  GSL_ASSERT(in.size() == op.operands.size(),
             std::string("evalOp: ") + op.info().mnemonic + " got the wrong number of inputs");
  if (op.info().cls == ir::OpClass::Collective) return evalCollective(op, in[0], ctx);
  const TensorType& rt = op.result->type;
  bool bf16 = rt.dtype == DType::BF16;
  for (const Tensor& t : in) bf16 |= t.dtype() == DType::BF16;
  if (!bf16 || op.kind == OpKind::Cast) return evalAs(op, in, ctx, rt);
  // bf16: the f32 kernel on widened operands, the result rounded once.
  std::vector<Tensor> wide;
  wide.reserve(in.size());
  for (const Tensor& t : in) wide.push_back(t.dtype() == DType::BF16 ? widenToF32(t) : t);
  TensorType wt = rt;
  if (bf16 && rt.dtype == DType::BF16) wt.dtype = DType::F32;
  Tensor r = evalAs(op, wide, ctx, wt);
  return rt.dtype == DType::BF16 ? narrowToBF16(r) : r;
}

static Tensor evalAs(const ir::Op& op, const std::vector<Tensor>& in, const KernelContext& ctx,
                     const TensorType& rt) {
  const ir::AttrMap& at = op.attrs;
  auto need = [&](size_t n) {
    GSL_ASSERT(in.size() == n, std::string("evalOp: ") + op.info().mnemonic + " expects " +
                                   std::to_string(n) + " operands");
  };
  switch (op.kind) {
    case OpKind::Param: {
      GSL_ASSERT(ctx.param, "evalOp: param op without a param callback");
      const Tensor& p = ctx.param(at.getString("name"));
      GSL_ASSERT(p.type() == rt, "param '" + at.getString("name") + "' has type " + p.type().str() +
                                     ", expected " + rt.str());
      return retype(p, rt);  // a fresh tensor: later updates of the param do not alias it
    }
    case OpKind::Constant: return constant(op, rt);
    case OpKind::RandomUniform: need(1); return randomUniform(in[0], ctx, rt);
    case OpKind::Iota: need(0); return iota(rt, at.getInt("axis"));
    case OpKind::Dropout: return dropout(op, in, ctx, rt);

    case OpKind::Copy: case OpKind::Neg: case OpKind::Exp: case OpKind::Log:
    case OpKind::Sqrt: case OpKind::Rsqrt: case OpKind::Tanh: case OpKind::Relu:
    case OpKind::Gelu: case OpKind::Erf: case OpKind::GeluExact: case OpKind::Sigmoid: case OpKind::Abs: case OpKind::Not:
    case OpKind::Cast:
      need(1);
      return unary(op.kind, in[0], rt);

    case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Div:
    case OpKind::Pow: case OpKind::Mod: case OpKind::FloorDiv: case OpKind::Maximum: case OpKind::Minimum:
    case OpKind::Eq: case OpKind::Ne: case OpKind::Lt: case OpKind::Le:
    case OpKind::Gt: case OpKind::Ge: case OpKind::And: case OpKind::Or:
      need(2);
      return binary(op.kind, in[0], in[1], rt);
    case OpKind::Where: need(3); return where(in[0], in[1], in[2], rt);

    case OpKind::MatMul: need(2); return matmul(in[0], in[1], rt);
    case OpKind::Einsum: return einsum(op, in, rt);

    case OpKind::Sum: case OpKind::Mean: case OpKind::Max: case OpKind::Min:
      need(1);
      return reduce(op.kind, in[0], at.getInts("axis"), rt);
    case OpKind::ArgMax: need(1); return argmax(in[0], at.getInt("axis"), rt);

    case OpKind::Softmax: need(1); return softmax(in[0], at.getInt("axis"), false, rt);
    case OpKind::LogSoftmax: need(1); return softmax(in[0], at.getInt("axis"), true, rt);
    case OpKind::LayerNorm: need(1); return layerNorm(in[0], at.getInts("axis"), at.getFloat("eps"), rt);
    case OpKind::CumSum:
      need(1);
      return cumsum(in[0], at.getInt("axis"), at.has("exclusive") && at.getBool("exclusive"), rt);

    case OpKind::Reshape: need(1); return retype(in[0], rt);
    case OpKind::Transpose: need(1); return permute(in[0], at.getInts("perm"));
    case OpKind::Concat: return concat(in, at.getInt("axis"), rt);
    case OpKind::Slice: need(1); return slice(in[0], at.getInt("axis"), at.getInt("start"), rt);
    case OpKind::Broadcast: need(1); return broadcastTo(in[0], rt);
    case OpKind::OneHot: need(1); return oneHot(in[0], at.getInt("n"), rt);
    case OpKind::Take: need(2); return take(in[0], in[1], rt, op.loc);
    case OpKind::DynamicIndex: need(2); return dynamicIndex(in[0], in[1], rt);
    case OpKind::DynamicUpdate: need(3); return dynamicUpdate(in[0], in[1], in[2]);
    case OpKind::Loop: break;  // several results: run by interpret() (backend/Interpreter.h)
  }
  GSL_ASSERT(false, std::string("evalOp: unsupported op ") + op.info().mnemonic);
  return {};
}

float geluF32(float x) { return gelu(x); }
float sigmoidF32(float x) { return sigmoid(x); }

}  // namespace gsl::backend
