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

// An input of a thunk, produced by the host before the thunk runs.
struct HostLeaf {
  enum Kind { Var, Load, Exists } kind = Var;
  std::string name;  // Var: host variable; Load/Exists: file path
  ir::TensorType type;
  std::optional<ir::Sharding> sharding;  // Load's annotation
  SourceLoc loc;
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
    Print,   // print(args): strings and thunks
    Save,    // save(path, value)
    Eval,    // evaluate value, discard (a call for its effects)
  } kind;
  SourceLoc loc;
  std::vector<std::string> names;
  Thunk value, lo, hi, cond;
  std::vector<HostStmt> body, elseBody;
  struct PrintArg {
    std::string text;              // a string argument, or
    std::optional<Thunk> value;    // a tensor argument
  };
  std::vector<PrintArg> printArgs;
  std::string path;  // Save
};

struct HostProgram {
  bool hasMain = false;
  SourceLoc loc;
  std::vector<HostStmt> body;
};

}  // namespace gsl::frontend
