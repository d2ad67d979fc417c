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
#include <map>
#include <ostream>
#include <string>

#include "backend/jit/JitOptions.h"
#include "frontend/Frontend.h"
#include "passes/CostModel.h"
#include "support/Diagnostics.h"

namespace gsl::runtime {

// The execution engine of a run (`--engine`): the reference interpreter
// (backend/Interpreter) or the LLVM JIT (backend/jit).
enum class Engine { Interp, Jit };

struct RunOptions {
  uint64_t seed = 0;               // --seed: params and random_uniform
  Engine engine = Engine::Jit;     // --engine (jit, as `gsl run`)
  backend::JitOptions jit;         // the JIT's options (engine and memory estimate)
  std::ostream* out = nullptr;     // where print writes (default std::cout)
  bool mpi = false;                // this process is one MPI rank (under mpirun)
  std::string resume;              // --resume: a checkpoint to start from
  std::string logPath;             // --log: one JSON object per training step
  std::string tracePath;           // --trace: a Chrome/Perfetto trace of the run (runtime/TraceFile.h)
  bool progress = true;            // the training progress line (stderr, rank 0)
  double* commSeconds = nullptr;   // if set: rank 0's time in collectives (benchmarks)
  // If set: the path of the last checkpoint save_checkpoint wrote (rank 0
  // of this process), for the message on Ctrl-C; empty if none was written.
  std::string* lastCheckpoint = nullptr;
  // --checkpoint-every N PATH: after every training step whose optimizer
  // step number t (from 1, continued by --resume) is a multiple of N, a
  // checkpoint as save_checkpoint(PATH) writes it (0: none).
  int64_t checkpointEvery = 0;
  std::string checkpointPath;
  // --max-memory: the most memory one rank may need, in bytes (0: no
  // check). `maxMemorySource` says where the figure came from, for the
  // message ("--max-memory 8G", "the available memory ... over 4 ranks").
  uint64_t maxMemory = 0;
  std::string maxMemorySource;
  // What the estimate's predicted seconds are computed with (`gsl
  // calibrate`'s machine file, passes/MachineModel).
  passes::MachineModel machine;
};

// What one rank of a run needs at its peak, estimated before it starts:
// its blocks of the params, its blocks of the optimizer states (when
// training), and the largest single computation of fn main: its inputs,
// the JIT buffer planner's workspace (backend/jit: liveness-based reuse)
// and its results. Host variables held across statements and buffers of
// the engines themselves are not counted, so this is a lower bound of the
// real peak. Building it partitions every thunk of fn main (as the run
// does; runMain keeps the programs) and plans its buffers; nothing is
// compiled or allocated.
// a + b, saturating at 2^64 - 1 (sums of hostile sizes must not wrap).
inline uint64_t addBytes(uint64_t a, uint64_t b) { return a + b < a ? UINT64_MAX : a + b; }

struct MemoryEstimate {
  uint64_t paramBytes = 0, stateBytes = 0;
  uint64_t activationBytes = 0;  // the largest computation: inputs + workspace + results
  uint64_t inputBytes = 0, workspaceBytes = 0, resultBytes = 0;  // its parts
  SourceLoc where;               // that computation in fn main
  uint64_t total() const { return addBytes(addBytes(paramBytes, stateBytes), activationBytes); }
  // The training step `opt.minimize` runs in fn main (the one with the
  // largest peak when there are several), per rank, as measured for the
  // estimate (`gsl compile --stats json`'s "training", docs/robustness.md).
  struct TrainingStep {
    uint64_t paramBytes = 0;       // every param's block (paramBytes above)
    uint64_t gradBytes = 0;        // the blocks of the step's gradients (its params' shapes and shardings)
    uint64_t stateBytes = 0;       // the blocks of the step's optimizer states
    uint64_t inputBytes = 0;       // the step's own inputs (the batch)
    uint64_t activationBytes = 0;  // the planner's peak workspace of the step's intermediate values
    uint64_t resultBytes = 0;      // the loss, updated params and states the step writes
    // The step's per-rank cost (passes/CostModel) on RunOptions::machine:
    // its FLOPs, predicted seconds and what it sends by collective kind
    // (all_reduce of the gradients, or with weight-update sharding their
    // reduce_scatter and the new params' all_gather).
    passes::Cost cost;
    SourceLoc where;
    uint64_t peak() const {
      return addBytes(addBytes(addBytes(paramBytes, stateBytes), addBytes(inputBytes, activationBytes)), resultBytes);
    }
  };
  std::optional<TrainingStep> training;
};
MemoryEstimate estimateMemory(const frontend::CheckedProgram& prog, const RunOptions& opts);

// Reports (to `diags`) that `est` needs more than opts.maxMemory, at the
// largest computation: "the run needs about 74.5 GiB per rank, more than
// the limit of 7.6 GiB per rank (--max-memory 8G)" and a note with the
// parts. Returns false when it does (and reported), true when it fits.
bool checkMemory(const MemoryEstimate& est, const RunOptions& opts, Diagnostics& diags);

// Runs `fn main` of `prog` on prog.module->np ranks. Returns true on
// success; false after reporting a run-time error to `diags` (also when
// opts.maxMemory is set and the estimate exceeds it: nothing runs then).
// When the process was asked to stop (support/Interrupt.h: Ctrl-C), every
// rank stops at its next safe point (the start of a host statement or
// loop iteration; a checkpoint being written is abandoned and its temp file
// removed) and runMain throws gsl::Interrupted. MPI ranks agree on stopping
// at loop iterations and saves, so none is left waiting in a collective.
bool runMain(const frontend::CheckedProgram& prog, const RunOptions& opts, Diagnostics& diags);

}  // namespace gsl::runtime
