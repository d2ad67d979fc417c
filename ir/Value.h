// An SSA value: produced once, by an op result or as a function argument.
#pragma once
#include <optional>

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
  // (Its source names, for the REPL, are not kept here either: the
  // function that owns it keeps them, Function::names, ir/ValueNames.h.)
};

}  // namespace gsl::ir
