// Sharding rules of the ops, as one "dimension labelling" per op (the
// einsum view GSPMD uses): every dim of every operand and of the result
// gets a label; dims that share a label are the same logical dimension and
// must be split the same way. A label in the operands but not in the
// result is contracted. Some labels may not be split at all (the axis of a
// softmax or cumsum, a broadcast size-1 dim, a slice's axis): the
// partitioner gathers them first.
//
// Each function below is a sharding rule, the `shard` column of the op
// table (ir/OpTable.h): a row names the rule that labels its op. Sharding
// propagation (passes/ShardingPropagation) and the SPMD partitioner
// (passes/SpmdPartitioner) reach the rules only through dimLabels(), which
// reads the table. Collectives have no rule: they exist only in per-rank
// programs, after partitioning.
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

// Labels of `op` given its operands' and result's (global or local) types:
// the op's row's sharding rule (an internal error for an op without one).
DimLabels dimLabels(const Op& op);

// The rules (the table's `shard` column), each of signature ir::ShardRule:
//   shardSource         param, constant: result dims free
//   shardBroadcasting   elementwise ops and broadcast: NumPy broadcasting
//                       (a size-1 dim broadcast to a larger one is unsplittable)
//   shardMatMul         batch dims, m, n; k contracted (partial sums)
//   shardEinsum         one label per letter; contracted letters give partial
//                       sums, a letter repeated in one operand is unsplittable
//   shardPartialReduce  sum, mean: reduced dims may be split (partial sums)
//   shardReduce         max, min: reduced dims unsplittable
//   shardArgMax         the `axis` unsplittable and dropped from the result
//   shardAlongAxis      softmax, log_softmax, cumsum, slice, concat: same
//                       labels in and out, the `axis` unsplittable
//   shardAlongAxes      layer_norm: same, for the int-list `axis`
//   shardReshape        groups of equal element count share their major dim
//   shardTranspose      labels follow `perm`
//   shardOneHot         the new class dim unsplittable
//   shardTake           the table's row dim contracted (split: partial sums)
//   shardRandom         result dims free, the seed scalar
//   shardDropout        x and the result share labels (elementwise); the
//                       key vector unsplittable (replicated)
#define GSL_SHARD_RULES(X)                                                          \
  X(shardSource) X(shardBroadcasting) X(shardMatMul) X(shardEinsum)                \
  X(shardPartialReduce) X(shardReduce) X(shardArgMax) X(shardAlongAxis)            \
  X(shardAlongAxes) X(shardReshape) X(shardTranspose) X(shardOneHot) X(shardTake) \
  X(shardRandom) X(shardDropout)
#define GSL_DECLARE_SHARD_RULE(name) DimLabels name(const Op& op);
GSL_SHARD_RULES(GSL_DECLARE_SHARD_RULE)
#undef GSL_DECLARE_SHARD_RULE

}  // namespace gsl::ir
