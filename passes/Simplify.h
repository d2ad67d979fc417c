#pragma once
// Simplification of a per-rank program: folding of what constants decide,
// common-subexpression elimination and dead-code elimination.
//
// The partitioner reshards each use of a value on its own, and autodiff
// recomputes what the forward pass had: a training step then gathers or
// all_to_all's the same tensor twice (the backward pass needs the expert
// outputs that the forward combine already moved). Every op of a tensor
// function is pure and every rank runs the same program, so two ops with
// the same kind, operands, attributes and result type compute the same
// value, collectives included; the later one is dropped. Ops whose results
// nothing uses are dropped too (all ranks drop the same collectives).
// Comparisons of scalar constants fold, and a `where` whose condition is a
// constant becomes the branch it picks, so a const switch in a model
// (`where(DENSE == 1, dense, moe)`) leaves only the chosen path. A
// shard_slice, all_gather, reduce_scatter or all_to_all over mesh axes of
// size 1 is its operand.
#include "ir/Function.h"

namespace gsl::passes {

// Rewrites `f` in place; returns the number of ops removed.
int simplify(ir::Function& f);

}  // namespace gsl::passes
