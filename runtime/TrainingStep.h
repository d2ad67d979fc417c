// What one training step, `opt.minimize(loss, ...)`, does on a rank: runs
// the expanded step (passes/Training) on the rank's blocks, then keeps its
// new params, optimizer states and step counter in the RankModel.
#pragma once
#include <cstdint>
#include <vector>

#include "frontend/Frontend.h"
#include "runtime/Batches.h"
#include "runtime/Progress.h"
#include "runtime/RankModel.h"
#include "support/Trace.h"

namespace gsl::runtime {

struct StepResult {
  HostValue loss;    // lying as the step's first result
  int64_t step = 0;  // the optimizer's step number t (from 1, continued by --resume)
  std::vector<HostValue> aux;  // the loss function's auxiliary outputs (ir::TrainRequest::aux), as they lie
};

// The step of leaf `l` (HostLeaf::Minimize) on its thunk's inputs
// `values` (batches read), reported to `progress`. Errors throw RankError.
StepResult trainingStep(RankModel& model, const frontend::HostLeaf& l, const std::vector<HostValue>& values,
                        Progress& progress);

// Adds to a traced call of per-rank function f the schedule of its first
// pipeline and this rank's stage (args pipeline_stage, pipeline_stages,
// pipeline_microbatches, pipeline_rounds; docs/trace.md), from which
// `gsl trace summary` finds each stage's bubble.
void traceSchedule(trace::Scope& traced, const RankModel& model, const ir::Function& f);

}  // namespace gsl::runtime
