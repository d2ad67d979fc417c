// How the generated code addresses tensors: row-major element strides,
// NumPy broadcasting as stride 0, and iteration spaces simplified for
// loops. Shared by the buffer planner, the GEMM planner and op lowering.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/Strides.h"
#include "ir/Type.h"

namespace gsl::backend::jit {

// Strides and rowMajorStrides: backend/Strides.h (the reference kernels'
// too).

int64_t numel(const ir::Shape& s);

// Strides of a tensor of shape `in` read broadcast (NumPy, right-aligned)
// over `out`: 0 where `in` has size 1 or no dim.
Strides bcastStrides(const ir::Shape& in, const ir::Shape& out);

// Simplifies an iteration space read through several stride vectors: drops
// size-1 dims and merges adjacent dims that are contiguous in every vector
// (stride[d] == stride[d+1] * size[d+1]), so an elementwise op over
// same-shaped operands becomes one flat loop.
void collapse(ir::Shape& s, std::vector<Strides*> st);

}  // namespace gsl::backend::jit
