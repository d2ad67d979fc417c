// Gradients of every differentiable op in bf16, checked against the same
// op's f32 gradient (itself checked against finite differences in
// backend_grad_test.cpp).
//
// Each case: inputs x (f32 arguments, pseudo-random), the op applied to
// cast(x, bf16) and its result cast back to f32, loss = sum(out * w).
// Autodiff differentiates through both casts (the gradient of a cast is the
// cast back), so the bf16 case runs the op's gradient rule on bf16
// adjoints and yields f32 gradients. The reference is the same graph
// without the casts, in f32.
//
// Why not finite differences directly: the bf16 loss is a step function of
// x at bf16's resolution (8 significant bits: neighbouring values are
// 2^-7 = 0.8% apart), so a difference quotient over a small h measures the
// rounding, not the slope.
//
// Tolerance: |g_bf16 - g_f32| <= 0.05 * max|g_f32| + 1e-3 (norm-wise, per
// input). bf16's unit roundoff is u = 2^-8 = 0.39% (round to nearest with
// 8 significant bits). The bf16 gradient differs from the f32 one by the
// rounding of the inputs (x, w's adjoint: 1u each), of the forward result
// used in the rule (exp, tanh, sigmoid, softmax reuse it: 1u), and of each
// bf16 op the rule builds (typically 2..4, each 1u, accumulations done in
// f32 and rounded once), and a derivative amplifies a relative input error
// by at most its condition number (<= 3 for the functions and input ranges
// here: log, sqrt, rsqrt and pow on inputs >= 0.5, exp on inputs <= 1.5).
// That bounds the error at about 3 * 6u = 18u = 7% for the longest rules
// in the worst case, and 4u..8u (1.5%..3%) typically; measured on these
// cases it stays below 1.3% of max|g| (rsqrt). A wrong rule (a term off by 10%, a
// transposed or misplaced gradient, a dropped cast) fails it by far,
// because w gives every output element a different weight.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "ir/Module.h"
#include "ir/Verifier.h"
#include "jit_test_util.h"  // the shared builder (only its interpreter side is used here)
#include "passes/Autodiff.h"

using namespace jittest;

namespace {

Tensor rnd(const Shape& s, double lo, double hi, uint64_t seed) {
  uint64_t st = seed * 2654435761u + 12345;
  Tensor t(TensorType{DType::F32, s});
  for (int64_t i = 0; i < t.size(); ++i) {
    st = st * 6364136223846793005ULL + 1442695040888963407ULL;
    t.f32()[i] = (float)(lo + (hi - lo) * (double)((st >> 40) & 0xFFFFFF) / (double)(1 << 24));
  }
  return t;
}

// -2.4 + 0.2 k for k = 0..23 in a scrambled order: no ties after rounding
// to bf16 (its spacing below 4 is at most 2^-6), so max and min pick the
// same element in both dtypes.
Tensor distinct(const Shape& s) {
  Tensor t(TensorType{DType::F32, s});
  for (int64_t i = 0; i < t.size(); ++i) t.f32()[i] = (float)(-2.4 + 0.2 * (double)((i * 7) % t.size()));
  return t;
}

// The shared builder, with the module autodiff appends to.
struct B : Builder {
  ir::Module m;
  Value* cast(Value* v, DType dt) { return op(OpKind::Cast, {v}, attrs({{"dtype", dt}})); }
};

using Build = std::function<Value*(B&, const std::vector<Value*>&)>;

// The gradients of loss = sum(build(x) * w) with respect to the float
// inputs, with the op run in `dt` (inputs cast to it, the result cast back).
std::vector<Tensor> grads(const std::vector<Tensor>& ins, const Build& build, DType dt) {
  B b;
  std::vector<Value*> vals;
  for (const Tensor& t : ins) {
    Value* a = b.arg(t);
    vals.push_back(t.dtype() == DType::F32 && dt != DType::F32 ? b.cast(a, dt) : a);
  }
  Value* out = build(b, vals);
  REQUIRE(out->type.dtype == dt);
  if (dt != DType::F32) out = b.cast(out, DType::F32);
  Tensor w = rnd(out->type.shape, -1.0, 1.0, 99);
  Value* wv = b.arg(w);
  Value* loss = b.op(OpKind::Sum, {b.op(OpKind::Mul, {out, wv})});
  b.f.results = {loss};
  passes::Gradients g = passes::appendGradient(b.m, b.f, loss, {}, true);
  std::vector<Value*> results;
  for (size_t i = 0; i < ins.size(); ++i)
    if (ins[i].dtype() == DType::F32) {
      REQUIRE(g.args[i]);
      CHECK(g.args[i]->type == ins[i].type());  // f32 gradients of the f32 inputs
      results.push_back(g.args[i]);
    }
  b.f.results = results;
  std::string err = ir::verifyFunction(b.m, b.f);
  REQUIRE_MESSAGE(err.empty(), err);
  return interpret(b.f, b.args, {});
}

void check(const std::string& what, const std::vector<Tensor>& ins, const Build& build) {
  INFO(what);
  std::vector<Tensor> ref = grads(ins, build, DType::F32);
  std::vector<Tensor> got = grads(ins, build, DType::BF16);
  REQUIRE(ref.size() == got.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    double scale = 0, worst = 0;
    for (int64_t e = 0; e < ref[i].size(); ++e) scale = std::max(scale, std::fabs(ref[i].at(e)));
    for (int64_t e = 0; e < ref[i].size(); ++e) worst = std::max(worst, std::fabs(got[i].at(e) - ref[i].at(e)));
    INFO("input " << i << ": max |g_bf16 - g_f32| = " << worst << ", max |g_f32| = " << scale);
    CHECK(scale > 0);
    CHECK(worst <= 0.05 * scale + 1e-3);
  }
}

Build unary(OpKind k) {
  return [k](B& b, const std::vector<Value*>& v) { return b.op(k, {v[0]}); };
}
Build binary(OpKind k) {
  return [k](B& b, const std::vector<Value*>& v) { return b.op(k, {v[0], v[1]}); };
}

}  // namespace

TEST_CASE("bf16 gradients: unary ops") {
  const Shape s = {4, 6};
  check("neg", {rnd(s, -2, 2, 1)}, unary(OpKind::Neg));
  check("copy", {rnd(s, -2, 2, 1)}, unary(OpKind::Copy));
  check("exp", {rnd(s, -2, 1.5, 2)}, unary(OpKind::Exp));
  check("log", {rnd(s, 0.5, 3, 3)}, unary(OpKind::Log));
  check("sqrt", {rnd(s, 0.5, 3, 4)}, unary(OpKind::Sqrt));
  check("rsqrt", {rnd(s, 0.5, 3, 5)}, unary(OpKind::Rsqrt));
  check("tanh", {rnd(s, -2, 2, 6)}, unary(OpKind::Tanh));
  check("gelu", {rnd(s, -2, 2, 7)}, unary(OpKind::Gelu));
  check("erf", {rnd(s, -2, 2, 8)}, unary(OpKind::Erf));
  check("sigmoid", {rnd(s, -3, 3, 9)}, unary(OpKind::Sigmoid));
  check("relu", {rnd(s, 0.2, 2, 10)}, unary(OpKind::Relu));     // away from the kink
  check("abs", {rnd(s, -2, -0.2, 11)}, unary(OpKind::Abs));
}

TEST_CASE("bf16 gradients: binary ops and where") {
  const Shape s = {4, 6};
  check("add (broadcast)", {rnd(s, -2, 2, 1), rnd({6}, -2, 2, 2)}, binary(OpKind::Add));
  check("sub", {rnd(s, -2, 2, 3), rnd(s, -2, 2, 4)}, binary(OpKind::Sub));
  check("mul (broadcast)", {rnd(s, -2, 2, 5), rnd({4, 1}, -2, 2, 6)}, binary(OpKind::Mul));
  check("div", {rnd(s, -2, 2, 7), rnd(s, 0.5, 2, 8)}, binary(OpKind::Div));
  check("pow", {rnd(s, 0.5, 2, 9), rnd(s, -1.5, 1.5, 10)}, binary(OpKind::Pow));
  // b = a +- 0.5, alternating: each operand wins half the elements, no near-ties
  Tensor a = rnd(s, -2, 2, 11), b = a;
  b = Tensor(a.type());
  for (int64_t i = 0; i < a.size(); ++i) b.f32()[i] = a.f32()[i] + (i % 2 ? 0.5f : -0.5f);
  check("maximum", {a, b}, binary(OpKind::Maximum));
  check("minimum", {a, b}, binary(OpKind::Minimum));
  Tensor mask(TensorType{DType::Bool, s});
  for (int64_t i = 0; i < mask.size(); ++i) mask.i32()[i] = (i * 7) % 3 == 0;
  check("where", {rnd(s, -2, 2, 15), rnd(s, -2, 2, 16), mask},
        [](B& b, const std::vector<Value*>& v) { return b.op(OpKind::Where, {v[2], v[0], v[1]}); });
}

TEST_CASE("bf16 gradients: contractions, reductions, normalisations") {
  check("matmul", {rnd({5, 8}, -1, 1, 1), rnd({8, 3}, -1, 1, 2)}, binary(OpKind::MatMul));
  check("batched matmul", {rnd({2, 5, 8}, -1, 1, 3), rnd({8, 3}, -1, 1, 4)}, binary(OpKind::MatMul));
  check("einsum", {rnd({4, 5, 6}, -1, 1, 5), rnd({6, 5, 3}, -1, 1, 6)},
        [](B& b, const std::vector<Value*>& v) {
          return b.op(OpKind::Einsum, {v[0], v[1]}, attrs({{"spec", ir::einsumSpec("bsd,dsh->bh", 2)}}));
        });
  check("sum", {rnd({4, 6}, -2, 2, 7)},
        [](B& b, const std::vector<Value*>& v) { return b.op(OpKind::Sum, {v[0]}, attrs({{"axis", Ints{1}}})); });
  check("mean", {rnd({4, 6}, -2, 2, 8)},
        [](B& b, const std::vector<Value*>& v) { return b.op(OpKind::Mean, {v[0]}, attrs({{"axis", Ints{0}}})); });
  check("max", {distinct({4, 6})},
        [](B& b, const std::vector<Value*>& v) { return b.op(OpKind::Max, {v[0]}, attrs({{"axis", Ints{1}}})); });
  check("min", {distinct({4, 6})},
        [](B& b, const std::vector<Value*>& v) { return b.op(OpKind::Min, {v[0]}, attrs({{"axis", Ints{1}}})); });
  check("softmax", {rnd({4, 6}, -2, 2, 11)}, [](B& b, const std::vector<Value*>& v) {
    return b.op(OpKind::Softmax, {v[0]}, attrs({{"axis", int64_t(-1)}}));
  });
  check("log_softmax", {rnd({4, 6}, -2, 2, 12)}, [](B& b, const std::vector<Value*>& v) {
    return b.op(OpKind::LogSoftmax, {v[0]}, attrs({{"axis", int64_t(-1)}}));
  });
  check("layer_norm", {rnd({4, 6}, -2, 2, 13)}, [](B& b, const std::vector<Value*>& v) {
    return b.op(OpKind::LayerNorm, {v[0]}, attrs({{"axis", Ints{1}}}));
  });
  check("cumsum", {rnd({4, 6}, -2, 2, 14)}, [](B& b, const std::vector<Value*>& v) {
    return b.op(OpKind::CumSum, {v[0]}, attrs({{"axis", int64_t(1)}}));
  });
}

TEST_CASE("bf16 gradients: data movement") {
  check("reshape", {rnd({4, 6}, -2, 2, 1)},
        [](B& b, const std::vector<Value*>& v) { return b.op(OpKind::Reshape, {v[0]}, attrs({{"shape", Ints{3, 8}}})); });
  check("transpose", {rnd({2, 3, 4}, -2, 2, 2)}, [](B& b, const std::vector<Value*>& v) {
    return b.op(OpKind::Transpose, {v[0]}, attrs({{"perm", Ints{2, 0, 1}}}));
  });
  check("concat", {rnd({2, 3}, -2, 2, 3), rnd({2, 5}, -2, 2, 4)}, [](B& b, const std::vector<Value*>& v) {
    return b.op(OpKind::Concat, {v[0], v[1]}, attrs({{"axis", int64_t(1)}}));
  });
  check("slice", {rnd({4, 6}, -2, 2, 5)}, [](B& b, const std::vector<Value*>& v) {
    return b.op(OpKind::Slice, {v[0]}, attrs({{"axis", int64_t(1)}, {"start", int64_t(1)}, {"end", int64_t(4)}}));
  });
  check("broadcast", {rnd({1, 6}, -2, 2, 6)},
        [](B& b, const std::vector<Value*>& v) { return b.op(OpKind::Broadcast, {v[0]}, attrs({{"shape", Ints{4, 6}}})); });
  check("take", {rnd({5, 3}, -2, 2, 7), Tensor::fromI32({4}, {4, 0, 4, 2})},
        [](B& b, const std::vector<Value*>& v) { return b.op(OpKind::Take, {v[0], v[1]}); });
}
