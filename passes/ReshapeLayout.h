// Reshape shardings that follow the memory layout (issue 19): a value whose
// every rank holds one contiguous range of the row-major order can be
// reshaped with no communication when the result is laid out so that each
// rank holds the same range. Used by sharding propagation (to propose such
// a sharding for a reshape's result or operand) and by the SPMD partitioner
// (to run such a reshape locally).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "ir/Module.h"
#include "ir/Sharding.h"

namespace gsl::passes {

// Where each rank's block starts in the row-major order of `shape` laid out
// as `s`, as a weight per mesh axis (start = sum of coordinate x weight),
// when every block is one contiguous range: the dims before the last split
// one have blocks of one element, the dims after it are not split. nullopt
// when the blocks are not contiguous. An unsplit `s` gives an empty map.
std::optional<std::map<Symbol, int64_t>> contiguousLayout(const ir::Module& m, const ir::Shape& shape,
                                                               const ir::Sharding& s);

// A sharding of `to` (same element count as `from`) under which every rank
// holds the same contiguous range as under `s` on `from`; nullopt when `s`
// is not contiguous or no such sharding of `to` exists.
std::optional<ir::Sharding> sameLayoutSharding(const ir::Module& m, const ir::Shape& from, const ir::Sharding& s,
                                               const ir::Shape& to);

}  // namespace gsl::passes
