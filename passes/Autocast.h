// Autocast (mixed precision, as torch.autocast): with `gsl run/compile
// --autocast bf16` (ir::Module::autocast), every matmul and einsum on f32
// operands runs in bf16 and its result is cast back to f32:
//
//   %r = matmul %a, %b : f32            %ca = cast %a to bf16
//                              ->       %cb = cast %b to bf16
//                                       %m  = matmul %ca, %cb : bf16
//                                       %r  = cast %m to f32
//
// (the op keeps its result value, now a cast, so its users, its sharding
// and its location are unchanged). Everything else stays f32: params (the
// optimizer's master copy), layer_norm, softmax, reductions, the loss. It
// runs before training expansion, so the backward pass gets bf16
// contractions too (the gradient of a cast is the cast back). Loop bodies
// are rewritten the same way. Without --autocast the pass is not run and
// the IR is unchanged.
#pragma once
#include "ir/Module.h"

namespace gsl::passes {

void autocast(ir::Module& m, ir::DType dt);

}  // namespace gsl::passes
