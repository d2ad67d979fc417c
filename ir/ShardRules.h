// Sharding rules of the ops, as one "dimension labelling" per op (the
// einsum view GSPMD uses): every dim of every operand and of the result
// gets a label; dims that share a label are the same logical dimension and
// must be split the same way. A label in the operands but not in the
// result is contracted. Some labels may not be split at all (the axis of a
// softmax or cumsum, a broadcast size-1 dim, a slice's axis): the
// partitioner gathers them first.
//
// This is the sharding column of the op table (ir/OpTable.h): propagation
// (passes/ShardingPropagation) and the SPMD partitioner (passes/SpmdPartitioner)
// both read it, so an op's sharding behaviour is defined once, here.
#pragma once
#include <set>
#include <vector>

#include "ir/Op.h"

namespace gsl::ir {

struct DimLabels {
  std::vector<std::vector<int>> operands;  // per operand, per dim
  std::vector<int> result;                 // per result dim
  std::set<int> unsplittable;              // labels that must stay unsplit
  // Contracted labels may be split, giving a partial sum to reduce later
  // (sum, mean, matmul, einsum). Otherwise contracted labels are unsplittable.
  bool partialSum = false;
};

// Labels of `op` given its operands' and result's (global or local) types.
DimLabels dimLabels(const Op& op);

}  // namespace gsl::ir
