// bf16 ops the JIT generates besides the common elementwise ops and the
// plain reductions (jit_bf16_test.cpp): log, sqrt, rsqrt, erf, exact gelu,
// sigmoid, pow and the comparisons, bit for bit as the interpreter (log and
// pow call logf and powf, sigmoid the reference kernel's function, the
// others are exact in f32 already); softmax, log_softmax and layer_norm
// as the f32 path on the widened values, rounded once: their bits are the
// f32 JIT result rounded to bf16, and within one bf16 step of the
// interpreter's. Every case runs at each vector width the host has (16:
// AVX-512, with or without AVX512_BF16; 8: AVX2; 4: SSE), none of them on
// the reference kernel.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "backend/jit/BufferPlan.h"
#include "jit_test_util.h"
#include "support/BF16.h"

using namespace jittest;

namespace {

// bf16 values with the edges in: zeros of both signs, NaN, infinities,
// negatives (log, sqrt and pow of them are NaN), tiny and large values.
Tensor edgy(const Shape& s, uint32_t seed) {
  Tensor f = randF32(s, -4, 4, seed);
  const float special[] = {0.0f, -0.0f, NAN, INFINITY, -INFINITY, 1e-39f, 3.0e38f, -2.5f, 1.0f, 0.5f};
  for (int64_t i = 0; i < f.size(); i += 5) f.f32()[i] = special[(i / 5) % 10];
  return toBF16(f);
}

std::vector<JitOptions> widths() {
  std::vector<JitOptions> all;
  for (int w : {16, 8, 4}) {
    JitOptions o = testOptions();
    o.vectorWidth = w;
    o.fallbackOps.clear();
    all.push_back(o);
  }
  return all;
}

// No op of `f` runs the reference kernel under `o`.
void checkGenerated(const ir::Function& f, const JitOptions& o) {
  const backend::jit::BufferPlan p = backend::jit::planBuffers(f, o);
  for (size_t i = 0; i < f.ops.size(); ++i) {
    INFO("op " << i << " (" << std::string(ir::opName(f.ops[i]->kind)) << ")");
    CHECK_FALSE(p.fallback[i]);
  }
}

int64_t differingBits(const Tensor& a, const Tensor& b) {
  REQUIRE(a.type() == b.type());
  const size_t w = a.dtype() == DType::BF16 ? 2 : 4;
  const char* pa = a.dtype() == DType::BF16 ? (const char*)a.bf16() : (const char*)a.i32();
  const char* pb = b.dtype() == DType::BF16 ? (const char*)b.bf16() : (const char*)b.i32();
  int64_t bad = 0;
  for (int64_t e = 0; e < a.size(); ++e) {
    if (std::memcmp(pa + w * e, pb + w * e, w) == 0) continue;
    if (a.dtype() == DType::BF16 && std::isnan(bf16ToF32(a.bf16()[e])) && std::isnan(bf16ToF32(b.bf16()[e])))
      continue;
    ++bad;
  }
  return bad;
}

}  // namespace

TEST_CASE("jit bf16: log, sqrt, rsqrt, erf, exact gelu, sigmoid, pow and comparisons are generated, the interpreter's bits") {
  Builder b;
  const Shape s = {29, 67};  // odd: vector loops with remainders
  Value* x = b.arg(edgy(s, 41));
  Value* y = b.arg(edgy(s, 42));
  std::vector<Value*> r;
  for (OpKind k : {OpKind::Log, OpKind::Sqrt, OpKind::Rsqrt, OpKind::Erf, OpKind::GeluExact, OpKind::Sigmoid})
    r.push_back(b.op(k, {x}));
  r.push_back(b.op(OpKind::Pow, {x, y}));
  for (OpKind k : {OpKind::Eq, OpKind::Ne, OpKind::Lt, OpKind::Le, OpKind::Gt, OpKind::Ge}) r.push_back(b.op(k, {x, y}));
  // A fused chain of the new ops, each rounding to bf16.
  r.push_back(b.op(OpKind::Sigmoid, {b.op(OpKind::Log, {b.op(OpKind::Sqrt, {b.op(OpKind::Mul, {x, x})})})}));
  b.f.results = r;
  const std::vector<Tensor> ref = interpret(b.f, b.args, {});
  for (const JitOptions& o : widths()) {
    INFO("vector width " << o.vectorWidth);
    checkGenerated(b.f, o);
    const std::vector<Tensor> got = makeJitEngine({}, o)->call(b.f, b.args);
    REQUIRE(got.size() == ref.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      INFO("result " << i << " (" << std::string(ir::opName(r[i]->def->kind)) << ")");
      CHECK(differingBits(got[i], ref[i]) == 0);
    }
  }
}

TEST_CASE("jit bf16: softmax, log_softmax and layer_norm are the f32 path's values rounded once") {
  // The same ops on the widened values (f32), and on bf16.
  Builder hb, fb;
  const Tensor xs = edgy({6, 7, 37}, 51);
  const Tensor ys = toBF16(randF32({6, 7, 37}, -30, 30, 52));  // finite, wide: exp underflows in places
  Value* hx = hb.arg(xs);
  Value* hy = hb.arg(ys);
  Value* fx = fb.arg(widenToF32(xs));
  Value* fy = fb.arg(widenToF32(ys));
  auto build = [](Builder& b, Value* x, Value* y) {
    std::vector<Value*> r;
    for (int64_t axis : {-1, 1, 0}) {
      r.push_back(b.op(OpKind::Softmax, {y}, attrs({{"axis", axis}})));
      r.push_back(b.op(OpKind::LogSoftmax, {y}, attrs({{"axis", axis}})));
    }
    r.push_back(b.op(OpKind::Softmax, {x}, attrs({{"axis", int64_t(-1)}})));  // NaN and infinities in lanes
    for (Ints axes : {Ints{2}, Ints{1, 2}, Ints{0}})
      r.push_back(b.op(OpKind::LayerNorm, {y}, attrs({{"axis", axes}, {"eps", 1e-5}})));
    return r;
  };
  hb.f.results = build(hb, hx, hy);
  fb.f.results = build(fb, fx, fy);
  const std::vector<Tensor> ref = interpret(hb.f, hb.args, {});
  for (const JitOptions& o : widths()) {
    INFO("vector width " << o.vectorWidth);
    checkGenerated(hb.f, o);
    const std::vector<Tensor> got = makeJitEngine({}, o)->call(hb.f, hb.args);
    const std::vector<Tensor> wide = makeJitEngine({}, o)->call(fb.f, fb.args);
    REQUIRE(got.size() == ref.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      INFO("result " << i << " (" << std::string(ir::opName(hb.f.results[i]->def->kind)) << ")");
      CHECK(differingBits(got[i], toBF16(wide[i])) == 0);
      // Against the interpreter: one bf16 step at most (the f32 path's exp
      // is within an f32 ulp or so of the reference's).
      int64_t far = 0;
      for (int64_t e = 0; e < ref[i].size(); ++e) {
        const float a = bf16ToF32(got[i].bf16()[e]), c = bf16ToF32(ref[i].bf16()[e]);
        if (a == c || (std::isnan(a) && std::isnan(c))) continue;
        far += !(std::fabs(a - c) <= std::ldexp(std::max(std::fabs(a), std::fabs(c)), -7) + 1e-30f);
      }
      CHECK(far == 0);
    }
  }
}
