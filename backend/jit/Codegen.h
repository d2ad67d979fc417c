// IR -> LLVM IR: lowers one ir::Function to one LLVM function with the
// signature of jit::CompiledFn (Runtime.h). Internal to backend/jit.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/Function.h"

namespace llvm {
class LLVMContext;
class Module;
}  // namespace llvm

namespace gsl::backend::jit {

// Where result j of the function comes from.
struct ResultSource {
  enum Kind {
    Computed,  // written by the compiled code into outputs[j]
    Arg,       // the argument args[index] itself (as the interpreter returns it)
    Repeat,    // the same value as result `index` (< j)
  } kind = Computed;
  int index = -1;
};

struct CodegenOptions {
  // How GEMMs (matmul, einsum as batched GEMM) are executed; see the
  // measurement in Codegen.cpp. Auto: the generated register-blocked
  // kernel whenever rows (or columns) of the operands are contiguous, else
  // generated dot-product loops up to `dotLoopMacs` multiply-adds and
  // Eigen above. Eigen: every GEMM calls gsl_rt_sgemm. Loops: never Eigen.
  enum class GemmCode { Auto, Eigen, Loops } gemm = GemmCode::Auto;
  int64_t dotLoopMacs = 32 * 32 * 32;
  // f32 lanes of the host's vector registers (16 with AVX-512, 8 with AVX;
  // GSL_JIT_VECTOR_WIDTH=8 or 4 narrows it, for tests).
  int vectorWidth = 8;
  // Ops run by the reference kernel (gsl_rt_eval_op) although code could be
  // generated: tests the fallback that ops unknown to the generator take.
  std::vector<ir::OpKind> fallbackOps;
};

// Reads GSL_JIT_GEMM (`eigen` or `loops`, see GemmCode) and GSL_JIT_FALLBACK
// (comma-separated op mnemonics, see fallbackOps) once per process; the
// defaults otherwise. Benchmarking and testing knobs only: the
// process-wide cache assumes options never change.
const CodegenOptions& defaultCodegenOptions();

struct Lowered {
  std::unique_ptr<llvm::LLVMContext> context;
  std::unique_ptr<llvm::Module> module;
  std::string symbol;                 // the compiled function's name in `module`
  size_t peakBytes = 0;               // workspace size
  std::vector<ResultSource> results;  // one per function result
};

// Lowers `f` (unoptimised LLVM IR; the caller sets the target and runs the
// pass pipeline).
Lowered lowerFunction(const ir::Function& f, const std::string& symbol, const CodegenOptions& opts);

// The workspace size lowerFunction would plan for `f` (the buffer planner
// alone: no LLVM IR is built, so it is cheap).
size_t planPeakBytes(const ir::Function& f, const CodegenOptions& opts);

}  // namespace gsl::backend::jit
