// Runs fn main on the ranks of a run: the choice of communicator (threads
// of this process, or MPI ranks), the memory check before anything runs,
// the compile-ahead threads beside the ranks, the --trace file after them,
// and the errors of the ranks as diagnostics. What a rank does is
// runtime/HostRunner.cpp.
#include "runtime/Host.h"

#include <iostream>
#include <optional>

#include "runtime/CompileAhead.h"
#include "runtime/HostRunner.h"
#include "runtime/MemoryEstimate.h"
#include "runtime/MpiComm.h"
#include "runtime/SpmdProgram.h"
#include "runtime/TestFaults.h"
#include "runtime/ThreadComm.h"
#include "runtime/TraceFile.h"
#include "support/Interrupt.h"

namespace gsl::runtime {

bool runMain(const frontend::CheckedProgram& prog, const RunOptions& opts, Diagnostics& diags) {
  std::ostream& out = opts.out ? *opts.out : std::cout;
  showCompilation(opts);
  SpmdProgram spmd(prog, opts.seed);
  spmd.setRanksHere(opts.mpi ? 1 : (int)prog.module->np);
  // The memory check partitions every thunk; the run reuses those programs.
  if (opts.maxMemory && !checkMemory(estimateMemory(spmd, prog, opts), opts, diags)) return false;
  MpiComm* mpiComm = nullptr;
  // --trace: one recorder per rank of this process, current on its thread
  // while the rank runs (support/Trace.h); times count from `traceOrigin`.
  const bool tracing = !opts.tracePath.empty();
  std::vector<trace::Recorder> recorders(tracing ? (size_t)prog.module->np : 0);
  int64_t traceOrigin = trace::nowNs();
  // The JIT's compile-ahead threads, from the ranks' start until their
  // end (joined before the trace file is written), and their trace tracks.
  const bool compilingAhead = opts.engine == Engine::Jit;
  std::vector<trace::Recorder> aheadTracks(tracing && compilingAhead ? CompileAhead::threads() : 0);
  std::optional<CompileAhead> ahead;
  auto startAhead = [&] {
    if (compilingAhead) ahead.emplace(spmd, prog, opts.jit, aheadTracks);
  };
  auto body = [&](int rank, backend::Communicator& realComm) {
    // TEST-ONLY: GSL_TEST_FAULT may wrap the communicator (runtime/TestFaults.h).
    std::unique_ptr<backend::Communicator> faulty = faultInjectingComm(realComm, rank);
    backend::Communicator& comm = faulty ? *faulty : realComm;
    struct Tracing {
      Tracing(trace::Recorder* r) { trace::current = r; }
      ~Tracing() { trace::current = nullptr; }
    } tracingGuard(tracing ? &recorders[(size_t)rank] : nullptr);
    runRank(spmd, prog.host, opts, rank, comm, out, mpiComm, diags);
    if (rank == 0 && opts.commSeconds) *opts.commSeconds = comm.stats.seconds;
  };
  auto report = [&](std::exception_ptr e) {
    try {
      std::rethrow_exception(e);
    } catch (const RankError& x) {
      diags.error(x.loc, x.what());
    } catch (const backend::CommError& x) {
      diags.error({}, x.what());
    } catch (const UserError& x) {
      diags.error({}, x.what());
    } catch (const Interrupted&) {
      throw;
    } catch (const std::bad_alloc&) {
      diags.error({}, "out of memory: a tensor could not be allocated (the estimate before the run, which "
                      "--max-memory limits, counts only the largest computation)");
    } catch (const std::exception& x) {
      diags.error({}, x.what());  // never a crash: whatever it is, reported
    }
  };
  if (opts.mpi) {
    // The compile-ahead threads start before MPI_Init (0.1 s or more), which
    // they do not need (they make no MPI calls; MPI_THREAD_FUNNELED) -
    // except with --trace, where they start after the barrier that sets
    // the ranks' common time origin, so that their events come after it.
    if (!tracing) startAhead();
    MpiComm comm;
    mpiComm = &comm;
    try {
      if (tracing) {  // the ranks' clocks start together (to the barrier's skew)
        comm.barrier();
        traceOrigin = trace::nowNs();
        startAhead();
      }
      body(comm.rank(), comm);
      ahead.reset();
      if (tracing) {
        auto all = gatherTraceEvents(
            comm, rankTraceEvents(comm.rank(), recorders[(size_t)comm.rank()], traceOrigin, aheadTracks));
        if (comm.rank() == 0) writeTraceFile(opts.tracePath, all);
      }
    } catch (const Interrupted&) {
      throw;  // every rank agreed to stop: nothing to abort
    } catch (...) {
      report(std::current_exception());
      diags.print(std::cerr);
      std::cerr.flush();
      comm.abort(diags.all().empty() ? "error" : diags.all().back().message);
    }
    return !diags.hasErrors();
  }
  startAhead();
  auto errors = runRanks((int)prog.module->np, body);
  ahead.reset();
  if (auto e = rootCause(errors)) {
    report(e);  // rethrows Interrupted
    return false;
  }
  if (tracing) {
    const std::vector<trace::Recorder> noTracks;
    std::vector<std::string> all;
    for (size_t r = 0; r < recorders.size(); ++r)
      all.push_back(rankTraceEvents((int)r, recorders[r], traceOrigin, r == 0 ? aheadTracks : noTracks));
    try {
      writeTraceFile(opts.tracePath, all);
    } catch (const std::exception& x) {
      diags.error({}, x.what());
      return false;
    }
  }
  return true;
}

}  // namespace gsl::runtime
