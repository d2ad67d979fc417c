// Local-partitioning rules: what the SPMD partitioner (passes/SpmdPartitioner)
// does to each op on the local blocks of its operands, the `partition`
// column of the op table (ir/OpTable.h).
//
// The partitioner owns the generic machinery and offers it to the rules
// through a LocalBuilder: the plan (which dimension labels of the op's
// sharding rule, ir/ShardRules.h, are split over which mesh axes, chosen
// from the result's decided sharding and, for contractions, by the bytes
// the operands' reshards would send), resharding with collectives, and
// appending typed ops to the per-rank function. A rule decides what the op
// becomes locally: most ops are the same op on their local blocks
// (partitionLocal); a few need more (a local `shape` attribute, a rescaled
// mean, a param read at its storage sharding). The partitioner itself holds
// no per-op code. Collectives have no rule: they are made by partitioning.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ir/Function.h"
#include "ir/Op.h"
#include "ir/Sharding.h"

namespace gsl::ir {

// A value of the per-rank function and how the global value lies across
// the ranks (mesh "" = replicated everywhere; `partial` = unreduced sums).
struct LocalValue {
  Value* v = nullptr;
  Sharding s;
};

// The generic plan of one op, its operands already resharded to it.
struct LocalPlan {
  std::vector<Value*> operands;  // local operands, in the op's order
  Sharding result;               // how the local result lies, with partial axes
                                 // (mesh "": the op runs replicated)
  Shape localShape;              // the result's local shape under `result`
  int64_t partialGroup = 1;      // ranks whose partial results sum to the whole
  std::vector<Sharding> operandLayouts;  // how each local operand lies
};

// The partitioner, as the rules see it. Ops are appended at the location of
// the op being partitioned.
class LocalBuilder {
 public:
  virtual ~LocalBuilder() = default;
  // The sharding decided for the op's result (no partial axes).
  virtual const Sharding& decided() const = 0;
  // The local counterpart of an already partitioned global value.
  virtual LocalValue local(const Value* global) = 0;
  // `x` moved to sharding `t` (no partial axes) by collectives.
  virtual LocalValue reshard(LocalValue x, const Sharding& t) = 0;
  // `x` with its value's sharding annotation set from x.s.
  virtual LocalValue tag(LocalValue x) = 0;
  // Plans `op`'s label splits and reshards its operands to the plan.
  virtual LocalPlan plan(const Op& op) = 0;
  // Appends an op typed by the op table's type rule.
  virtual Value* emit(OpKind k, std::vector<Value*> operands, AttrMap attrs) = 0;
  // Appends an operand-free op of a given type (param, constant).
  virtual Value* emitSource(OpKind k, AttrMap attrs, TensorType t) = 0;
  // The shape one rank holds of type `t` laid out as `s`.
  virtual Shape localShape(const TensorType& t, const Sharding& s) = 0;
  // How param `name` is stored across the ranks (its declared sharding).
  virtual Sharding paramStorage(const std::string& name) = 0;
  // Records the local result of the op being partitioned.
  virtual void setResult(LocalValue l) = 0;
  // For a loop (partitioned by passes/LoopPartition, not by a rule):
  // appends the per-rank loop with its local body and result types, and
  // records its local results, one per result of the global loop.
  virtual Op* emitLoop(std::vector<Value*> operands, AttrMap attrs, const std::vector<TensorType>& types,
                       std::unique_ptr<Function> body) = 0;
  virtual void setResults(std::vector<LocalValue> ls) = 0;
  // Records `v` (the local op made from `p`) as the result, laid out as
  // p.result (checks its shape against p.localShape).
  virtual void finish(const Op& op, const LocalPlan& p, Value* v) = 0;

  // ---- for rules that look past one op (the halo exchange of a shift)
  // The ops of the global function that use `v` (nullptr for a use as a
  // function result).
  virtual std::vector<const Op*> users(const Value* v) = 0;
  // The op being partitioned makes no local value of its own: the single
  // op that uses it computes what it needs from the op's operands.
  virtual void fold() = 0;
  // Each member j of the group of ranks splitting dim `d` of `s` receives
  // `v` from member (j + q) mod n (a collective_permute; q mod n != 0).
  virtual Value* shiftAmongGroup(Value* v, const Sharding& s, int d, int64_t q) = 0;
  // An i32 tensor of shape [1] holding this rank's index in the group of
  // ranks splitting dim `d` of `s` (its block of that dim); local ops only.
  virtual Value* memberIndex(const Sharding& s, int d) = 0;
  // What emitting a plan would cost one rank: `plan` runs on stand-ins for
  // `inputs` in a scratch function and returns its local result, which is
  // then costed (bytes sent, FLOPs, bytes held). Nothing is kept.
  struct Cost {
    uint64_t bytes = 0, flops = 0, memory = 0;
  };
  virtual Cost dryRun(const std::vector<LocalValue>& inputs,
                      const std::function<LocalValue(const std::vector<LocalValue>&)>& plan) = 0;
  // For the REPL's :plans: a rule that chose among plans itself reports
  // them (the layouts each plan reads its inputs at, its result's layout,
  // its cost), `chosen` the index of the one taken.
  struct PlanReport {
    std::vector<Sharding> inputs;
    Sharding result;
    Cost cost;
  };
  virtual void reportPlans(const std::vector<PlanReport>& plans, size_t chosen) = 0;
};

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
#define GSL_PARTITION_RULES(X)                                                \
  X(partitionLocal) X(partitionLocalShape) X(partitionMean) X(partitionParam) \
  X(partitionConstant) X(partitionCopy) X(partitionWhole) X(partitionSlice)   \
  X(partitionConcat) X(partitionTake) X(partitionDropout)
#define GSL_DECLARE_PARTITION_RULE(name) void name(LocalBuilder& b, const Op& op);
GSL_PARTITION_RULES(GSL_DECLARE_PARTITION_RULE)
#undef GSL_DECLARE_PARTITION_RULE

}  // namespace gsl::ir
