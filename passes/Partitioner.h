// The SPMD partitioner's machinery, shared by its three files; internal to
// the pass, whose entry points are in passes/SpmdPartitioner.h:
//   passes/SpmdPartitioner.cpp  the walk over the ops, what the partition
//                               rules work through, and :plans'
//                               explanation;
//   passes/PartitionRules.cpp   the op table's partition rules (what each
//                               op becomes on local blocks);
//   passes/LoopPartition.cpp    a loop op, its body partitioned once;
//   passes/Reshard.cpp          moving a value between shardings with
//                               collectives (padding included);
//   passes/PlanSearch.cpp       an op's plans (its labels' splits), their
//                               costs and the choice among them.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "ir/Module.h"
#include "ir/ShardRules.h"
#include "passes/SpmdPartitioner.h"

namespace gsl::passes::partitioner {

using namespace ir;

// A value of the per-rank function and how the global value lies across
// the ranks (mesh "" = replicated everywhere; `partial` = unreduced sums).
struct LocalValue {
  Value* v = nullptr;
  Sharding s;
};
using Local = LocalValue;

// The generic plan of one op, its operands already resharded to it.
struct LocalPlan {
  std::vector<Value*> operands;  // local operands, in the op's order
  Sharding result;               // how the local result lies, with partial axes
                                 // (mesh "": the op runs replicated)
  Shape localShape;              // the result's local shape under `result`
  int64_t partialGroup = 1;      // ranks whose partial results sum to the whole
  std::vector<Sharding> operandLayouts;  // how each local operand lies
};

class Partitioner {
 public:
  Partitioner(const Module& m, const Function& g, const Value* target = nullptr)
      : mod_(m), g_(g), target_(target) {}
  OpPlans report_;  // the candidates of target_'s op, when partitioned

  std::unique_ptr<Function> run();

  // ---- what the partition rules (passes/PartitionRules.cpp) and the loop
  // partitioning (passes/LoopPartition.cpp) work through. Ops are appended
  // at the location of the op being partitioned.

  // The sharding decided for the op's result (no partial axes).
  const Sharding& decided() const { return decided_; }
  // The local counterpart of an already partitioned global value.
  LocalValue local(const Value* global) { return map_.at(global); }
  // `x` moved to sharding `t` (no partial axes) by collectives.
  LocalValue reshard(LocalValue x, const Sharding& t) { return reshard(x, t, cur_->loc); }
  // `x` with its value's sharding annotation set from x.s.
  LocalValue tag(LocalValue x);
  // Plans `op`'s label splits and reshards its operands to the plan.
  LocalPlan plan(const Op& op);
  // Appends an op typed by the op table's type rule.
  Value* emit(OpKind k, std::vector<Value*> operands, AttrMap attrs) {
    return emit(k, std::move(operands), std::move(attrs), cur_->loc);
  }
  // Appends an operand-free op of a given type (param, constant).
  Value* emitSource(OpKind k, AttrMap attrs, TensorType t) {
    return out_->append(k, {}, std::move(attrs), std::move(t), cur_->loc)->result;
  }
  // The shape one rank holds of type `t` laid out as `s`.
  Shape localShape(const TensorType& t, const Sharding& s) { return ir::localShape(mod_, t, s); }
  // How param `name` is stored across the ranks (its declared sharding).
  Sharding paramStorage(const std::string& name);
  // Records the local result of the op being partitioned.
  void setResult(LocalValue l);
  // For a loop: appends the per-rank loop with its local body and result
  // types, and records its local results, one per result of the global loop.
  Op* emitLoop(std::vector<Value*> operands, AttrMap attrs, const std::vector<TensorType>& types,
               std::unique_ptr<Function> body);
  void setResults(std::vector<LocalValue> ls);
  // Records `v` (the local op made from `p`) as the result, laid out as
  // p.result (checks its shape against p.localShape).
  void finish(const Op& op, const LocalPlan& p, Value* v);

  // ---- for rules that look past one op (the halo exchange of a shift)
  // The ops of the global function that use `v` (nullptr for a use as a
  // function result).
  std::vector<const Op*> users(const Value* v);
  // The op being partitioned makes no local value of its own: the single
  // op that uses it computes what it needs from the op's operands.
  void fold() { folded_.insert(cur_); }
  // Each member j of the group of ranks splitting dim `d` of `s` receives
  // `v` from member (j + q) mod n (a collective_permute; q mod n != 0).
  Value* shiftAmongGroup(Value* v, const Sharding& s, int d, int64_t q);
  // An i32 tensor of shape [1] holding this rank's index in the group of
  // ranks splitting dim `d` of `s` (its block of that dim); local ops only.
  Value* memberIndex(const Sharding& s, int d);
  // What emitting a plan would cost one rank: `plan` runs on stand-ins for
  // `inputs` in a scratch function and returns its local result, which is
  // then costed (bytes sent, FLOPs, bytes held). Nothing is kept.
  PlanCost dryRun(const std::vector<LocalValue>& inputs,
                  const std::function<LocalValue(const std::vector<LocalValue>&)>& plan);
  // For the REPL's :plans: a rule that chose among plans itself reports
  // them (the layouts each plan reads its inputs at, its result's layout,
  // its cost), `chosen` the index of the one taken.
  struct PlanReport {
    std::vector<Sharding> inputs;
    Sharding result;
    PlanCost cost;
  };
  void reportPlans(const std::vector<PlanReport>& plans, size_t chosen);

 private:
  const Module& mod_;
  const Function& g_;
  std::unique_ptr<Function> out_;
  std::map<const Value*, Local> map_;
  const Value* target_ = nullptr;  // the value whose plans are recorded
  // The whole (global) shape of each local value: a padded dim's block does
  // not say its whole size (docs/sharding.md, "Uneven dims"). Values not
  // recorded are split evenly (or replicated).
  std::map<const Value*, Shape> whole_;

  Shape wholeOf(const Local& x);
  // Whether dim `d` of whole shape `G` is padded when split over `axes`.
  bool padded(const Shape& G, int d, const std::string& meshName, const Axes& axes) {
    return !axes.empty() && G[d] % product(meshName, axes) != 0;
  }
  // `v` with zeros appended along dim d up to `rows` rows (a concat with a
  // zero constant): a padded whole, ready to be split evenly.
  Value* padTo(Value* v, int d, int64_t rows, SourceLoc loc);
  // Dim `d` of `x` gathered whole: all_gather of each of its axes, minor
  // first, then a slice dropping the padding rows (a padded dim gathered
  // holds blocks * ceil(size / blocks) rows, the padding at its end).
  Local gatherWhole(Local x, int d, const Shape& G, SourceLoc loc);
  // Dim `d` of `x`, held whole but with its padding rows at the end (a
  // padded dim joined by a collective), sliced to its G[d] true rows.
  Local dropPadding(Local x, int d, const Shape& G, SourceLoc loc);

  const Mesh& mesh(const std::string& name);
  int64_t product(const std::string& meshName, const Axes& axes);
  std::vector<int64_t> axisIndices(const std::string& meshName, const Axes& axes);

  Value* emit(OpKind k, std::vector<Value*> operands, AttrMap at, SourceLoc loc);

  AttrMap collectiveAttrs(const std::string& meshName, const Axes& axes);

  // Dim d is split over the same axes as `order` in another order: member j
  // of the group (over the current order) holds block j and needs block
  // k(j), the index of its own coordinates in `order`.
  Local permuteBlocks(Local x, int d, const Axes& order, SourceLoc loc);

  // Moves `x` to sharding `t` (t has no partial axes), picking the cheapest
  // collective for each step (see the header).
  Local reshard(Local x, Sharding t, SourceLoc loc);

  // How an op's dimension labels are split.
  struct Plan {
    std::string mesh;
    std::map<int, Axes> T;
    Sharding shardingFor(const std::vector<int>& labels) const {
      Sharding s = Sharding::replicated(mesh, (int)labels.size());
      for (size_t d = 0; d < labels.size(); ++d)
        if (auto it = T.find(labels[d]); it != T.end()) s.dims[d] = it->second;
      return s;
    }
  };

  // Whether `label` of `op` may be split into n blocks: n divides every dim
  // carrying it, or (padding, docs/sharding.md "Uneven dims") every dim
  // carrying it has the same size, so all of them pad alike.
  bool splitFits(const Op& op, const DimLabels& L, int label, int64_t n);

  Plan makePlan(const Op& op, const DimLabels& L, const Sharding& decided, const std::set<int>& resultLabels,
                bool operandsFirst);

  // The result's layout under plan `p`: the result labels' splits, and the
  // axes of split contracted labels as pending partial sums (mesh order).
  Sharding resultLayout(const DimLabels& L, const Plan& p);

  // Operand i's local block `v` under plan `p`, with the padding rows of
  // every contracted label split over axes that do not divide it set to 0
  // (pad_mask): a contraction or sum over a padded dim must not add them
  // (docs/sharding.md, "Uneven dims"). Other labels need no mask.
  // An index operand (the row's IndexOperand trait: take's indices) has
  // its padding set to 0 along every padded split dim, so that indices
  // computed from padding rows stay in range.
  Value* maskPadding(const Op& op, const DimLabels& L, const Plan& p, size_t i, Value* v, SourceLoc loc);

  // What a plan costs one rank: a dry run into a scratch function of the
  // operands' reshards, the local op, and the reshard of its result (partial
  // sums included) to the decided sharding; bytes and FLOPs measured by the
  // cost model, memory as the bytes the local op holds (its local operands
  // and result).
  PlanCost costPlan(const Op& op, const DimLabels& L, const Plan& p, const Sharding& decided);

  // Every legal plan of a contraction: each label split as the decided
  // result splits it, as an operand currently splits it, or not at all; no
  // axis twice, no unsplittable label split, every split dividing its dims.
  std::vector<Plan> enumeratePlans(const Op& op, const DimLabels& L, const Sharding& decided);

  static bool cheaper(const PlanCost& a, const PlanCost& b) {
    return std::tie(a.bytes, a.flops, a.memory) < std::tie(b.bytes, b.flops, b.memory);
  }

  // Chooses a contraction's plan: the result-first plan, then the
  // operands-first one, then every other legal plan, each replacing the
  // best so far only when strictly cheaper (fewest bytes sent, then fewest
  // FLOPs, then least peak memory). Records the candidates for `target`.
  Plan choosePlan(const Op& op, const DimLabels& L, const Sharding& decided, const std::set<int>& resultLabels);

  const Op* cur_ = nullptr;  // the op being partitioned
  Sharding decided_;         // its result's decided sharding

  // A reshape whose operand already lies as its decided result would (the
  // same contiguous block on every rank): it runs locally, no collective.
  bool localReshape(const Op& op, LocalPlan& p);

  std::map<const Value*, std::vector<const Op*>> users_;  // of g_'s values, built on first use
  std::set<const Op*> folded_;                             // ops whose user computes their part

  // Partitions one op by its row's partition rule.
  void partitionOp(const Op& op);
};

}  // namespace gsl::passes::partitioner
