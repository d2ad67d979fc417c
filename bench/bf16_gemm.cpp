// bf16 GEMM against f32 GEMM, both through GSL's JIT, single thread, in
// one run: C = A B at N x N x N (1024 by default; --quick 256), best of
// 7 calls each, the cases' calls interleaved. Prints GFLOP/s (2 N^3 flops
// a call) of
//   - f32 matmul (the JIT's generated f32 kernel),
//   - bf16 matmul with the engine's default (vdpbf16ps when the CPU has
//     AVX512_BF16, else the portable path),
//   - bf16 matmul through the portable path (GSL_JIT_BF16=portable's
//     choice: A and B widened to f32 once, the JIT's generated f32 kernel,
//     C rounded to bf16 once; backend/jit/Contraction.h),
//   - bf16 matmul through the reference kernel (what the portable path
//     was before: widen, Eigen's f32 product, round; JitOptions::fallbackOps),
// and the ratios bf16/f32 (the goal is >= 1.6). First, on a CPU with
// AVX512_BF16, the instructions' own peaks (no loads, 24 independent zmm
// accumulators): vdpbf16ps (64 flops) against vfmadd231ps (32). Then a table of the
// contractions of the D = 1024 Transformer training step (examples/
// transformer.gsl -np 1 -D DP=1 -D D=1024 -D NH=8 -D HD=128 -D H=4096
// -D L=8 --autocast bf16: B S = 256 tokens; `gsl compile ... --emit
// spmd` lists them), each as that op (matmul, or the einsum with its spec)
// in f32, in bf16 with the engine's default and in bf16 through the
// portable path, calls interleaved, best of 7: GFLOP/s and the ratio
// bf16/f32. bench/bf16_torch.py measures
// PyTorch's CPU bf16 matmul the same way; bench/bf16.sh runs both.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backend/jit/BF16Gemm.h"
#include "backend/jit/JitEngine.h"
#include "ir/Einsum.h"
#include "ir/Function.h"
#include "support/BF16.h"

using namespace gsl;
using Clock = std::chrono::steady_clock;

namespace {

backend::Tensor randomTensor(ir::DType dt, const ir::Shape& s, uint32_t seed) {
  backend::Tensor f(ir::TensorType{ir::DType::F32, s});
  uint32_t x = seed;
  for (int64_t i = 0; i < f.size(); ++i) {
    x = x * 1664525u + 1013904223u;
    f.f32()[i] = (float)((x >> 8) * (1.0 / 16777216.0) - 0.5);
  }
  if (dt == ir::DType::F32) return f;
  backend::Tensor b(ir::TensorType{ir::DType::BF16, s});
  narrowBF16(f.f32(), b.bf16(), f.size());
  return b;
}

// One matmul on (n x n) operands of dtype dt, compiled by an engine with
// `opts` (and warmed up by one call).
struct Case {
  ir::Function f;
  std::vector<backend::Tensor> args;
  std::unique_ptr<backend::Engine> engine;
  double best = 1e30;  // seconds

  Case(ir::DType dt, int64_t n, const backend::JitOptions& opts) {
    f.name = "mm";
    ir::Value* a = f.addArg({dt, {n, n}});
    ir::Value* b = f.addArg({dt, {n, n}});
    f.results = {f.append(ir::OpKind::MatMul, {a, b}, {}, ir::TensorType{dt, {n, n}})->result};
    args = {randomTensor(dt, {n, n}, 1), randomTensor(dt, {n, n}, 2)};
    engine = backend::makeJitEngine({}, opts);
    engine->call(f, args);  // compile and warm up
  }
  // One contraction: a matmul (spec empty) or a two-operand einsum.
  Case(ir::DType dt, const std::string& spec, const ir::Shape& sa, const ir::Shape& sb, const ir::Shape& so,
       const backend::JitOptions& opts) {
    f.name = "c";
    ir::Value* a = f.addArg({dt, sa});
    ir::Value* b = f.addArg({dt, sb});
    ir::AttrMap at;
    if (!spec.empty()) at.set("spec", ir::einsumSpec(spec, 2));
    f.results = {f.append(spec.empty() ? ir::OpKind::MatMul : ir::OpKind::Einsum, {a, b}, at,
                          ir::TensorType{dt, so})
                     ->result};
    args = {randomTensor(dt, sa, 1), randomTensor(dt, sb, 2)};
    engine = backend::makeJitEngine({}, opts);
    engine->call(f, args);
  }
  void time() {
    auto t0 = Clock::now();
    engine->call(f, args);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
};

// The instruction's peak in flops per second: one instruction per
// accumulator a round (each accumulator its own start, so that none can
// be merged), the operands kept in registers.
template <bool Dot, size_t... I>
__attribute__((target("avx512f,avx512bf16"), noinline)) double peak(long rounds, std::index_sequence<I...>) {
  __m512 acc[sizeof...(I)] = {_mm512_set1_ps((float)I)...};
  __m512 x = _mm512_set1_ps(1e-3f), y = _mm512_set1_ps(1e-3f);
  const auto t0 = Clock::now();
  for (long r = 0; r < rounds; ++r) {
    ((acc[I] = Dot ? _mm512_dpbf16_ps(acc[I], (__m512bh)x, (__m512bh)y) : _mm512_fmadd_ps(x, y, acc[I])), ...);
    __asm__ volatile("" : "+v"(x), "+v"(y));
  }
  const double t = std::chrono::duration<double>(Clock::now() - t0).count();
  __m512 s = _mm512_setzero_ps();
  ((s = _mm512_add_ps(s, acc[I])), ...);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  volatile float sink = lanes[0];  // keeps the sums
  (void)sink;
  return (double)rounds * (double)sizeof...(I) * (Dot ? 64 : 32) / t;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  int64_t n = 1024;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    else if (std::strcmp(argv[i], "--n") == 0 && i + 1 < argc) n = std::atoll(argv[++i]);
  }
  if (quick) n = 256;
  const int reps = quick ? 2 : 7;
  const double flops = 2.0 * (double)n * (double)n * (double)n;
  backend::JitOptions opts;  // the defaults: the engine picks vdpbf16ps on AVX512_BF16
  backend::JitOptions portable;
  portable.bf16Dot = 0;
  backend::JitOptions reference = portable;
  reference.fallbackOps = {ir::OpKind::MatMul};
  // The four cases' calls interleaved, best of `reps` each: a change in
  // the machine's load hits them alike.
  Case cf(ir::DType::F32, n, opts), cb(ir::DType::BF16, n, opts), cp(ir::DType::BF16, n, portable),
      cr(ir::DType::BF16, n, reference);
  for (int r = 0; r < reps; ++r)
    for (Case* c : {&cf, &cb, &cp, &cr}) c->time();
  const double tf = cf.best, tb = cb.best, tp = cp.best, tr = cr.best;
  std::printf("bf16 GEMM %lld^3, single thread, CPU has AVX512_BF16: %s\n", (long long)n,
              backend::jit::cpuHasAvx512Bf16() ? "yes" : "no");
  if (backend::jit::cpuHasAvx512Bf16()) {
    double dot = 0, fma = 0;
    const long rounds = quick ? 1000000 : 20000000;
    for (int r = 0; r < (quick ? 1 : 5); ++r) {  // interleaved, best of each
      fma = std::max(fma, peak<false>(rounds, std::make_index_sequence<24>()));
      dot = std::max(dot, peak<true>(rounds, std::make_index_sequence<24>()));
    }
    std::printf("  instruction peaks (zmm, 24 accumulators): vfmadd231ps %.1f, vdpbf16ps %.1f GFLOP/s (ratio %.2f)\n",
                fma * 1e-9, dot * 1e-9, dot / fma);
  }
  std::printf("  f32  matmul (JIT kernel)                     %8.2f GFLOP/s  %8.2f ms\n", flops / tf * 1e-9, tf * 1e3);
  std::printf("  bf16 matmul (JIT default, %s)  %8.2f GFLOP/s  %8.2f ms\n",
              backend::jit::cpuHasAvx512Bf16() ? "vdpbf16ps    " : "no AVX512_BF16", flops / tb * 1e-9, tb * 1e3);
  std::printf("  bf16 matmul (portable: widened, f32 kernel) %8.2f GFLOP/s  %8.2f ms\n", flops / tp * 1e-9, tp * 1e3);
  std::printf("  bf16 matmul (reference kernel, Eigen)        %8.2f GFLOP/s  %8.2f ms\n", flops / tr * 1e-9, tr * 1e3);
  std::printf("ratio bf16/f32 throughput %.2f (goal >= 1.6), portable/f32 %.2f, reference/f32 %.2f\n", tf / tb,
              tf / tp, tf / tr);

  // The D = 1024 training step's contractions (every one of its matmuls
  // and einsums has one of these shapes; the transposes of the matmuls'
  // backward pass are ops of their own, the einsums' are strides).
  struct Shape {
    const char* what;
    std::string spec;  // empty: matmul
    ir::Shape a, b, out;
  };
  const std::vector<Shape> shapes = {
      {"ffn up   x W1      256x1024 @ 1024x4096", "", {256, 1024}, {1024, 4096}, {256, 4096}},
      {"ffn down h W2      256x4096 @ 4096x1024", "", {256, 4096}, {4096, 1024}, {256, 1024}},
      {"dW1 = xT dh        1024x256 @ 256x4096", "", {1024, 256}, {256, 4096}, {1024, 4096}},
      {"dW2 = hT dy        4096x256 @ 256x1024", "", {4096, 256}, {256, 1024}, {4096, 1024}},
      {"head  x Wout       256x1024 @ 1024x16", "", {256, 1024}, {1024, 16}, {256, 16}},
      {"qkv   bsd,dnh->bnsh", "bsd,dnh->bnsh", {16, 16, 1024}, {1024, 8, 128}, {16, 8, 16, 128}},
      {"out   bnqh,nhd->bqd", "bnqh,nhd->bqd", {16, 8, 16, 128}, {8, 128, 1024}, {16, 16, 1024}},
      {"score bnqh,bnkh->bnqk", "bnqh,bnkh->bnqk", {16, 8, 16, 128}, {16, 8, 16, 128}, {16, 8, 16, 16}},
      {"ctx   bnqk,bnkh->bnqh", "bnqk,bnkh->bnqh", {16, 8, 16, 16}, {16, 8, 16, 128}, {16, 8, 16, 128}},
      {"dWqkv bnsh,bsd->dnh", "bnsh,bsd->dnh", {16, 8, 16, 128}, {16, 16, 1024}, {1024, 8, 128}},
      {"dx    bnsh,dnh->bsd", "bnsh,dnh->bsd", {16, 8, 16, 128}, {1024, 8, 128}, {16, 16, 1024}},
      {"dk    bnqk,bnqh->bnkh", "bnqk,bnqh->bnkh", {16, 8, 16, 16}, {16, 8, 16, 128}, {16, 8, 16, 128}},
      {"dWout bqd,bnqh->nhd", "bqd,bnqh->nhd", {16, 16, 1024}, {16, 8, 16, 128}, {8, 128, 1024}},
  };
  std::printf("\nD = 1024 Transformer step's contractions (B S = 256 tokens), single thread, best of %d:\n", reps);
  std::printf("  %-42s %10s %10s %7s %14s\n", "shape", "f32 GF/s", "bf16 GF/s", "ratio", "portable GF/s");
  for (const Shape& sh : shapes) {
    // Flops: 2 per multiply-add, one per element of every label's range.
    double macs = 1;
    if (sh.spec.empty()) {
      macs = (double)sh.a[0] * (double)sh.a[1] * (double)sh.b[1];
    } else {
      const ir::EinsumSpec es = ir::einsumSpec(sh.spec, 2);
      std::string seen;
      for (int o = 0; o < 2; ++o)
        for (size_t d = 0; d < es.inputs[o].size(); ++d)
          if (seen.find(es.inputs[o][d]) == std::string::npos) {
            seen += es.inputs[o][d];
            macs *= (double)(o == 0 ? sh.a : sh.b)[d];
          }
    }
    Case f32(ir::DType::F32, sh.spec, sh.a, sh.b, sh.out, opts), b16(ir::DType::BF16, sh.spec, sh.a, sh.b, sh.out, opts),
        b16p(ir::DType::BF16, sh.spec, sh.a, sh.b, sh.out, portable);
    for (int r = 0; r < reps; ++r)
      for (Case* c : {&f32, &b16, &b16p}) c->time();
    std::printf("  %-42s %10.1f %10.1f %7.2f %14.1f\n", sh.what, 2 * macs / f32.best * 1e-9,
                2 * macs / b16.best * 1e-9, f32.best / b16.best, 2 * macs / b16p.best * 1e-9);
  }
  return 0;
}
