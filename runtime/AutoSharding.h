// `gsl plan FILE -np N`: automatic sharding (issue 33, part 2). Searches the
// annotations the program leaves open and the factorisation of its mesh for
// the plan with the least predicted step time (passes/CostModel on the
// machine model, passes/MachineModel) whose per-rank memory (the run's
// estimate, runtime/MemoryEstimate) fits the limit.
//
// What it searches (the "sites"; an annotation the user wrote is kept):
//   - every param and param-group member of the main file without
//     `@shard`: replicated, one dim split over one mesh axis, or (a tensor
//     of two dims or more) two dims over two different axes; a group's
//     stacked layer dim is never split;
//   - every argument of the main file's tensor functions without `@shard`
//     (the batch an input arrives as), the same choices;
//   - the first mesh's axis sizes: every ordered factorisation of NP over
//     its axes (8 over data x model: 8x1, 4x2, 2x4, 1x8), unless
//     --keep-mesh.
// How: each candidate is written into a copy of the source text (the
// user's file is never written), compiled by the real front end and pass
// pipeline, and measured by the memory estimate, which partitions every
// thunk of fn main and the training step as `gsl run` would. Per mesh
// factorisation the search is exhaustive when the sites' choices multiply
// to at most --exhaustive (default 64) plans; otherwise coordinate descent:
// from the better of "nothing annotated" and "every argument's first dim
// over the first axis", each site in turn takes its best choice with the
// others fixed, sweeping until no site changes (at most 4 sweeps). The
// objective is the training step's predicted seconds when fn main trains,
// else the sum over the main file's tensor functions; ties go to the plan
// that sends fewer bytes, then to less memory.
#pragma once
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "frontend/Frontend.h"
#include "passes/MachineModel.h"

namespace gsl::runtime {

struct PlanSearchOptions {
  std::string file;
  std::string text;            // the main file's text, when not read from `file` (the REPL)
  std::string only;            // one function's cost instead of the step's (its arguments searched)
  frontend::Options frontend;  // np, -D, import path
  bool autocast = false, remat = false, updateSharding = true;
  bool mpi = false;            // the ranks are MPI processes (memory estimate, model transport)
  uint64_t maxMemory = 0;      // per rank; 0: no limit
  bool keepMesh = false;
  int64_t exhaustive = 64;     // the most plans per factorisation searched exhaustively
  bool keepCandidates = false;  // PlanResult::candidates (bench/plan_check.sh)
  passes::MachineModel machine;
};

struct PlanScore {
  bool ok = false;             // compiled, partitioned and within the memory limit
  std::string why;             // when not ok
  double seconds = 0;          // predicted step (or functions) time
  double computeSeconds = 0, collectiveSeconds = 0;
  uint64_t bytesSent = 0;      // per rank and step
  uint64_t memoryBytes = 0;    // the run's per-rank estimate
};

struct PlanResult {
  bool ok = false;
  std::string error;           // the written program does not compile, etc.
  std::string text;            // the main file with the chosen annotations
  std::vector<std::string> choices;  // "param w1: @shard(m, [_, model])", "mesh m = [data: 2, model: 2]", ...
  PlanScore written, chosen;
  int64_t evaluated = 0;       // plans compiled and measured
  int64_t sites = 0;
  std::vector<std::string> meshes;   // the factorisations searched
  std::string method;          // "exhaustive" or "coordinate descent"
  double searchSeconds = 0;
  // With keepCandidates: every distinct plan evaluated, as program text,
  // with its score (the chosen one among them).
  struct Candidate {
    std::string text;
    PlanScore score;
    bool chosen = false;
  };
  std::vector<Candidate> candidates;
};

PlanResult searchPlan(const PlanSearchOptions& o);

// The report `gsl plan` prints.
// `showTime`: with the search's wall time (the REPL's transcripts leave it out).
void printPlan(const PlanResult& r, const PlanSearchOptions& o, std::ostream& out, bool showTime = true);

}  // namespace gsl::runtime
