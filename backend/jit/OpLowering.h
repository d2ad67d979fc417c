// How is each op emitted? Op lowering turns the ops of a planned function
// into the body of one LLVM function (Emitter.h gives its signature); see
// OpLowering.cpp for what is generated inline and what calls a runtime
// helper.
#pragma once
#include <string>

#include "backend/jit/BufferPlan.h"
#include "backend/jit/JitOptions.h"

namespace llvm {
class Module;
}  // namespace llvm

namespace gsl::backend::jit {

// Adds the function `symbol` to `m`: every live op of `f` that the plan
// does not fuse, in order, with the buffers `plan` chose (planned for the
// same `opts`). Unoptimised LLVM IR, checked by LLVM's verifier.
// How many kernel functions the lowering emitted (identical ones once) and
// how many calls of them the entry function makes.
struct KernelCounts {
  size_t kernels = 0, calls = 0;
};

KernelCounts lowerOps(const ir::Function& f, const BufferPlan& plan, const JitOptions& opts,
                      const std::string& symbol, llvm::Module& m);

}  // namespace gsl::backend::jit
