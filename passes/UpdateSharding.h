// Weight-update sharding (Xu et al. 2020, "Automatic Cross-Replica Sharding
// of Weight Update in Data-Parallel Training"; ZeRO stage 1-2): in a
// training step, a param replicated over the data-parallel axes has its
// update computed on 1/N of it by each of the N replicas instead of on all
// of it by every one. Written as sharding, GSPMD-style: the pass gives the
// update's view of the gradient, of the param and the optimizer states a
// sharding split over those axes, and propagation and the partitioner do
// the rest:
//   gradient  partial sum over the data axes -> reduce_scatter (was all_reduce)
//   states    stored split (each rank holds 1/N; checkpoints hold the same
//             global tensors as before)
//   update    elementwise on the local 1/N block
//   new param all_gather back to the param's own sharding
// RS + AG send the bytes of one all_reduce.
//
// The data-parallel axes of a step are the mesh axes (size > 1) that split
// one of its data inputs (the thunk's own arguments). For each param the
// axes it is not already split over are added on one dim it leaves
// unsplit (not a stacked layer dim): the largest the axes divide, else
// the largest (padded). A param smaller than kMinUpdateShardElements per
// rank keeps a replicated update: by the REPL's :cost machine model (5 us
// per collective call, 100 GFLOP/s; repl/Explain.cpp), the second collective's
// latency costs more than splitting an Adam update of fewer elements (about
// 10 flops each) saves. docs/memory.md, "Weight-update sharding".
//
// passes/Training.cpp marks the update's views as copies {update = "grad"
// | "param" | "new", param = NAME}; this pass gives them their sharding
// or, when the param's update stays replicated (or with
// Module::updateSharding off: `--no-update-sharding`), removes them.
#pragma once
#include <cstdint>

#include "ir/Module.h"
#include "passes/ShardingProvenance.h"

namespace gsl::passes {

inline constexpr int64_t kMinUpdateShardElements = 65536;

// Runs on a global function with its inputs' shardings, before propagation
// (buildPerRankProgram); a no-op for functions that are not training steps.
// A gradient given the update's split is recorded in `provenance` (if
// given) as derived through its marker copy; propagation, given the same
// table, treats it as propagated rather than annotated (it may refine it).
void shardWeightUpdates(const ir::Module &m, ir::Function &f,
                        ShardingProvenance *provenance = nullptr);

} // namespace gsl::passes
