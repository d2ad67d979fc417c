// What one training step does on a rank: its arguments (inputs, step
// number, per-step scalars, optimizer states), the call with the params
// and states donated, and what it keeps of the results.
#include "runtime/TrainingStep.h"

#include "ir/Loop.h"
#include "passes/Training.h"
#include "runtime/Distribute.h"
#include "support/Trace.h"

namespace gsl::runtime {

using backend::Tensor;
using ir::Sharding;

StepResult trainingStep(RankModel& model, const frontend::HostLeaf& l, const std::vector<HostValue>& values,
                        Progress& progress) {
  const frontend::Thunk& st = *l.sub;
  std::vector<Tensor> args;
  std::vector<std::optional<Sharding>> in;
  int64_t tokens = 0;
  bool examples = false;
  for (size_t li = 0; li < st.leaves.size(); ++li) {
    const frontend::HostLeaf& lf = st.leaves[li];
    const HostValue& v = values[li];
    // Throughput counts the tokens of the first input if it is i32 (token
    // ids: a language model), else that input's rows (examples: a
    // classifier, a regression).
    // else the rows (samples) of the first input.
    if (!tokens && lf.type.rank() >= 1) {
      examples = lf.type.dtype != ir::DType::I32;
      tokens = examples ? lf.type.shape[0] : lf.type.numElements();
    }
    args.push_back(v.local);
    in.push_back(v.sharding);
  }
  TrainingState& training = model.training;
  const ir::Function& f = model.prog.programs().perRank(st, in, false);
  const ir::TrainRequest& tr = *st.fn->train;
  const std::string& opt = tr.optimizer;
  int64_t t = ++training.steps[opt];
  args.push_back(Tensor::scalarI32((int32_t)t));
  const ir::Module& m = model.prog.module();
  for (double s : passes::stepScalars(*m.findOptimizer(opt), tr, t)) args.push_back(Tensor::scalarF32((float)s));
  size_t firstState = st.leaves.size() + 1 + tr.scalars.size();
  // The params and states are donated (backend::Donation): the step's
  // results replace them, so the engine may write those into their
  // buffers. The states are moved into `args`, so that the host holds no
  // other tensor of them.
  backend::Donation donated;
  donated.args.assign(firstState, false);
  donated.args.resize(firstState + tr.states.size(), true);
  donated.params = tr.params;
  // Where each state lives in training.states (found once a step: the
  // results go back to the same entries).
  std::vector<HostValue*> stateOf(tr.states.size());
  for (size_t i = 0; i < tr.states.size(); ++i) {
    const auto& slot = tr.states[i];
    std::string key = TrainingState::stateKey(opt, slot.param, slot.slot);
    const ir::Value* a = f.args[firstState + i];
    auto it = training.states.find(key);
    if (it == training.states.end()) {
      training.stateTypes[key] = slot.type;
      std::optional<Sharding> sh = a->sharding;
      auto r = training.resumed.find(key);
      if (r != training.resumed.end()) {
        if (r->second.type() != slot.type)
          throw RankError(l.loc, "the resumed checkpoint's '" + key + "' is " + r->second.type().str() +
                                     ", expected " + slot.type.str());
        it = training.states.emplace(key, HostValue{localBlock(m, r->second, sh, model.rank), sh}).first;
      } else {
        it = training.states.emplace(key, HostValue{Tensor(a->type), sh}).first;  // zeros
      }
    }
    stateOf[i] = &it->second;
    args.push_back(std::move(it->second.local));
  }
  progress.stepStarts();
  std::vector<Tensor> res;
  try {
    trace::Scope traced("function", f.name);
    if (traced) {  // a training step: its optimizer's step number and source line
      traced.arg("train_step", t);
      traced.arg("line", (int64_t)st.loc.line);
      traceSchedule(traced, model, f);
    }
    res = model.engine->call(f, args, donated);
  } catch (const backend::RuntimeError& e) {
    throw RankError(e.loc.valid() ? e.loc : st.loc, e.what());
  }
  args.clear();
  for (size_t i = 0; i < tr.params.size(); ++i) model.params[tr.params[i]] = res[1 + i];
  for (size_t i = 0; i < tr.states.size(); ++i) stateOf[i]->local = res[1 + tr.params.size() + i];
  progress.stepDone(t, res[0].item(), tokens, examples);
  StepResult r{{res[0], f.resultShardings[0]}, t, {}};
  for (size_t k = res.size() - tr.aux; k < res.size(); ++k) r.aux.push_back({res[k], f.resultShardings[k]});
  return r;
}

void traceSchedule(trace::Scope& traced, const RankModel& model, const ir::Function& f) {
  const ir::Module& m = model.prog.module();
  const auto pipelines = ir::findPipelines(f, m);
  if (pipelines.empty()) return;
  const ir::PipelineSchedule& p = pipelines[0];
  traced.arg("pipeline_stage", p.stageOf(m, model.rank));
  traced.arg("pipeline_stages", p.stages);
  traced.arg("pipeline_microbatches", p.microbatches);
  traced.arg("pipeline_rounds", p.rounds);
}

}  // namespace gsl::runtime
