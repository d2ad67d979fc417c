// TEST-ONLY fault injection, for the fault tests (tests/faults/). Never
// set in normal use.
//
// GSL_TEST_FAULT is a comma-separated list of KEY=VALUE:
//   mismatch_rank=R        rank R's first all_reduce is issued as an
//                          all_gather of the same bytes: a collective
//                          mismatch between ranks, as a runtime bug would
//                          cause, which the communicators must detect
//   checkpoint_pause_ms=N  save_checkpoint pauses N ms after writing the
//                          header of its temp file (a window in which a
//                          signal lands mid-write)
// Unknown keys are ignored.
#pragma once
#include <memory>

#include "backend/Communicator.h"

namespace gsl::runtime {

struct TestFaults {
  int mismatchRank = -1;
  int checkpointPauseMs = 0;
};

// GSL_TEST_FAULT, read once per process.
const TestFaults& testFaults();

// Null unless a communicator fault applies to `rank`; else a communicator
// that forwards every call to `inner` and injects the fault.
std::unique_ptr<backend::Communicator> faultInjectingComm(backend::Communicator& inner, int rank);

}  // namespace gsl::runtime
