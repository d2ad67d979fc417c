// An SSA value: produced once, by an op result or as a function argument.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "ir/Sharding.h"
#include "ir/Type.h"
#include "support/SourceLoc.h"

namespace gsl::ir {

struct Op;

struct Value {
  int id = -1;                       // unique within its function, printed as %id
  TensorType type;
  std::optional<Sharding> sharding;  // user annotation or (later) propagated
  SourceLoc shardingLoc;             // where the user annotation was written
  // (Why propagation gave it its sharding is not kept here: the REPL asks
  // propagation for it, passes/ShardingProvenance.h.)
  Op* def = nullptr;                 // defining op; nullptr for arguments
  int argIndex = -1;                 // >= 0 for function arguments
  // The source name of a let-bound value or a function argument (set by
  // the front end for the REPL's :sharding / :show; never printed).
  std::string name;
  // Every let (or loop-carried) name the value has in the program, by its
  // call path inside the function being lowered: "q" for a let of the
  // function itself, "logits.trunk.block.attn.q" for let q of fn attn
  // inlined through those calls (also into a host thunk: the REPL's call
  // paths, repl/CallPaths.h); in a training step also "grad(w)" for the
  // gradient of param w and "opt.m(w)" for state m of optimizer opt
  // (passes/Training.cpp). Innermost first; never printed.
  std::vector<std::string> callPaths;
};

}  // namespace gsl::ir
