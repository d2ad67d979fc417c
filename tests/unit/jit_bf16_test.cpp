// bf16 in the JIT: the numbers of the two engines agree. The common
// elementwise ops and the plain reductions on bf16 are generated code that
// computes as the reference kernel does (in f32 on widened values, f32
// sums in double, each bf16 result rounded once; exp, tanh and gelu call
// the same f32 functions), so they agree bit for bit; the other ops on
// bf16 run the reference kernel from JIT code (BufferPlan's
// generatedForDType), so they agree bit for bit too. A bf16
// contraction (matmul, einsum of a GEMM's form) is generated: its operands
// widened to f32, the generated f32 GEMM kernel, the result rounded once
// (Contraction.h's Gemm::bf16), or, on a CPU with AVX512_BF16, vdpbf16ps
// (BF16Gemm.h; jit_bf16_gemm_test.cpp tests that kernel directly). Both accumulate in f32 as the
// reference kernel does, but sum in another order than its Eigen product,
// so a result may differ by one bf16 rounding step (2^-8 relative) where
// an f32 sum lies next to a rounding boundary; with integer-valued
// operands every sum is exact and the bits agree. On a CPU without
// AVX512_BF16 the engine narrows bf16Dot = 1 to 0 (as it narrows
// vectorWidth), so there both runs of checkMatMul take the portable path
// and the vdpbf16ps kernel is not executed (some development VMs, AMD
// EPYCs with AVX2 only, were such CPUs; the one of 2026-12-07, an AMD
// EPYC with AVX512_BF16, runs both paths).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <string>

#include "backend/jit/BF16Gemm.h"
#include "backend/jit/BufferPlan.h"
#include "jit_test_util.h"
#include "support/BF16.h"

using namespace jittest;

namespace {

// Elements the same bits (a zero's sign included) or both NaN, or (when
// `ulps`) within one bf16 step of the larger magnitude (2^-7 relative: a
// step is 2^-7 of the value's binade).
void compareBF16(const Tensor& jit, const Tensor& ref, bool ulps) {
  REQUIRE(jit.type() == ref.type());
  int64_t bad = 0;
  for (int64_t i = 0; i < ref.size(); ++i) {
    const float a = bf16ToF32(jit.bf16()[i]), b = bf16ToF32(ref.bf16()[i]);
    const bool ok = jit.bf16()[i] == ref.bf16()[i] || (std::isnan(a) && std::isnan(b)) ||
                    (ulps && std::fabs(a - b) <= std::ldexp(std::max(std::fabs(a), std::fabs(b)), -7));
    if (!ok && bad++ < 5) {
      INFO("element " << i << ": jit " << a << " vs interp " << b);
      CHECK(ok);
    }
  }
  CHECK_MESSAGE(bad == 0, bad << " of " << ref.size() << " elements differ");
}

// A contraction of bf16 operands on both engines, with vdpbf16ps (when the
// CPU has it) and without.
void checkContractionBF16(OpKind k, const Shape& sa, const Shape& sb, bool integers, AttrMap at = {}) {
  INFO(std::string(ir::opName(k)) << " " << ir::shapeStr(sa) << ", " << ir::shapeStr(sb)
                                  << (integers ? " (integers)" : ""));
  Tensor a = toBF16(integers ? randIntF32(sa, -4, 4, 11) : randF32(sa, -2, 2, 12));
  Tensor b = toBF16(integers ? randIntF32(sb, -4, 4, 13) : randF32(sb, -2, 2, 14));
  Builder bl;
  Value* r = bl.op(k, {bl.arg(a), bl.arg(b)}, std::move(at));
  bl.f.results = {r};
  Tensor ref = interpret(bl.f, bl.args, {}).at(0);
  for (int dot : {0, 1}) {
    JitOptions o = testOptions();
    o.bf16Dot = dot;
    INFO("bf16Dot " << dot);
    Tensor got = makeJitEngine({}, o)->call(bl.f, bl.args).at(0);
    compareBF16(got, ref, /*ulps=*/!integers);
  }
}
void checkMatMul(const Shape& sa, const Shape& sb, bool integers) {
  checkContractionBF16(OpKind::MatMul, sa, sb, integers);
}

}  // namespace

TEST_CASE("jit bf16: elementwise, reductions, casts and data movement agree with the interpreter") {
  Builder b;
  Value* x = b.arg(toBF16(randF32({6, 5}, -3, 3, 1)));
  Value* y = b.arg(toBF16(randF32({6, 5}, 0.5, 3, 2)));
  Value* f = b.arg(randF32({6, 5}, -3, 3, 3));
  Value* e = b.op(OpKind::Add, {b.op(OpKind::Mul, {x, y}), b.op(OpKind::Exp, {x})});
  Value* d = b.op(OpKind::Div, {x, y});
  Value* s = b.op(OpKind::Sum, {x}, attrs({{"axis", Ints{1}}}));
  Value* sm = b.op(OpKind::Softmax, {y}, attrs({{"axis", int64_t(-1)}}));
  Value* t = b.op(OpKind::Transpose, {x});
  Value* c = b.op(OpKind::Cast, {f}, attrs({{"dtype", DType::BF16}}));
  Value* back = b.op(OpKind::Cast, {e}, attrs({{"dtype", DType::F32}}));
  b.f.results = {e, d, s, sm, t, c, back};
  std::vector<Tensor> ref = interpret(b.f, b.args, {});
  std::vector<Tensor> got = makeJitEngine({}, testOptions())->call(b.f, b.args);
  REQUIRE(got.size() == ref.size());
  for (size_t i = 0; i + 1 < ref.size(); ++i) {
    INFO("result " << i);
    compareBF16(got[i], ref[i], false);
  }
  compareTensors(got.back(), ref.back(), "cast back to f32");
}

TEST_CASE("jit bf16: matmul shapes (edges of the 8 x 32 tile, odd K, batches, rank 1)") {
  INFO("CPU has AVX512_BF16: " << gsl::backend::jit::cpuHasAvx512Bf16());
  for (bool ints : {true, false}) {
    checkMatMul({8, 32}, {32, 32}, ints);
    checkMatMul({13, 37}, {37, 45}, ints);    // M, N off the tile; K odd
    checkMatMul({1, 1}, {1, 1}, ints);
    checkMatMul({64, 256}, {256, 96}, ints);
    checkMatMul({2, 3, 9, 16}, {16, 7}, ints);  // batch rows of one tall GEMM
    checkMatMul({2, 5, 6}, {2, 6, 33}, ints);   // batched
    checkMatMul({3, 1, 4, 5}, {2, 5, 3}, ints);  // broadcast batch dims
    checkMatMul({17}, {17, 5}, ints);           // rank-1 operands
    checkMatMul({4, 17}, {17}, ints);
  }
}

TEST_CASE("jit bf16: einsums as GEMMs (operands relaid out, batches) and an empty sum") {
  auto spec = [](const char* s) { return attrs({{"spec", ir::einsumSpec(s, 2)}}); };
  for (bool ints : {true, false}) {
    checkContractionBF16(OpKind::Einsum, {4, 5, 6}, {6, 5, 3}, ints, spec("bsd,dsh->bh"));
    checkContractionBF16(OpKind::Einsum, {3, 7, 9}, {3, 9, 40}, ints, spec("bij,bjk->bik"));
    checkContractionBF16(OpKind::Einsum, {9, 7}, {40, 9}, ints, spec("ki,jk->ji"));  // every copy a relayout
    checkContractionBF16(OpKind::Einsum, {2, 64, 48}, {48, 70}, ints, spec("bmk,kn->bmn"));
  }
  checkMatMul({3, 0}, {0, 5}, true);  // K = 0: zeros
}

TEST_CASE("jit bf16: contractions, common elementwise ops and reductions are generated code") {
  Builder b;
  Value* x = b.arg(toBF16(randF32({8, 16}, -1, 1, 1)));
  Value* w = b.arg(toBF16(randF32({16, 4}, -1, 1, 2)));
  Value* mm = b.op(OpKind::MatMul, {x, w});
  Value* es = b.op(OpKind::Einsum, {x, w}, attrs({{"spec", ir::einsumSpec("ik,kj->ij", 2)}}));
  Value* e = b.op(OpKind::Exp, {b.op(OpKind::Add, {mm, es})});
  Value* s = b.op(OpKind::Sum, {e}, attrs({{"axis", Ints{1}}}));
  Value* sm = b.op(OpKind::Softmax, {x}, attrs({{"axis", int64_t(-1)}}));
  b.f.results = {s, sm};
  JitOptions o = testOptions();
  o.bf16Dot = 0;
  o.vectorWidth = 8;
  o.fallbackOps.clear();
  const backend::jit::BufferPlan p = backend::jit::planBuffers(b.f, o);
  REQUIRE(p.fallback.size() == 6);
  CHECK_FALSE(p.fallback[0]);  // matmul: widened, the f32 kernel, rounded
  REQUIRE(p.gemm[0]);
  CHECK(p.gemm[0]->bf16);
  CHECK_FALSE(p.fallback[1]);  // einsum of a GEMM's form: the same
  REQUIRE(p.gemm[1]);
  CHECK(p.gemm[1]->bf16);
  CHECK_FALSE(p.fallback[2]);  // add, exp: generated, fused into the sum
  CHECK_FALSE(p.fallback[3]);
  CHECK(p.fused[2]);
  CHECK(p.fused[3]);
  CHECK_FALSE(p.fallback[4]);  // sum
  CHECK_FALSE(p.fallback[5]);  // softmax on bf16: generated too (jit_bf16_ops_test.cpp); the data
                               // movement other than transpose runs the reference kernel
}

// Tensors whose bf16 values include what rounding and the edge cases
// exercise: zeros, NaN, infinities, values next to bf16's largest (unless
// `forSums`), tiny ones, and random values. Sums of bf16 values are exact
// in the double accumulators of both engines, and so independent of their
// order, unless their magnitudes span more than double's 53 bits (3.3e38
// + 1 - 3.3e38): such sums depend on the order (as f32 sums do).
Tensor edgyBF16(const Shape& s, uint32_t seed, bool forSums = false) {
  Tensor f = randF32(s, -3, 3, seed);
  const float big = forSums ? 3.3e4f : 3.3e38f;
  const float special[] = {0.0f, -0.0f, NAN, INFINITY, -INFINITY, big, -big, 1e-39f, 88.5f, -90.0f, 1.0f};
  for (int64_t i = 0; i < f.size(); i += 7) f.f32()[i] = special[(i / 7) % 11];
  return toBF16(f);
}

// `results` of `b` on both engines, bit for bit (bf16 and f32 results;
// i32 and bool results as words).
void checkExact(Builder& b, std::vector<Value*> results) {
  b.f.results = results;
  std::vector<Tensor> ref = interpret(b.f, b.args, {});
  std::vector<Tensor> got = makeJitEngine({}, testOptions())->call(b.f, b.args);
  REQUIRE(got.size() == ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    INFO("result " << i << " (" << std::string(ir::opName(results[i]->def->kind)) << ")");
    REQUIRE(got[i].type() == ref[i].type());
    if (ref[i].dtype() == DType::BF16) {
      compareBF16(got[i], ref[i], false);
      continue;
    }
    const bool fl = ref[i].dtype() == DType::F32;
    const void* g = fl ? (const void*)got[i].f32() : (const void*)got[i].i32();
    const void* w = fl ? (const void*)ref[i].f32() : (const void*)ref[i].i32();
    int64_t bad = 0;
    for (int64_t e = 0; e < ref[i].size(); ++e)
      if (std::memcmp((const char*)g + 4 * e, (const char*)w + 4 * e, 4) != 0 && bad++ < 5) {
        INFO("element " << e << ": jit " << got[i].at(e) << " vs interp " << ref[i].at(e));
        CHECK(false);
      }
    CHECK_MESSAGE(bad == 0, bad << " elements differ");
  }
}

TEST_CASE("jit bf16: generated elementwise ops and transposes are the interpreter's bits (ops, fused chains, edges)") {
  Builder b;
  const Shape s = {37, 61};  // odd sizes: vector loops with remainders
  Value* x = b.arg(edgyBF16(s, 21));
  Value* y = b.arg(edgyBF16(s, 22));
  Value* row = b.arg(toBF16(randF32({61}, 0.25, 4, 23)));
  Value* f = b.arg(randF32(s, -5, 5, 24));
  Value* i = b.arg(randI32(s, -300, 300, 25));
  Value* m = b.arg(randBool(s, 26));
  std::vector<Value*> r;
  for (OpKind k : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div, OpKind::Maximum, OpKind::Minimum})
    r.push_back(b.op(k, {x, y}));
  r.push_back(b.op(OpKind::Mul, {x, row}));  // broadcast
  for (OpKind k : {OpKind::Neg, OpKind::Abs, OpKind::Relu, OpKind::Exp, OpKind::Tanh, OpKind::Gelu})
    r.push_back(b.op(k, {x}));
  r.push_back(b.op(OpKind::Where, {m, x, y}));
  auto cast = [&](Value* v, DType dt) { return b.op(OpKind::Cast, {v}, attrs({{"dtype", dt}})); };
  r.push_back(cast(f, DType::BF16));
  r.push_back(cast(b.op(OpKind::Mul, {f, f}), DType::BF16));  // f32 results rounded, ties included
  r.push_back(cast(x, DType::F32));
  r.push_back(cast(i, DType::BF16));  // 257, 259, ...: rounded to even
  r.push_back(cast(m, DType::BF16));
  r.push_back(cast(y, DType::I32));
  r.push_back(cast(y, DType::Bool));
  // A fused chain: every op rounds to bf16 as the interpreter's does.
  r.push_back(b.op(OpKind::Tanh, {b.op(OpKind::Add, {b.op(OpKind::Mul, {x, y}), b.op(OpKind::Exp, {y})})}));
  // bf16 leaves inside an f32 tree.
  r.push_back(b.op(OpKind::Add, {cast(b.op(OpKind::Gelu, {x}), DType::F32), f}));
  // Transposes: 2-byte copies (16 x 16 tiles when both dims allow).
  r.push_back(b.op(OpKind::Transpose, {x}));
  Value* t3 = b.arg(edgyBF16({32, 5, 48}, 27));
  r.push_back(b.op(OpKind::Transpose, {t3}, attrs({{"perm", Ints{2, 1, 0}}})));
  r.push_back(b.op(OpKind::Transpose, {t3}, attrs({{"perm", Ints{1, 0, 2}}})));
  checkExact(b, r);
}

TEST_CASE("jit bf16: generated reductions accumulate in f32 (double) and round once, as the interpreter") {
  Builder b;
  Value* x = b.arg(toBF16(randF32({9, 40, 33}, -2, 2, 31)));
  Value* ones = b.arg(toBF16(Tensor::fromF32({300}, std::vector<float>(300, 1.0f))));
  Value* edgy = b.arg(edgyBF16({12, 35}, 32, /*forSums=*/true));
  std::vector<Value*> r;
  for (OpKind k : {OpKind::Sum, OpKind::Mean, OpKind::Max, OpKind::Min})
    for (Ints axes : {Ints{2}, Ints{0}, Ints{0, 2}, Ints{0, 1, 2}}) r.push_back(b.op(k, {x}, attrs({{"axis", axes}})));
  r.push_back(b.op(OpKind::Sum, {ones}, attrs({{"axis", Ints{0}}})));  // 300: a bf16 accumulator would stop at 256
  for (OpKind k : {OpKind::Sum, OpKind::Max, OpKind::Min}) r.push_back(b.op(k, {edgy}, attrs({{"axis", Ints{1}}})));
  // Equal maxima of either sign: the first one seen, as the interpreter.
  Value* zeros = b.arg(toBF16(Tensor::fromF32({4, 3}, {-0.0f, 0.0f, -1.0f, 0.0f, -0.0f, -1.0f, -0.0f, -2.0f, 0.0f,
                                                        1.0f, -0.0f, 0.0f})));
  for (OpKind k : {OpKind::Max, OpKind::Min}) r.push_back(b.op(k, {zeros}, attrs({{"axis", Ints{1}}})));
  // A reduction of a fused bf16 tree.
  r.push_back(b.op(OpKind::Mean, {b.op(OpKind::Exp, {b.op(OpKind::Mul, {x, x})})}, attrs({{"axis", Ints{1}}})));
  checkExact(b, r);
}

TEST_CASE("jit bf16: integer-valued 256 x 256 sums are exact on vdpbf16ps") {
  // Products of bf16 values are exact in f32 and these sums stay below
  // 2^24, so the vdpbf16ps kernel's f32 accumulators hold the exact result.
  checkMatMul({256, 256}, {256, 256}, true);
}

TEST_CASE("jit bf16: the CPU feature check agrees with the kernel's view (/proc/cpuinfo's avx512_bf16)") {
  // The vdpbf16ps kernel runs only where this says yes; a wrong yes would
  // execute an illegal instruction, a wrong no would hide the fast path.
  std::ifstream in("/proc/cpuinfo");
  if (!in) return;  // not Linux: nothing to compare with
  std::string line;
  bool flagged = false, sawFlags = false;
  while (std::getline(in, line))
    if (line.rfind("flags", 0) == 0) {
      sawFlags = true;
      flagged = (line + " ").find(" avx512_bf16 ") != std::string::npos;
      break;
    }
  if (!sawFlags) return;
  CHECK(gsl::backend::jit::cpuHasAvx512Bf16() == flagged);
}

TEST_CASE("jit bf16: einsums run vdpbf16ps on AVX512_BF16 (batched, transposed operands) and the portable path gives the same values") {
  // The attention and projection einsums of examples/transformer.gsl, at
  // sizes past the kernel's 12 x 32 tile and 512-long K blocks: on a CPU
  // with AVX512_BF16 the plan is a call of the vdpbf16ps kernel with the
  // einsum's strides (its packing reads the transposed operands), without
  // it the widened f32 kernel; integer values make both exact, so the
  // two runs' bits agree (checkContractionBF16 compares each with the
  // interpreter). (Every GEMM here has at least 2^16 multiply-adds: smaller
  // ones stay on the portable path, Contraction.cpp; the last case checks.)
  struct Case {
    const char* spec;
    Shape a, b;
  };
  const Case cases[] = {
      {"bnqh,bnkh->bnqk", {2, 3, 37, 72}, {2, 3, 41, 72}},    // A·Bᵀ per batch index
      {"bnqk,bnkh->bnqh", {2, 3, 37, 41}, {2, 3, 41, 72}},
      {"bnqk,bnqh->bnkh", {2, 3, 41, 37}, {2, 3, 41, 72}},    // Aᵀ·B
      {"bnqh,bnqk->bnkh", {2, 3, 41, 72}, {2, 3, 41, 37}},    // C's columns contiguous
      {"bsd,dnh->bnsh", {3, 5, 600}, {600, 2, 33}},           // C relaid out; K over one block
      {"bnsh,bsd->dnh", {3, 2, 5, 33}, {3, 5, 70}},           // A relaid out, K = b s
      {"ki,jk->ji", {1025, 13}, {37, 1025}},                   // both transposed, K odd over 2 blocks
      {"bij,bjk->bik", {4, 16, 16}, {4, 16, 16}},             // small: portable
  };
  for (const Case& c : cases) {
    AttrMap at = attrs({{"spec", ir::einsumSpec(c.spec, 2)}});
    checkContractionBF16(OpKind::Einsum, c.a, c.b, true, at);
    Builder bl;
    Value* r = bl.op(OpKind::Einsum, {bl.arg(toBF16(randIntF32(c.a, -4, 4, 5))), bl.arg(toBF16(randIntF32(c.b, -4, 4, 6)))},
                     at);
    bl.f.results = {r};
    std::vector<Tensor> out;
    for (int dot : {1, 0}) {
      JitOptions o = testOptions();
      o.bf16Dot = dot;
      o.fallbackOps.clear();
      const backend::jit::BufferPlan p = backend::jit::planBuffers(bl.f, o);
      REQUIRE(p.gemm[0]);
      INFO(c.spec << " bf16Dot " << dot);
      CHECK_FALSE(p.fallback[0]);
      CHECK(p.gemm[0]->bf16);
      // (Planning takes the option as given; the engine narrows it to the CPU.)
      const bool big = p.gemm[0]->M * p.gemm[0]->N * p.gemm[0]->K >= (1 << 16);
      CHECK((p.gemm[0]->code == backend::jit::Gemm::Code::BF16Dot) == (dot == 1 && big));
      out.push_back(makeJitEngine({}, o)->call(bl.f, bl.args).at(0));
    }
    INFO(c.spec << ": vdpbf16ps (when the CPU has it) against the portable path");
    compareBF16(out[0], out[1], false);
  }
}
