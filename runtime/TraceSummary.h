// `gsl trace summary FILE`: a trace file of `gsl run --trace` (runtime/TraceFile.h,
// docs/trace.md) as tables for a person, like torch.profiler's
// key_averages().table(): the tensor-function calls (compile and run time
// apart), the collectives with their bytes and bandwidth, the compiles and
// their phases, other events (data reads), and each rank's time in calls,
// compiles, collectives and waits. Each table is sorted by total time.
#pragma once
#include <ostream>
#include <string>

namespace gsl::runtime {

struct TraceSummaryOptions {
  // Rows per rank (a `rank` column) instead of summed over the ranks.
  bool byRank = false;
};

// Prints the summary of the trace file `path` to `out` and returns 0. A file
// that cannot be read, is not JSON, or is not such a trace: one line
// "gsl: error: ..." on `err`, nothing on `out`, and 1.
int traceSummary(const std::string& path, const TraceSummaryOptions& options, std::ostream& out, std::ostream& err);

}  // namespace gsl::runtime
