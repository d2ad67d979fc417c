// SPMD partitioner: rewrites a global function whose values carry
// shardings (after passes/ShardingPropagation) into ONE per-rank program
// with local shapes, parameterised by the rank at run time (collectives
// and shard_slice find the rank's group and block when they run). So the
// program, and the time to build it, do not depend on the number of ranks.
//
// Each op is partitioned by the rule its op-table row names
// (passes/PartitionRules.h, working through the Partitioner of
// passes/Partitioner.h); the walk itself holds no per-op code. The generic plan reads the op's
// dimension labelling (its sharding rule, ir/ShardRules.h): the split of
// every label is taken from the op's result sharding (and, for contracted
// labels, from the operands); contractions instead cost every legal plan
// and take the cheapest (fewest bytes, then FLOPs, then memory); a reshape
// whose operand already lies as its result would (the same contiguous
// block on every rank) runs locally. Operands are resharded to the plan,
// and the op runs on local blocks. Contracting a split label leaves a
// partial sum, resolved where a consumer needs the value: by reduce_scatter
// when the consumer wants it split along that axis, else by all_reduce.
//
// A dim its axes do not divide is padded (docs/sharding.md, "Uneven
// dims"): blocks of ceil(size / n) rows; sums and contractions over a
// padded split dim mask the padding to 0 (pad_mask) and a mean divides by
// the true count; reshards drop the padding (slice) or pad to whole blocks
// (concat with zeros) around their collectives.
//
// Resharding between two shardings picks, dim by dim:
//   replicated -> split          shard_slice (local, no traffic)
//   split dim moves to another   all_to_all
//   split -> unsplit             all_gather
//   partial -> split             reduce_scatter
//   partial -> replicated        all_reduce
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/Module.h"

namespace gsl::passes {

// `global` must have a sharding decision on its values (unannotated ones
// are replicated). Results are resharded to `global.resultShardings` where
// given, else to their propagated sharding; the per-rank function's
// resultShardings record how each result lies.
std::unique_ptr<ir::Function> partitionFunction(const ir::Module& m, const ir::Function& global);

// What one plan of an op costs one rank: bytes sent by the operands'
// reshards and the result's reshard to its decided sharding, FLOPs of the
// local op (passes/CostModel), and the bytes the local op holds (its local
// operands and result).
struct PlanCost {
  uint64_t bytes = 0;
  uint64_t flops = 0;
  uint64_t memory = 0;
};

// One candidate plan: the layout each operand is resharded to, and the
// local result's layout (partial axes = sums left pending).
struct PlanCandidate {
  std::vector<ir::Sharding> operands;
  ir::Sharding result;
  PlanCost cost;
  bool chosen = false;
};

struct OpPlans {
  bool found = false;  // false: `v`'s op chooses no plan (not a contraction, sum, mean, take or a shift's concat)
  std::vector<PlanCandidate> candidates;
  std::string why;     // why the chosen one won, for a person
};

// Partitions `global` as partitionFunction does and reports the candidate
// plans of the op defining `v` (a value of `global`).
OpPlans explainPlans(const ir::Module& m, const ir::Function& global, const ir::Value* v);

}  // namespace gsl::passes
