// Static cost of a (per-rank) function: the figures `gsl compile --stats
// json` prints and the REPL's :cost uses.
//   flops        multiply-adds count 2 (matmul, einsum); elementwise ops 1 per
//                element; reductions 1 per input element; softmax-like 5.
//   param_bytes  bytes of the params the function reads, as each rank holds them
//   peak_activation_bytes
//                the most bytes of live values at once (args and results
//                included, params excluded), values freed after their last use
//   collectives  per kind: calls and bytes one rank sends, by the ring
//                algorithm's volumes (all_gather (n-1)B, all_reduce 2(n-1)/n B,
//                reduce_scatter and all_to_all (n-1)/n B, B = the local input)
//   seconds      predicted by a machine model (passes/MachineModel): compute
//                (GEMMs by shape class, other ops by FLOPs or bytes moved)
//                and collectives (latency and bandwidth per kind)
// A loop counts its body's flops, seconds and collectives once per iteration
// (x trip), and its body's peak on top of the values live at the loop (an
// upper bound).
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "ir/Module.h"
#include "passes/MachineModel.h"

namespace gsl::passes {

struct CollectiveCost {
  uint64_t calls = 0;
  uint64_t bytes = 0;
};

struct Cost {
  uint64_t flops = 0;
  uint64_t paramBytes = 0;
  uint64_t peakActivationBytes = 0;
  ir::OpKindMap<CollectiveCost> collectives;  // iterated by mnemonic
  double gemmSeconds = 0;        // matmul and einsum
  double otherSeconds = 0;       // every other op that computes or moves data
  double collectiveSeconds = 0;  // the collectives' latency and bandwidth
  double callSeconds = 0;        // the overhead of calling the function (once)
  double computeSeconds() const { return gemmSeconds + otherSeconds + callSeconds; }
  double seconds() const { return computeSeconds() + collectiveSeconds; }
  // Adds `n` runs of `b`'s work: its FLOPs, seconds and collectives (not
  // its call overhead, bytes held or peak): a loop's body per iteration.
  void addTimes(const Cost& b, uint64_t n);
};

Cost estimateCost(const ir::Module& m, const ir::Function& f,
                  const MachineModel& machine = defaultMachineModel());

// The predicted seconds of one op that is not a loop (its body apart), on
// `machine`: what estimateCost adds up.
double opSeconds(const ir::Module& m, const ir::Op& op, const MachineModel& machine);

// {"flops": ..., "param_bytes": ..., "peak_activation_bytes": ...,
//  "collectives": {KIND: {"calls": ..., "bytes": ...}},
//  "predicted_seconds": {"gemm": ..., "other": ..., "call": ...,
//  "collectives": ..., "total": ...}}, keys in that order (collectives by name).
nlohmann::ordered_json costJson(const Cost& c);

}  // namespace gsl::passes
