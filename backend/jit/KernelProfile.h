// Where a compiled function's time goes, op by op: an opt-in timer the JIT
// compiles around every op that has code (JitOptions::profileKernels).
// Off by default, and then free: the compiled code has no timer at all
// (the option is part of both compile caches' keys, so timed and untimed
// code are never mixed).
//
// When on, the generated code reads the CPU's time-stamp counter
// (llvm.readcyclecounter, rdtsc on x86) before and after each op's kernel
// or helper call (a collective, the reference-kernel fallback, random
// numbers) and reports the difference with gsl_rt_profile. The cost is two
// counter reads and a locked table update per op call (well under a
// microsecond), so a profile of small kernels reads a little high. Loops
// are not timed as a whole: their bodies' ops are, on every iteration; the
// loop's own work (copying the carried values between iterations) is left
// to what the caller's clock sees beyond the ops (bench/train_step.cpp's
// "runtime" row).
//
// bench_train_step profile (bench/step_profile.sh) prints the table of a
// training step by kernel class; docs/benchmarks.md has its figures.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gsl::backend {

// One op of a compiled function, as the profile saw it.
struct KernelProfileRow {
  std::string function;  // the per-rank function called from the host (a loop body's op: its caller's)
  std::string op;        // mnemonic, and "FILE:LINE" when the op has a source position
  std::string kind;      // gemm, elementwise, reduction, softmax/layer_norm, copy, collective, optimizer, other
                         // (optimizer: an elementwise op writing a result after the first, below)
  std::string shape;     // a GEMM's "B x M x N x K" (B omitted when 1) and transposes; else the result type
  uint64_t calls = 0;
  double seconds = 0;
  double flops = 0;  // per call: 2 M N K B for a GEMM, 0 for the rest
};

// Every op timed since the last reset, in first-seen order.
std::vector<KernelProfileRow> jitKernelProfile();
void jitKernelProfileReset();

}  // namespace gsl::backend

extern "C" {
// Adds `cycles` time-stamp counter ticks to op number `op` of the function
// the call context runs (Runtime.h's CallContext).
void gsl_rt_profile(void* ctx, int64_t op, int64_t cycles);
}
