// Reference kernels: the semantics of every op of the op table on host
// tensors. This is the numeric oracle that every later engine (the LLVM JIT,
// the SPMD program) is compared against, so clarity wins over speed; dense
// contractions use Eigen's matrix product.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "backend/Tensor.h"
#include "ir/Op.h"

namespace gsl::backend {

struct KernelContext {
  uint64_t seed = 0;  // global --seed (random_uniform)
  // Returns the current value of a param by name (the `param` op).
  std::function<const Tensor&(const std::string&)> param;
};

// Evaluates `op` on `in` (its operands' values, in order).
Tensor evalOp(const ir::Op& op, const std::vector<Tensor>& in, const KernelContext& ctx);

}  // namespace gsl::backend
