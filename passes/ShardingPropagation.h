// Sharding propagation (GSPMD-style): gives every value of a function a
// sharding, starting from the user's annotations (function arguments,
// params, load, `expr @shard(...)`), which are hard constraints and never
// change.
//
// Algorithm: repeat { a forward pass over the ops in program order, then a
// backward pass in reverse order } until nothing changes. Each op's rule is
// its dimension labelling (ir/ShardRules.h): dims with the same label are
// split the same way. A value takes the first sharding proposed to it.
// Conflicts are settled by a fixed priority:
//   1. user annotations win over anything propagated;
//   2. among an op's operands proposing different axes for one label, the
//      operand with the most split dims wins (ties: the earlier operand);
//   3. forward proposals (from operands) come before backward ones (from
//      users) within one round;
//   4. a proposal that would use a mesh axis twice in one value, split a
//      dim that is not divisible by its axes, or split an unsplittable
//      label drops that dim to unsplit.
// Values nothing reaches stay replicated (no sharding). A value whose
// sharding has an empty mesh name is fixed as replicated (a host input that
// lies whole on every rank).
//
// With `provenance`, the step that gave each value its sharding is recorded
// there (passes/ShardingProvenance.h: the REPL's :sharding explains a value
// by it); entries already in it (weight-update sharding's) count as
// propagated, not annotated. The shardings are the same with or without it.
#pragma once
#include "ir/Module.h"
#include "passes/ShardingProvenance.h"

namespace gsl::passes {

void propagateShardings(const ir::Module& m, ir::Function& f, ShardingProvenance* provenance = nullptr);
void propagateShardings(ir::Module& m);  // every function

}  // namespace gsl::passes
