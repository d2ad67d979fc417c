// Runs a checked program's host script (`fn main`) on N ranks, SPMD: every
// rank runs the same host script; its tensor math (IR thunks) is sharded
// by propagation, partitioned into ONE per-rank program (compiled once,
// shared by all ranks) and executed on the rank's blocks, with collectives
// between ranks. Ranks are threads of this process (the default) or MPI
// processes (`--mpi`, or a process started by mpirun).
//
// Host values: print, if, for and save see whole (replicated) values; rank
// 0 prints and writes files. `load` gives each rank its block of the file
// (per its @shard annotation). Params are initialised from their global
// element indices and each rank keeps its block, so every -np and sharding
// computes the same numbers.
//
// Training: `opt.minimize(loss, ...)` runs the expanded training step
// (passes/Training), writes the new params back and keeps the optimizer's
// states (sharded like their params) and step counter on each rank.
// `save_checkpoint(path)` gathers params, states and step counters into one
// safetensors file (written atomically by rank 0); `--resume FILE` restores
// them before fn main runs, and `start_step()` gives the step to continue
// from, so a resumed run continues bit for bit. Each step updates a
// progress line (step, loss, tokens/s, ETA: in place on a terminal, plain
// lines otherwise) and, with --log, appends a JSON line.
//
// Run-time user errors (a missing or mismatched .npy file, an index out of
// range, a checkpoint that does not fit) become diagnostics at their source
// location.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>

#include "frontend/Frontend.h"
#include "support/Diagnostics.h"

namespace gsl::runtime {

struct RunOptions {
  uint64_t seed = 0;               // --seed: params and random_uniform
  std::string engine = "interp";   // --engine
  std::ostream* out = nullptr;     // where print writes (default std::cout)
  bool mpi = false;                // this process is one MPI rank (under mpirun)
  std::string resume;              // --resume: a checkpoint to start from
  std::string logPath;             // --log: one JSON object per training step
  bool progress = true;            // the training progress line (stderr, rank 0)
  double* commSeconds = nullptr;   // if set: rank 0's time in collectives (benchmarks)
};

// Runs `fn main` of `prog` on prog.module->np ranks. Returns true on
// success; false after reporting a run-time error to `diags`.
bool runMain(const frontend::CheckedProgram& prog, const RunOptions& opts, Diagnostics& diags);

}  // namespace gsl::runtime
