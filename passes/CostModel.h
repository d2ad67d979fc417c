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
// A loop counts its body's flops and collectives once per iteration (x trip),
// and its body's peak on top of the values live at the loop (an upper bound).
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "ir/Module.h"

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
};

Cost estimateCost(const ir::Module& m, const ir::Function& f);

// {"flops": ..., "param_bytes": ..., "peak_activation_bytes": ...,
//  "collectives": {KIND: {"calls": ..., "bytes": ...}}}, keys in that order
// (collectives by name).
nlohmann::ordered_json costJson(const Cost& c);

}  // namespace gsl::passes
