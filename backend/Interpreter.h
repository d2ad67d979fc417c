// The reference interpreter (`--engine interp`): runs an IR function op by
// op with the reference kernels.
#pragma once
#include <vector>

#include "backend/Kernels.h"
#include "ir/Function.h"

namespace gsl::backend {

// Runs `f` on `args` (one per function argument, types must match) and
// returns its results. Values are freed after their last use.
std::vector<Tensor> interpret(const ir::Function& f, const std::vector<Tensor>& args,
                              const KernelContext& ctx);

}  // namespace gsl::backend
