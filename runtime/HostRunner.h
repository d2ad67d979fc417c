// How one rank runs the host script (`fn main`): statements in order,
// loops run, the branch taken, each thunk on the rank's engine, with the
// rank's batches (runtime/Batches.h), training steps
// (runtime/TrainingStep.h), checkpoints (runtime/HostCheckpoint.h) and
// progress line (runtime/Progress.h).
#pragma once
#include <ostream>

#include "backend/Communicator.h"
#include "frontend/Frontend.h"
#include "runtime/Host.h"
#include "runtime/MpiComm.h"
#include "runtime/SpmdProgram.h"
#include "support/Diagnostics.h"

namespace gsl::runtime {

// Runs `host` as rank `rank` of `prog`, talking to the others over
// `comm`; rank 0 prints to `out`. `mpi`: this rank's MPI communicator when
// ranks are MPI processes (to agree on stopping), else null. `diags`
// renders the warnings rank 0 prints while it runs. User errors throw
// RankError; an interrupt throws gsl::Interrupted at a safe point.
void runRank(SpmdProgram& prog, const frontend::HostProgram& host, const RunOptions& opts, int rank,
             backend::Communicator& comm, std::ostream& out, MpiComm* mpi, const Diagnostics& diags);

}  // namespace gsl::runtime
