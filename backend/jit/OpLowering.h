// How is each op emitted? Op lowering turns the ops of a planned function
// into the body of one LLVM function (Emitter.h gives its signature); see
// OpLowering.cpp for what is generated inline and what calls a runtime
// helper, and which op kinds have code at all (hasLowering).
#pragma once
#include <string>
#include <vector>

#include "backend/jit/BufferPlan.h"
#include "backend/jit/JitOptions.h"
#include "ir/OpTable.h"
#include "support/SourceLoc.h"

namespace llvm {
class Module;
}  // namespace llvm

namespace gsl::backend::jit {

// Where a function of the module came from, so that a profile can name its
// code after the source (`gsl run --perf-map`): a kernel ("SYMBOL.kN"),
// a loop body ("SYMBOL.loopM") or a body's kernel ("SYMBOL.loopM.kN"),
// the op it was first emitted for, and how many further ops call it (a
// kernel equal to an earlier one is not emitted again: the earlier one runs).
struct KernelOrigin {
  std::string symbol;
  SourceLoc loc;
  ir::OpKind kind;
  size_t sharedBy = 0;
};

// How many kernel functions the lowering emitted (identical ones once) and
// how many calls of them the entry function makes.
struct KernelCounts {
  size_t kernels = 0, calls = 0;
  std::vector<KernelOrigin> origins;  // every kernel and loop body, loop bodies' kernels included
};

// Whether op lowering generates code for ops of kind `k` (inline, or a
// call of a runtime helper of its own). A kind without (an op added to the
// op table with only its reference kernel) is planned as a fallback
// (BufferPlan::fallback): the generated code calls backend::evalOp for it
// through gsl_rt_eval_op, between the generated code of the ops around it,
// which are not fused across it.
bool hasLowering(ir::OpKind k);

// Test-only: while one lives, hasLowering(k) is false, as for an op added
// to the op table without a lowering. The engine's in-process cache keys
// on the hidden kinds (hiddenLoweringsKey), so code compiled with the
// lowering is not reused without it. Not thread-safe: create and destroy
// it while no compile runs.
class ScopedHiddenLowering {
 public:
  explicit ScopedHiddenLowering(ir::OpKind k);
  ~ScopedHiddenLowering();
  ScopedHiddenLowering(const ScopedHiddenLowering&) = delete;
  ScopedHiddenLowering& operator=(const ScopedHiddenLowering&) = delete;

 private:
  ir::OpKind kind_;
};

// "" when no lowering is hidden (so the cache keys of ordinary runs do not
// change), else the hidden kinds as text.
std::string hiddenLoweringsKey();

// Adds the function `symbol` to `m`: every live op of `f` that the plan
// does not fuse, in order, with the buffers `plan` chose (planned for the
// same `opts`). Unoptimised LLVM IR, checked by LLVM's verifier.
KernelCounts lowerOps(const ir::Function& f, const BufferPlan& plan, const JitOptions& opts,
                      const std::string& symbol, llvm::Module& m);

}  // namespace gsl::backend::jit
