// `gsl run --trace FILE`: the ranks' timed events (support/Trace.h) as one
// Chrome/Perfetto trace-event JSON file (docs/trace.md):
//
//   {"traceEvents": [...], "displayTimeUnit": "ms"}
//
// Each rank is a process (pid = rank) with one thread (tid 0), named by
// metadata events ("ph": "M"); its events are complete events ("ph": "X",
// ts and dur in microseconds from the start of the run) of the categories
// compile, function, collective and wait, and counter events ("ph": "C",
// category moe: log_moe's telemetry, rank 0 only). The compile-ahead threads of a
// process (runtime/CompileAhead.h) are further threads (tid 1, 2, ...) of its
// first rank. Under MPI, rank 0 gathers the other ranks' events and writes the
// one file.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "support/Trace.h"

namespace gsl::backend {
class Communicator;
}

namespace gsl::runtime {

// Why `path` cannot be written as a trace file (its directory is missing,
// or it is a directory), or "" when it can. Checked before a run starts.
std::string traceFileProblem(const std::string& path);

// The trace events (metadata and complete events) of rank `rank`, with
// times relative to `originNs` (support/Trace.h nowNs), as a JSON array;
// the events of `ahead`, the process's compile-ahead threads, are further
// threads of that process (tid 1, 2, ...: "compile ahead 1", ...; a thread
// without events is left out).
std::string rankTraceEvents(int rank, const trace::Recorder& rec, int64_t originNs,
                            const std::vector<trace::Recorder>& ahead = {});

// Writes the trace file from the ranks' event arrays (rankTraceEvents),
// in rank order: to a temporary file next to `path`, renamed over it at
// the end, so an existing file is replaced only by a complete one. Throws
// std::runtime_error when it cannot.
void writeTraceFile(const std::string& path, const std::vector<std::string>& rankEvents);

// `gsl compile --time-passes`: where `totalNs` of compile time went, from
// one thread's events (support/Trace.h): the front end ("frontend"), each
// global pass ("pass"), each per-rank pass summed over the rank programs
// ("rank pass"), the JIT's phases ("jit": lower, optimise, codegen, link)
// with their seconds, share of the total and count, then what is left
// ("other"), the total, and the kernels of the compiled programs (the
// "compile" events' arguments). A table for a person; the rows' order is
// fixed by category, then by first appearance.
std::string compileTimeReport(const trace::Recorder& rec, int64_t totalNs);

// MPI: every rank calls this with its event array; rank 0 gets all ranks'
// arrays in rank order (the others get an empty vector). Collective over
// the world of `comm`.
std::vector<std::string> gatherTraceEvents(backend::Communicator& comm, const std::string& mine);

}  // namespace gsl::runtime
