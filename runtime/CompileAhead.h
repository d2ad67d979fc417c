// How a run's functions get compiled (JIT engine): ahead, on threads
// beside the ranks, and what the terminal shows meanwhile.
#pragma once
#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "backend/jit/JitOptions.h"
#include "frontend/Frontend.h"
#include "runtime/Host.h"
#include "runtime/SpmdProgram.h"
#include "support/Trace.h"

namespace gsl::runtime {

// Compile ahead: the run's functions compile on threads beside the ranks,
// so that the functions a rank calls are ready, or under way, when it gets
// there. The walk (loop bodies once, both branches of an if) lists the
// thunks' per-rank programs in the order it meets them; `threads()`
// threads take them in that order, each the next one no one has started:
// a function compiled or being compiled (by a rank, or by another process
// sharing the disk cache) is skipped, and a rank that calls a function
// under way waits for that compile. So the first functions compile at once
// on as many cores. A compile error stays in the cache for the rank that
// calls the function; an error of the walk only shortens the list. The
// destructor stops the threads after the functions under way.
class CompileAhead {
 public:
  // As many threads as the host has processors, at most 8.
  static size_t threads() { return std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 8); }

  // `tracks`: empty, or one trace recorder per thread (--trace).
  CompileAhead(SpmdProgram& spmd, const frontend::CheckedProgram& prog, const backend::JitOptions& jit,
               std::vector<trace::Recorder>& tracks);
  ~CompileAhead() {
    stop_ = true;
    lead_.join();
  }
  CompileAhead(const CompileAhead&) = delete;
  CompileAhead& operator=(const CompileAhead&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::thread lead_;  // walks, then compiles beside the others
};

// The compile line: on a terminal, what is being compiled and how long it
// took (by the first MPI rank only).
void showCompilation(const RunOptions& opts);

}  // namespace gsl::runtime
