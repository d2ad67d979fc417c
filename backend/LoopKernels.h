// Kernels of the loop's indexing ops (ir/Loop.h): dynamic_index and
// dynamic_update on host tensors. The loop itself is run by the
// interpreter (backend/Interpreter.h), which runs its body.
#pragma once
#include "backend/Tensor.h"

namespace gsl::backend {

// x[i] along dim 0 (type rt). An index out of range is an internal error.
Tensor dynamicIndex(const Tensor& x, const Tensor& i, const TensorType& rt);
// A copy of x with row i (along dim 0) replaced by u.
Tensor dynamicUpdate(const Tensor& x, const Tensor& u, const Tensor& i);

}  // namespace gsl::backend
