// `gsl calibrate`: measures this machine for the cost model
// (passes/MachineModel) and writes the machine file beside the compile cache.
//
//   gsl calibrate [-np N] [--quick]   the JIT's GEMM rate per shape class,
//                                     the elementwise rate, the memory
//                                     bandwidth and the per-op overhead on
//                                     one thread, then each collective kind
//                                     on N thread ranks (default 2)
//   gsl calibrate --mpi [-np N]       each collective kind on N MPI ranks
//                                     (shared memory on this host, as gsl
//                                     run --mpi), added to the file as its
//                                     "mpi" section
//
// A collective's latency is its time per call at 256 bytes; its bandwidth
// the op table's byte volume (what one rank sends, passes/CostModel) of a
// 4 MiB input over the time above that latency. Every figure is the median
// of rounds after a warm-up call (bench/Paired.h's rule: a first loop pays
// for fresh pages).
#pragma once
#include <cstdint>
#include <ostream>
#include <string>

#include "backend/Communicator.h"
#include "passes/MachineModel.h"

namespace gsl::runtime {

struct CalibrateOptions {
  int64_t np = 2;
  bool quick = false;   // fewer rounds and 256 KiB inputs (the tests)
  std::string dir;      // where machine.json goes
};

// The compute rates of this machine (one thread, the JIT), into `m`.
void measureCompute(passes::MachineModel& m, bool quick, std::ostream& log);

// Each collective kind's latency and bandwidth on `comm` (every rank of its
// world calls this; the figures are rank 0's).
void measureCollectives(backend::Communicator& comm, passes::MachineModel& m, bool quick, std::ostream& log);

// `gsl calibrate` on thread ranks: compute and collectives, written to
// o.dir (the file's other transport sections kept). Returns the exit code.
int calibrateThreads(const CalibrateOptions& o, std::ostream& out);

// `gsl calibrate --mpi` in one rank started by mpirun: the collectives on
// MPI; rank 0 adds them to o.dir's file (measuring the compute rates too
// when there is no file yet). Returns the exit code.
int calibrateMpiRank(const CalibrateOptions& o, std::ostream& out);

}  // namespace gsl::runtime
