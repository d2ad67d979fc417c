// Local-partitioning rules: what the SPMD partitioner (passes/SpmdPartitioner)
// does to each op on the local blocks of its operands. The op table's
// `partition` column (ir/OpTable.h) names the rule of each op; this file
// holds them, one function per rule.
//
// The rules work through the Partitioner (passes/Partitioner.h), which owns
// the generic machinery: the plan (which dimension labels of the op's
// sharding rule, ir/ShardRules.h, are split over which mesh axes, chosen
// from the result's decided sharding and, for contractions, by the bytes
// the operands' reshards would send), resharding with collectives, and
// appending typed ops to the per-rank function. A rule decides what the op
// becomes locally: most ops are the same op on their local blocks
// (partitionLocal); a few need more (a local `shape` attribute, a rescaled
// mean, a param read at its storage sharding, a halo exchange). Collectives
// have no rule: they are made by partitioning.
#pragma once
#include "ir/OpTable.h"

namespace gsl::passes::partitioner {

class Partitioner;

// The rules (the table's `partition` column), each of signature
// ir::PartitionRule:
//   partitionLocal       the same op, same attributes, on the planned blocks
//   partitionLocalShape  reshape, broadcast: the same, with the `shape`
//                        attribute set to the local result shape
//   partitionMean        mean: the local mean, times each rank's share of the
//                        elements when reduced dims are split (partial sums)
//   partitionParam       param: read at its storage sharding
//   partitionConstant    constant: the local block of the decided sharding
//   partitionCopy        copy (@shard on an expression): a reshard only
//   partitionWhole       random_uniform, iota (arange): every rank computes
//                        the whole result from replicated operands (the
//                        global random stream, the global indices) and
//                        keeps its block
//   partitionSlice       slice: as partitionLocal, or folded into the concat
//                        that uses it when that concat is a shift or a
//                        window (below); along a split dim whose size it
//                        changes, a window itself
//   partitionTake        take: as partitionLocal; with the table's rows split
//                        (a partial-sum plan), each rank gathers the ids in
//                        its row range and zeros the others (Megatron's
//                        vocab-parallel embedding), the sum pending
//   partitionConcat      concat: a shift or rotation of one value along a
//                        split dim (concat of two slices of it, or of a slice
//                        and a splat fill) is a halo exchange: each rank gets
//                        only the boundary rows it lacks from its neighbour
//                        (collective_permute), and masks the fill in; a
//                        pad (fill, x, fill) that changes the dim's size is
//                        a window: each rank receives the largest halo any
//                        rank needs and aligns its rank-dependent offset
//                        with one where per bit; the all_gather plan is
//                        kept where it sends fewer bytes
//   partitionDropout     dropout: the same op on the local block, its key
//                        plus this rank's block offsets (its index in the
//                        group splitting a dim times the local block size,
//                        padded blocks included) and `shape` the global
//                        shape, so each rank draws its block of the global
//                        mask
#define GSL_DECLARE_PARTITION_RULE(name) void partition##name(Partitioner& b, const ir::Op& op);
GSL_PARTITION_RULES(GSL_DECLARE_PARTITION_RULE)
#undef GSL_DECLARE_PARTITION_RULE

// Runs rule `rule` (the op's row's) on `op`; an internal error for None.
void applyPartitionRule(ir::PartitionRule rule, Partitioner& b, const ir::Op& op);

}  // namespace gsl::passes::partitioner
