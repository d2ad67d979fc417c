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
// and the ratios bf16/f32 (the goal is >= 1.6). bench/bf16_torch.py measures
// PyTorch's CPU bf16 matmul the same way; bench/bf16.sh runs both.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "backend/jit/BF16Gemm.h"
#include "backend/jit/JitEngine.h"
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
  void time() {
    auto t0 = Clock::now();
    engine->call(f, args);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
};

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
  std::printf("  f32  matmul (JIT kernel)                     %8.2f GFLOP/s  %8.2f ms\n", flops / tf * 1e-9, tf * 1e3);
  std::printf("  bf16 matmul (JIT default, %s)  %8.2f GFLOP/s  %8.2f ms\n",
              backend::jit::cpuHasAvx512Bf16() ? "vdpbf16ps    " : "no AVX512_BF16", flops / tb * 1e-9, tb * 1e3);
  std::printf("  bf16 matmul (portable: widened, f32 kernel) %8.2f GFLOP/s  %8.2f ms\n", flops / tp * 1e-9, tp * 1e3);
  std::printf("  bf16 matmul (reference kernel, Eigen)        %8.2f GFLOP/s  %8.2f ms\n", flops / tr * 1e-9, tr * 1e3);
  std::printf("ratio bf16/f32 throughput %.2f (goal >= 1.6), portable/f32 %.2f, reference/f32 %.2f\n", tf / tb,
              tf / tp, tf / tr);
  return 0;
}
