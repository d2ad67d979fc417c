// What the REPL prints about shardings and costs: the provenance chain of
// a value's sharding (:sharding), the picture of how a tensor's blocks lie
// on the devices (:show), and cost tables with a simple machine model
// (:cost, :try).
#pragma once
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

// The machine model of :cost and :try (per rank): compute at kFlopsPerS,
// every collective call costs kLatencyS plus its bytes sent at kLinkBytesPerS.
constexpr double kFlopsPerS = 100e9;
constexpr double kLinkBytesPerS = 10e9;
constexpr double kLatencyS = 5e-6;
std::string machineModelLine();
double computeSeconds(const passes::Cost& c);
double collectiveSeconds(const passes::Cost& c);

// A table of one or more costs side by side (columns headed by `heads`).
std::string costTable(const std::vector<const passes::Cost*>& costs, const std::vector<std::string>& heads);

// :plans: the candidate plans of one op, one row each (operand layouts,
// result layout with pending partial sums, bytes sent, FLOPs, memory per
// rank), the chosen one marked `*`, then why it won.
std::string planTable(const passes::OpPlans& plans);

}  // namespace gsl::repl
