// Moving whole (logical) tensors to and from ranks on the host side:
// `load` gives each rank its block of the file's tensor; params are
// initialised globally (the same values under every sharding) and each rank
// keeps its block.
#pragma once
#include <optional>

#include "backend/Tensor.h"
#include "ir/Module.h"

namespace gsl::runtime {

// The block of `global` that `rank` holds under sharding `s` (replicated,
// or split only over axes of size 1: `global` itself, sharing its buffer). A dim its blocks do not divide is padded: the block
// has ceil(size / blocks) rows, those past the dim's end zeros
// (docs/sharding.md, "Uneven dims").
backend::Tensor localBlock(const ir::Module& m, const backend::Tensor& global,
                           const std::optional<ir::Sharding>& s, int rank);

}  // namespace gsl::runtime
