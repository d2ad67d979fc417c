// How a checkpoint is gathered and written on the ranks: a group of
// tensors at a time (the run's writeCheckpoint, and the memory estimate's
// share of it).
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace gsl::runtime {

// A checkpoint is gathered and written a group of consecutive tensors at a
// time: at most this many bytes whole per rank, or one larger tensor alone.
inline constexpr uint64_t kCheckpointGroupBytes = uint64_t(64) << 20;

// The checkpoint's groups (kCheckpointGroupBytes): [lo, hi) ranges of
// consecutive tensors of these whole sizes.
std::vector<std::pair<size_t, size_t>> checkpointGroups(const std::vector<uint64_t>& bytes);

}  // namespace gsl::runtime
