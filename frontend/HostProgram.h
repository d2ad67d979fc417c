// The checked host script: `fn main()` after name resolution and type
// checking. All tensor math in it is lowered to IR "thunk" functions of
// the module (named main.0, main.1, ...); the host statements only move
// tensors between host variables, files, the console and those thunks.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/Function.h"
#include "ir/Sharding.h"
#include "support/SourceLoc.h"

namespace gsl::frontend {

struct Thunk;

// An input of a thunk, produced by the host before the thunk runs.
struct HostLeaf {
  enum Kind {
    Var,        // a host variable
    Load,       // load(path) : T
    Exists,     // exists(path)
    Batch,      // one half of batch(dataset, step): index 0 inputs, 1 targets
    Minimize,   // opt.minimize(f, args...): runs `sub` (a training step), gives the loss (index 0)
                // or, for a loss with auxiliary outputs, aux output `index` of the same step
    StartStep,  // start_step(): the step to resume from (0 without --resume)
    Evaluate,   // evaluate(loss, data): the mean of `sub` (the loss on a validation batch) over the batches
  } kind = Var;
  std::string name;  // Var: host variable; Load/Exists: file path; Batch, Evaluate: dataset
  ir::TensorType type;
  std::optional<ir::Sharding> sharding;  // Load's annotation
  SourceLoc loc;
  int index = 0;     // Batch: 0 inputs, 1 targets; Minimize: 0 the loss, k aux output k
  int64_t limit = 0;  // Evaluate: at most this many batches (batches=; 0: all of them)
  // Batch: the step (none in an Evaluate's loss: its batches are the
  // validation part's, in order); Minimize: the training step; Evaluate:
  // the loss on one batch, whose leaves are the batch's two halves.
  std::shared_ptr<Thunk> sub;
};

// A tensor computation of the host script: run `fn` on the leaves' values.
struct Thunk {
  ir::Function* fn = nullptr;
  std::vector<HostLeaf> leaves;  // one per fn argument, in order
  SourceLoc loc;
};

struct HostStmt {
  enum Kind {
    Let,     // names = value results (new variables in the current scope)
    Assign,  // names[0] = value (existing variable, same type)
    For,     // for names[0] in lo..hi { body }
    If,      // if cond { body } else { elseBody }
    Print,   // print(args): strings and thunks (print_text(args): the same, i32 tensors as bytes)
    Save,    // save(path, value)
    Eval,    // evaluate value, discard (a call for its effects)
    SaveCheckpoint,  // save_checkpoint(path[, optimizer=false]): params and optimizer states
    LoadCheckpoint,  // load_checkpoint(path): the params only (inference)
    LogMetric,       // log_metric("name", value): names[0] = a scalar for the progress line and --log
    LogMoe,          // log_moe("name", stats): MoE telemetry (stdlib/moe.gsl moe_stats) for --log, the line, the trace
  } kind;
  SourceLoc loc;
  std::vector<std::string> names;
  Thunk value, lo, hi, cond;
  std::vector<HostStmt> body, elseBody;
  struct PrintArg {
    std::string text;              // a string argument, or
    std::optional<Thunk> value;    // a tensor argument
    bool bytes = false;            // print_text: the i32 tensor's elements written as the bytes they are
  };
  std::vector<PrintArg> printArgs;
  std::string path;  // Save, SaveCheckpoint, LoadCheckpoint
  bool optimizer = true;  // SaveCheckpoint: write the optimizer states and step counters
};

// `dataset NAME = copy_task(batch=, seq=, vocab=)`, `reverse_task(...)`,
// `npy_tokens("file.npy", batch=, seq=[, vocab=])`,
// `npy_pairs("x.npy", "y.npy", batch=, features=)` (supervised: inputs
// f32[batch, features], labels i32[batch]) or
// `text_bytes("a.txt"[, "b.txt", ...], batch=, seq=[, split=])` (byte
// tokens, vocab 256; the first `split` of the text trains, the rest
// validates).
struct Dataset {
  std::string name, kind, path, labelsPath;  // kind: copy, reverse, npy, pairs, text
  std::vector<std::string> paths;             // text: the files, in order
  int64_t batch = 0, seq = 0, vocab = 0, features = 0;
  double split = 1;                           // text: the training share
  SourceLoc loc;
};

struct HostProgram {
  std::vector<Dataset> datasets;
  bool hasMain = false;
  SourceLoc loc;
  std::vector<HostStmt> body;
};

}  // namespace gsl::frontend
