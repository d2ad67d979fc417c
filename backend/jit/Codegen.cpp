// IR -> LLVM IR for the JIT engine: plan the buffers, then lower the ops.
#include "backend/jit/Codegen.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include "backend/jit/OpLowering.h"
#include "support/Diagnostics.h"

namespace gsl::backend::jit {

namespace {

void checkResolved(const JitOptions& opts) {
  GSL_ASSERT(opts.vectorWidth == 4 || opts.vectorWidth == 8 || opts.vectorWidth == 16,
             "jit: code generation needs a resolved vector width (4, 8 or 16), got " +
                 std::to_string(opts.vectorWidth));
}

}  // namespace

Lowered lowerFunction(const ir::Function& f, const std::string& symbol, const JitOptions& opts) {
  checkResolved(opts);
  Lowered out;
  out.context = std::make_unique<llvm::LLVMContext>();
  out.module = std::make_unique<llvm::Module>("gsl." + f.name, *out.context);
  BufferPlan plan = planBuffers(f, opts);
  KernelCounts k = lowerOps(f, plan, opts, symbol, *out.module);
  out.kernels = k.kernels;
  out.kernelCalls = k.calls;
  out.origins = std::move(k.origins);
  out.symbol = symbol;
  out.peakBytes = plan.peak;
  out.results = std::move(plan.results);
  return out;
}

PlanSummary planSummary(const ir::Function& f, const JitOptions& opts) {
  checkResolved(opts);
  BufferPlan plan = planBuffers(f, opts);
  return {plan.peak, std::move(plan.results)};
}

}  // namespace gsl::backend::jit
