// SPMD partitioning of a `loop` op (docs/loops.md, "Partitioning"): the
// body is partitioned ONCE, as a function of its own, so the collectives
// its ops need are inside the body and run in every iteration; the
// per-rank loop carries local types. Called by passes/SpmdPartitioner for
// loop ops (the only op kind it does not partition by a table rule).
#pragma once
#include "ir/Module.h"
#include "passes/Partitioner.h"

namespace gsl::passes {

// Appends, through `b`, the per-rank loop of global loop `op` (whose body
// has been through sharding propagation): operands resharded to the body
// arguments' shardings, the body partitioned with its carried results
// resharded to the carried arguments' shardings, and records the loop's
// local results (stacked outputs lie as their rows, dim 0 unsplit).
//
// A loop over pipeline stages (attributes `stage_mesh`, `stage_axes`; made
// by passes/Pipelining) whose iterations only read row i of their stacked
// operands and only pass their carried values through is split over the
// stage axes instead: each rank runs the iterations of its own rows (trip /
// n of them) on its local block of those operands, and its stacked outputs
// lie with dim 0 split over the stage axes. Otherwise it is partitioned as
// any loop (every rank runs every stage).
void partitionLoop(const ir::Module& m, partitioner::Partitioner& b, const ir::Op& op);

}  // namespace gsl::passes
