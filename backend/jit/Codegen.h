// IR -> LLVM IR: lowers one ir::Function to one LLVM module: an entry
// function with the signature of jit::CompiledFn (Runtime.h) that calls
// one internal function per kernel (OpLowering.cpp). Internal to
// backend/jit.
//
// Two stages, each in its own files:
//   BufferPlan   where do buffers go? liveness, fusion, storage, workspace
//                offsets (and, through Contraction, each GEMM's plan);
//   OpLowering   how is each op emitted? (the GEMM kernel in GemmKernel,
//                the shared IR building blocks in Emitter).
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "backend/jit/BufferPlan.h"
#include "backend/jit/JitOptions.h"
#include "backend/jit/OpLowering.h"
#include "ir/Function.h"

namespace llvm {
class LLVMContext;
class Module;
}  // namespace llvm

namespace gsl::backend::jit {

struct Lowered {
  std::unique_ptr<llvm::LLVMContext> context;
  std::unique_ptr<llvm::Module> module;
  std::string symbol;                 // the compiled function's name in `module`
  size_t peakBytes = 0;               // workspace size
  std::vector<ResultSource> results;  // one per function result
  size_t kernels = 0, kernelCalls = 0;  // kernel functions (deduplicated), calls of them
  std::vector<KernelOrigin> origins;    // where each kernel and loop body came from
};

// Lowers `f` (unoptimised LLVM IR; the caller sets the target and runs the
// pass pipeline). `opts.vectorWidth` must be resolved (4, 8 or 16).
Lowered lowerFunction(const ir::Function& f, const std::string& symbol, const JitOptions& opts);

// The workspace size and result sources lowerFunction would plan for `f`
// (the buffer planner alone: no LLVM IR is built, so it is cheap).
struct PlanSummary {
  size_t peakBytes = 0;
  std::vector<ResultSource> results;
};
PlanSummary planSummary(const ir::Function& f, const JitOptions& opts);

}  // namespace gsl::backend::jit
