// The `loop` op and the two indexing ops it is used with (docs/loops.md).
//
//   %r.. = loop %c.., %v.. {carried = C, trip = T [, reverse = true]} : types {
//     body(%i: i32, %c': carried types.., %v': invariant types..):
//       ...
//     yield %new_c.., %y..
//   }
//
// Scan semantics (JAX's lax.scan, XLA's While with a static trip count):
// operands are the C carried initial values followed by the loop-invariant
// inputs; the body (an ir::Function owned by the op, reading only its own
// arguments) takes (i, carried.., invariants..) and returns (new carried..,
// per-iteration outputs..); the op's results are the final carried values
// followed by each per-iteration output stacked along a new leading dim of
// size T (the output of iteration i is row i). The body runs for
// i = 0, 1, .., T-1, or T-1, .., 0 with `reverse` (the backward pass of a
// loop is a reverse loop); the rows still go to index i.
//
//   dynamic_index(x, i)      x[i] along dim 0 (i an i32 scalar); drops dim 0
//   dynamic_update(x, u, i)  x with row i (along dim 0) replaced by u
//
// An index out of range is an internal error at run time: the front end
// checks the bounds it can know, and a loop's index is in range by
// construction (the verifier cannot see dynamic indices).
#pragma once
#include <string>
#include <vector>

#include "ir/Function.h"
#include "ir/ShardRules.h"

namespace gsl::ir {

class GradBuilder;
struct Module;

// Reads the structure of a loop op.
struct LoopInfo {
  int64_t trip = 0;
  size_t carried = 0;     // number of carried values
  size_t invariants = 0;  // number of loop-invariant inputs
  size_t outputs = 0;     // number of per-iteration (stacked) outputs
  bool reverse = false;
  explicit LoopInfo(const Op& loop);
};

// The types of a loop's results for its operand types, attributes and body,
// or a message saying what does not fit (the loop's type rule; "" if fine).
std::string inferLoopTypes(const std::vector<TensorType>& operands, const AttrMap& attrs,
                           const Function& body, std::vector<TensorType>& results);

// Whether body argument `a` of a loop body is read only as row i of itself
// (dynamic_index(a, i), i the iteration index): a stacked layer weight, or
// a pipeline stage's row.
bool readByIteration(const Function& body, const Value* a);

// A pipeline's schedule (docs/pipeline.md), read from the attrs of the
// time loop that passes/Pipelining made (pipeline_mesh, pipeline_axes,
// pipeline_microbatches, pipeline_rounds): S stages, M
// microbatches, R rounds, M R + S - 1 iterations. Stage s works on
// microbatch-round t - s at iteration t; the others are the bubble, a
// fraction (S - 1) / (M R + S - 1) of a stage's iterations.
struct PipelineSchedule {
  std::string mesh;
  std::vector<int64_t> axes;  // the stage axes (mesh axis indices)
  int64_t stages = 1, microbatches = 1, rounds = 1, iterations = 1;
  const Op* timeLoop = nullptr;
  double bubble() const { return (double)(stages - 1) / (double)iterations; }
  // Whether stage s works on a microbatch at iteration t.
  bool busy(int64_t s, int64_t t) const { return t - s >= 0 && t - s < microbatches * rounds; }
  // The stage of `rank` (its coordinate along the stage axes, row-major).
  int64_t stageOf(const Module& m, int64_t rank) const;
};

// The schedule of `timeLoop`, a time loop of passes/Pipelining (forward,
// or autodiff's backward one, which carries the same attrs).
PipelineSchedule pipelineScheduleOf(const Op& timeLoop, const Module& m);

// The forward pipelines of f (its ops and the loops in them), in order.
std::vector<PipelineSchedule> findPipelines(const Function& f, const Module& m);

// The type rules and gradient rules of dynamic_index and dynamic_update
// (columns of their op table rows).
std::string ruleDynamicIndex(const std::vector<TensorType>& in, AttrMap& attrs, TensorType& out);
std::string ruleDynamicUpdate(const std::vector<TensorType>& in, AttrMap& attrs, TensorType& out);
void gradDynamicIndex(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& operandGrads);
void gradDynamicUpdate(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& operandGrads);

// Their sharding rules (dimension labels, ir/ShardRules.h): dim 0 of x, the
// indexed dim, may not be split (a rank would need another's row); every
// other dim of x is the same dim of the row and of the result.
DimLabels shardDynamicIndex(const Op& op);
DimLabels shardDynamicUpdate(const Op& op);

}  // namespace gsl::ir
