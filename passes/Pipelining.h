// Pipelining: a loop over a param group whose layers are split over a
// stage axis (`param blocks[L] @shard(m, [stage])`) runs as a pipeline, in
// GSPMD's form (docs/pipeline.md). The front end writes such a loop as a
// loop over M microbatches (attribute `microbatches`) running the L-layer
// loop on each; this pass rewrites it, on the global IR before autodiff, to
// the schedule of S stages:
//
//   state = zeros [S, b, ...]                       // one row per stage
//   loop t in 0..M+S-1 (carried state):
//     shifted = state moved one row down (row 0: microbatch min(t, M-1))
//     state = loop s in 0..S {stages}: the L/S layers of stage s on row s
//   out = row S-1 of iterations S-1 .. M+S-2 (microbatch m left the last
//         stage at iteration m + S - 1)
//
// The layers are the group's params reshaped to [S, L/S, ...], so stage s
// owns layers s*L/S .. (s+1)*L/S - 1. The shift is a slice and a concat
// along the stage dim (with its dim split over the stage axis, the
// partitioner makes it one collective_permute); the loop over stages is
// marked `stages` with the stage mesh and axes, so that propagation and the
// partitioner split its iterations over the stage axis (each rank runs its
// own stage). Autodiff then gives the backward pipeline (GPipe order).
// The math is the unpipelined loop's: each microbatch passes through every
// layer in order.
//
// With one stage (the stage axes of size 1) the microbatch loop stays as it
// is: the layers run on one microbatch after the other.
#pragma once
#include "ir/Module.h"

namespace gsl::passes {

void pipelineLoops(ir::Module& m);

// Whether any function has a loop the front end marked `microbatches`.
bool hasPipelines(const ir::Module& m);

// After sharding propagation of `f` (a per-rank pass): every value that
// holds one row per stage of a pipeline (the state, its shifts, the stage
// loop's operands and rows, their adjoints, the stacked saves of them) gets
// its stage dim split over the stage axes, so that each rank holds its own
// stage's row and a shift is one collective_permute. Propagation alone does
// not reach them: a shift is a slice and a concat along the stage dim,
// whose labels propagation never splits. The values are found by following
// the stage dim from the stage loops' operands and results through
// elementwise ops, slices and concats along any dim, indexing and loops;
// one that is annotated, partial or already uses a stage axis is left as
// it is (the partitioner reshards where two layouts meet, so this changes
// what is sent, never the values).
void shardPipelineStages(const ir::Module& m, ir::Function& f);

}  // namespace gsl::passes
