// Group resolution, the last per-rank pass: every collective of a per-rank
// program (loop bodies included) gets its groups (ir::CollectiveGroups, on
// the op): for each rank, the world ranks it communicates with and its
// index among them, from the op's mesh and axes. Ops over the same mesh and
// axes share one table. So a collective finds its group with two loads
// when it runs, instead of looking its mesh up by name and working the
// group out on every call (backend/Collectives.cpp). The IR text does not
// change: the mesh and axes attributes say the same.
#pragma once
#include "ir/Module.h"

namespace gsl::passes {

// Sets op.groups on every collective of `f` and of its loop bodies (meshes
// from `m`).
void resolveGroups(const ir::Module& m, ir::Function& f);

}  // namespace gsl::passes
