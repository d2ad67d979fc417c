// All-reduce combining (XLA's AllReduceCombiner): on a per-rank program,
// all_reduces of the same group (mesh, axes, reduction) and dtype that can
// run at the same point become ONE all_reduce of a vector: the local
// values are packed with reshape + concat, reduced once, and unpacked with
// slice + reshape. Two kinds are combined:
//   - tagged scalar sums: the partial sums the global program tagged with
//     the same `combine` attribute (passes/Training tags the squared sums
//     of clip_norm's global norm, one per gradient), of any count;
//   - small all_reduces (results of at most kCombineBytes each, at most
//     kCombineGroupBytes together), such as a layer's weight gradients
//     over the data-parallel axes: a collective of a few KiB costs its
//     latency (a rendezvous, or a network round trip), not its bytes, so
//     one call instead of a dozen saves that many latencies and costs two
//     copies of a few KiB.
// Groups are formed in program order, in every function and loop body: an
// all_reduce joins the open group of its kind while every operand of the
// group is computed before the first use of any of its results; the
// combined all_reduce goes right after the last operand's definition.
// The numbers are the same (each element is reduced exactly as it was);
// only the number of collectives changes. Nothing else changes.
#pragma once
#include <cstdint>

#include "ir/Function.h"

namespace gsl::passes {

inline constexpr int64_t kCombineBytes = 64 * 1024;
inline constexpr int64_t kCombineGroupBytes = 1024 * 1024;

// Combines the all_reduces of `f` and of its loop bodies.
void combineAllReduces(ir::Function& f);

}  // namespace gsl::passes
