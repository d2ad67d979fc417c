// Options of the JIT compiler, passed by value to the engine
// (makeJitEngine and the other entry points of JitEngine.h) and from there
// to code generation. The compiler never reads the process environment:
// jitOptionsFromEnvironment is for the program's edges (the gsl tool, the
// jit unit tests' set-up), which decide whether the GSL_JIT_* variables
// apply.
#pragma once
#include <cstdint>
#include <vector>

#include "ir/OpTable.h"

namespace gsl::backend {

struct JitOptions {
  // How GEMMs (matmul, einsum as batched GEMM) are executed; see the
  // measurement in Contraction.cpp. Auto: the generated register-blocked
  // kernel whenever rows (or columns) of the operands are contiguous, else
  // generated dot-product loops up to `dotLoopMacs` multiply-adds and
  // Eigen above. Eigen: every GEMM calls gsl_rt_sgemm. Loops: never Eigen.
  enum class GemmCode { Auto, Eigen, Loops } gemm = GemmCode::Auto;
  int64_t dotLoopMacs = 32 * 32 * 32;
  // f32 lanes of the vector registers the GEMM kernel is built for: 16
  // (AVX-512), 8 (AVX) or 4 (SSE). 0 asks the engine for the host's widest;
  // a nonzero request is narrowed to the host's width (so tests can build
  // what an AVX2 or SSE host would run). Code generation itself takes the
  // resolved width, one of 4, 8, 16.
  int vectorWidth = 0;
  // Ops run by the reference kernel (gsl_rt_eval_op) although code could be
  // generated: tests the fallback that ops unknown to the generator take.
  std::vector<ir::OpKind> fallbackOps;
  // LLVM's optimisation pipeline level (1, 2 or 3: the new pass manager's
  // O1 / O2 / O3) and code generation level (0 None, 1 Less, 2 Default,
  // 3 Aggressive), for every module the engine compiles. The defaults
  // were chosen by measurement (bench/opt_levels.sh, docs/compile-cache.md):
  // on examples/transformer.gsl, O2 with Less took 0.59x the CPU time of
  // O3 with Aggressive to compile, and its training step 0.98x the time.
  int optLevel = 2;
  int codegenLevel = 1;
  // Threads that generate a module's code at once (each a share of its
  // functions; the objects are the same code as one thread would make).
  // 0 asks the engine for the host's processors (at most 8). Not part of
  // the cache key: an entry made with any count loads under any other.
  int compileThreads = 0;
  // bf16 matmul by vdpbf16ps (backend/jit/BF16Gemm.h) rather than the
  // reference kernel (operands widened to f32): -1 asks the engine (true
  // when the host CPU has AVX512_BF16), 0 never, 1 is narrowed to the host
  // as vectorWidth is. Code generation takes the resolved 0 or 1.
  int bf16Dot = -1;
  // The op timer (KernelProfile.h): a time-stamp counter read before and
  // after every op's code, reported to gsl_rt_profile. Off: no timer code.
  bool profileKernels = false;

  bool operator==(const JitOptions&) const = default;
};

// The defaults, changed by GSL_JIT_GEMM (`eigen` or `loops`, see GemmCode),
// GSL_JIT_FALLBACK (comma-separated op mnemonics, see fallbackOps; unknown
// names are ignored) and GSL_JIT_VECTOR_WIDTH (4, 8 or 16; other values
// are ignored), GSL_JIT_OPT (1, 2 or 3) and GSL_JIT_CODEGEN (0 to 3; see
// optLevel and codegenLevel), GSL_JIT_COMPILE_THREADS (1 to 64) and
// GSL_JIT_BF16 (`portable`: bf16Dot = 0) and GSL_JIT_PROFILE (`1`:
// profileKernels). Benchmarking and testing knobs.
JitOptions jitOptionsFromEnvironment();

}  // namespace gsl::backend
