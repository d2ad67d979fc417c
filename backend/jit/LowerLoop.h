// The JIT's `loop` op (docs/loops.md, "JIT"): the body is compiled ONCE, as
// a function of its own with the CompiledFn signature (its own buffer plan
// and workspace), and run once per iteration by the runtime helper
// gsl_rt_loop, so the code size and the compile time do not depend on the
// trip count. dynamic_index and dynamic_update are row copies.
// Internal to backend/jit: OpLowering calls these for the three op kinds.
#pragma once
#include <cstdint>

#include "backend/jit/Emitter.h"

namespace gsl::backend::jit {

struct LoopLowering {
  // At the builder's position in `e`'s function: lowers the body into the
  // same LLVM module and calls gsl_rt_loop on the operands' and results'
  // buffers.
  static void emitLoop(Emitter& e, const ir::Op& op);
  // out = row i of x (an index out of range runs the reference kernel,
  // which reports the internal error).
  static void emitDynamicIndex(Emitter& e, const ir::Op& op);
  // out = x with row i replaced by u.
  static void emitDynamicUpdate(Emitter& e, const ir::Op& op);

 private:
  static llvm::Value* rowIndex(Emitter& e, const ir::Op& op, IRValue index, int64_t rows, llvm::BasicBlock*& done);
};

}  // namespace gsl::backend::jit

extern "C" {
// Runs loop op number `op` of the called function: `body` (the compiled
// body, a CompiledFn) once per iteration with a workspace of `bodyPeak`
// bytes; ins[k] are the loop's operand buffers, outs[j] its result buffers.
// `resultPlan` holds (kind, index) per body result (jit::ResultSource: the
// body results the compiled code does not write are copied here). Returns
// 0, or 1 after storing the body's error in the context.
int32_t gsl_rt_loop(void* ctx, int64_t op, void* body, const void* const* ins, void* const* outs, int64_t bodyPeak,
                    const int32_t* resultPlan);
}
