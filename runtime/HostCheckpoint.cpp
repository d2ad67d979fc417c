// How a checkpoint is cut into groups of tensors gathered one at a time.
#include "runtime/HostCheckpoint.h"

namespace gsl::runtime {

std::vector<std::pair<size_t, size_t>> checkpointGroups(const std::vector<uint64_t>& bytes) {
  std::vector<std::pair<size_t, size_t>> r;
  for (size_t lo = 0; lo < bytes.size();) {
    size_t hi = lo + 1;
    uint64_t sum = bytes[lo];
    while (hi < bytes.size() && sum + bytes[hi] <= kCheckpointGroupBytes) sum += bytes[hi++];
    r.push_back({lo, hi});
    lo = hi;
  }
  return r;
}

}  // namespace gsl::runtime
