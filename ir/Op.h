// An operation: kind (a row of the op table), operands, results, attrs, and
// for the `loop` op a body.
//
// Every op but `loop` has exactly one result, `result`. A `loop` has several
// (its final carried values, then its stacked per-iteration outputs):
// `results` lists them all, and `result` is always `results[0]`, so code
// that handles single-result ops keeps reading `op->result` (docs/loops.md).
#pragma once
#include <memory>
#include <vector>

#include "ir/Attr.h"
#include "ir/OpTable.h"
#include "ir/Value.h"
#include "support/SourceLoc.h"

namespace gsl::ir {

struct Function;
struct CollectiveGroups;

struct Op {
  OpKind kind;
  std::vector<Value*> operands;
  Value* result = nullptr;       // == results[0]
  std::vector<Value*> results;   // all results (one for every op but loop)
  AttrMap attrs;
  SourceLoc loc;  // the source expression this op came from
  // The loop body (a function of its own, isolated from the enclosing one:
  // it reads only its arguments); null for every other op.
  std::unique_ptr<Function> body;
  // A collective of a per-rank program: its groups over its mesh and axes,
  // for every rank (passes/ResolveGroups); null before, and for other ops.
  // Never printed: the mesh and axes attributes say the same.
  std::shared_ptr<const CollectiveGroups> groups;

  const OpInfo& info() const { return opInfo(kind); }
  Op();
  ~Op();
};

}  // namespace gsl::ir
