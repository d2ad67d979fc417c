// What the REPL prints about shardings and costs: the provenance chain of
// a value's sharding (:sharding), the picture of how a tensor's blocks lie
// on the devices (:show), and cost tables with a simple machine model
// (:cost, :try).
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "frontend/HostProgram.h"
#include "ir/Module.h"
#include "passes/CostModel.h"
#include "passes/ShardingProvenance.h"
#include "passes/SpmdPartitioner.h"
#include "repl/Session.h"

namespace gsl::repl {

// Where the values being explained live.
struct ValueContext {
  const Build& build;
  const ir::Module& mod;
  // Why each value has its sharding: what propagating the function (and
  // its loop bodies) recorded (propagated(..., &provenance)).
  const passes::ShardingProvenance& provenance;
  // The values' names: those of the function explained and of its loop
  // bodies (Function::namesWithBodies, as PathRoot::names keeps them).
  const ir::ValueNames& names;
  std::string fn;                                            // user fn ("" in a thunk)
  const std::vector<frontend::HostLeaf>* leaves = nullptr;   // thunk inputs
  std::string hostVar;  // the host variable being explained (a thunk's result)
  // Set when the values are in this loop's body (propagated in place).
  const ir::Op* loop = nullptr;
  std::vector<const ir::Op*> enclosing;  // the loops around `loop`, outermost first
};

// The value's name: its let or argument name, the call path of a let of
// an inlined call, a param's name, else %id.
std::string valueName(const ValueContext& c, const ir::Value& v);

// Where a sharding that no propagation step gave comes from: "annotated at
// FILE:LINE:COL", "host variable x", ... ("" when it has none).
std::string shardingOrigin(const ValueContext& c, const ir::Value& v);

// The chain of propagation steps that gave `v` its sharding (as
// c.provenance records them), back to the user annotations it comes from:
//   h: @shard(m, [data, model])
//     <- relu(%2)
//     <- matmul(x, w1) from
//          x @shard(m, [data, _]) annotated at examples/mlp.gsl:14:16
//          w1 @shard(m, [_, model]) annotated at examples/mlp.gsl:11:21
std::string explainSharding(const ValueContext& c, const ir::Value& v, const std::string& label);

// "m = [data: 2, model: 2]"
std::string meshText(const ir::Mesh& m);

// `s` or "replicated".
std::string shardingText(const std::optional<ir::Sharding>& s);
// Whether values lying as `a` and `b` have the same blocks (every
// replicated form is the same).
bool sameLayout(const std::optional<ir::Sharding>& a, const std::optional<ir::Sharding>& b);

// A box grid of the tensor's blocks on the devices (first two dims), each
// box naming the devices that hold that block (copies listed together) and
// the block's index ranges. Colours only when `color`.
std::string showBlocks(const std::string& title, const ir::TensorType& t, const std::optional<ir::Sharding>& s,
                       const ir::Module& m, bool color);


// A table of one or more costs side by side (columns headed by `heads`).
std::string costTable(const std::vector<const passes::Cost*>& costs, const std::vector<std::string>& heads);

// A pipeline's time loop (passes/Pipelining: the loop that carries the
// stages' state, attributes pipeline_*; its backward loop, autodiff's, has
// them too and `reverse`), as :cost and :spmd report it. The schedule comes
// from the per-rank loop's attributes (ir::pipelineScheduleOf); the layers
// per stage from the global program's stage loop (attribute stage_mesh),
// which partitioning drops.
struct PipelineLoop {
  bool backward = false;
  int64_t stages = 0;        // S
  int64_t microbatches = 0;  // M
  int64_t rounds = 0;        // R
  int64_t trip = 0;          // M*R + S - 1
  std::string stageAxes;     // "axis stage of mesh m"
  int64_t layers = 0;        // per stage per round: the stage loop's layer loop's trip (0: not found)
  // The shifts, per iteration: the collectives of the time loop's own body
  // (not of the loops in it) that move rows between stages over the stage
  // axes: the state's collective_permute, and in rounds the all_gather of
  // the last stage's row. Bytes: what one rank sends, by the cost
  // model's rule (collective_permute B, all_gather (n-1) B; B = the
  // operand, one rank's block).
  int64_t shifts = 0;
  uint64_t shiftBytes = 0;
  std::string shiftType;  // the operands' type, when they all have one
  // Mnemonic -> how many, before the stage loop (the state's shift; in a
  // backward loop the forward shift, recomputed) and after it (in a
  // backward loop the gradients' shift back; any other collective there is
  // counted and named too).
  std::map<std::string, int64_t> before, after;
};

// The pipeline time loops of per-rank program `local` (at any depth, in
// program order), paired by order with those of `global`, the function it
// was partitioned from.
std::vector<PipelineLoop> pipelineLoops(const ir::Module& m, const ir::Function& global, const ir::Function& local);

// :cost's and :spmd's "pipeline" section: per distinct schedule the stages,
// microbatches, rounds, iterations, layers per stage per round and the
// predicted bubble fraction (S - 1)/(M*R + S - 1); per time loop its shifts
// per iteration and in all its iterations; their total per call (`per`:
// "step" for a training step, else "call"). Each line starts with `prefix`
// ("" or "# "). "" when `ps` is empty.
std::string pipelineText(const std::vector<PipelineLoop>& ps, const std::string& per, const std::string& prefix);

// :plans: the candidate plans of one op, one row each (operand layouts,
// result layout with pending partial sums, bytes sent, FLOPs, memory per
// rank), the chosen one marked `*`, then why it won.
std::string planTable(const passes::OpPlans& plans);

}  // namespace gsl::repl
