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
  // Contractions of at most this many multiply-adds per GEMM (M*N*K) are
  // generated as loops; larger ones call gsl_rt_sgemm (Eigen). See
  // Codegen.cpp for the measurement behind the default.
  int64_t smallGemmMacs = 32 * 32 * 32;
};

// Reads GSL_JIT_GEMM (`eigen`: every GEMM calls Eigen; `loops`: every GEMM
// is generated) once per process; the defaults otherwise. A benchmarking
// knob only: the process-wide cache assumes options never change.
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

}  // namespace gsl::backend::jit
