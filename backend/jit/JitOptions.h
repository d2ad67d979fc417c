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

  bool operator==(const JitOptions&) const = default;
};

// The defaults, changed by GSL_JIT_GEMM (`eigen` or `loops`, see GemmCode),
// GSL_JIT_FALLBACK (comma-separated op mnemonics, see fallbackOps; unknown
// names are ignored) and GSL_JIT_VECTOR_WIDTH (4, 8 or 16; other values
// are ignored). Benchmarking and testing knobs.
JitOptions jitOptionsFromEnvironment();

}  // namespace gsl::backend
