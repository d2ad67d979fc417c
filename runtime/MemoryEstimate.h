// What one rank of a run needs at its peak, estimated before it starts
// (MemoryEstimate, estimateMemory and checkMemory in runtime/Host.h):
// the walk of fn main without running, measuring every thunk's per-rank
// program.
#pragma once
#include "frontend/Frontend.h"
#include "runtime/Host.h"
#include "runtime/SpmdProgram.h"

namespace gsl::runtime {

// estimateMemory with the run's SpmdProgram: the per-rank programs it
// builds stay in `spmd` for the run.
MemoryEstimate estimateMemory(SpmdProgram& spmd, const frontend::CheckedProgram& prog, const RunOptions& opts);

}  // namespace gsl::runtime
