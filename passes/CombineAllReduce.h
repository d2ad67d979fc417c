// All-reduce combining (XLA's AllReduceCombiner, for tagged sums): on a
// per-rank program, the all_reduces of scalar partial sums that the global
// program tagged with the same `combine` attribute (passes/Training tags
// the squared sums of clip_norm's global norm, one per gradient) become
// ONE all_reduce of a small vector: the local sums are packed with
// reshape + concat, reduced once, and unpacked with slice + reshape. The
// numbers are the same (each element is reduced exactly as its scalar
// was); only the number of collectives changes. Guarantees: nothing else
// changes, and a group is combined only where every local sum is computed
// before the first use of any of the reduced values (else it is left as
// it was).
#pragma once
#include "ir/Function.h"

namespace gsl::passes {

void combineAllReduces(ir::Function& f);

}  // namespace gsl::passes
