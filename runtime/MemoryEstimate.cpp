// What one rank of a run needs at its peak, estimated before it starts:
// params, optimizer states, and the largest single computation of fn main
// (or a checkpoint's group), from the per-rank programs and the JIT's
// buffer plans; and the --max-memory check against it.
#include "runtime/MemoryEstimate.h"

#include <algorithm>

#include "backend/Engine.h"
#include "backend/jit/JitEngine.h"
#include "ir/Loop.h"
#include "runtime/HostCheckpoint.h"
#include "runtime/HostWalk.h"
#include "runtime/Memory.h"

namespace gsl::runtime {

using frontend::HostStmt;
using frontend::Thunk;

namespace {

// The memory estimate: the walk without running (runtime/HostWalk.h:
// loop bodies once, both branches of an if), measuring each thunk's
// per-rank program; the largest counts.
class MemoryWalker : public ShardingWalk {
 public:
  // `donating`: the engine writes donated inputs in place (the JIT).
  MemoryWalker(SpmdProgram& prog, const backend::JitOptions& jit, bool donating, MemoryEstimate& est)
      : ShardingWalk(prog.programs()), jit_(jit), donating_(donating), est_(est) {}

  void finish() {
    const ir::Module& m = programs_.module();
    for (const auto& p : m.params) {
      ir::TensorType local{p.type.dtype, ir::localShape(m, p.type, p.sharding)};
      est_.paramBytes = addBytes(est_.paramBytes, bytes(local));
    }
    for (const auto& [key, b] : states_) est_.stateBytes = addBytes(est_.stateBytes, b);
    if (est_.training) est_.training->paramBytes = est_.paramBytes;
    // A checkpoint save: each rank holds one group of the checkpoint whole
    // at a time (the params, then the states, as writeCheckpoint lists them).
    if (saves_) {
      std::vector<uint64_t> sizes;
      for (const auto& p : m.params) sizes.push_back(bytes(p.type));
      for (const auto& [key, t] : stateTypes_) sizes.push_back(bytes(t));
      uint64_t group = 0;
      for (auto [lo, hi] : checkpointGroups(sizes)) {
        uint64_t sum = 0;
        for (size_t i = lo; i < hi; ++i) sum += sizes[i];
        group = std::max(group, sum);
      }
      // Beside the group: the JIT's workspace, kept at the largest size a
      // function of the run planned (the pool's buffers are released).
      if (addBytes(group, maxWork_) > est_.activationBytes) {
        est_.activationBytes = addBytes(group, maxWork_);
        est_.resultBytes = group;
        est_.workspaceBytes = maxWork_;
        est_.inputBytes = 0;
        est_.where = *saves_;
      }
    }
  }

  // save_checkpoint, or --checkpoint-every: where (the first save).
  void checkpointsAt(SourceLoc l) {
    if (!saves_) saves_ = l;
  }

 private:
  const backend::JitOptions& jit_;  // the planner's options, as the run's engine
  bool donating_;
  MemoryEstimate& est_;
  std::map<std::string, uint64_t> states_;  // optimizer state -> bytes per rank
  std::map<std::string, ir::TensorType> stateTypes_;  // optimizer state -> its whole type
  std::optional<SourceLoc> saves_;
  uint64_t maxWork_ = 0;  // the largest planned workspace of a function the run calls

  void saveCheckpoint(const HostStmt& s) override { checkpointsAt(s.loc); }

  static uint64_t bytes(const ir::TensorType& t) { return (uint64_t)t.byteSize(); }

  // A loop's buffers outside the planned workspace (backend/jit/
  // LowerLoop.cpp): its body's workspace and two of each carried value,
  // from the Tensor pool, which keeps them between calls, so every loop of
  // the function (and of its bodies) counts at once.
  uint64_t loopBuffers(const ir::Function& f) const {
    uint64_t b = 0;
    for (const auto& op : f.ops) {
      if (op->kind != ir::OpKind::Loop) continue;
      const ir::LoopInfo info(*op);
      b = addBytes(b, addBytes(backend::jitPlannedPeakBytes(*op->body, jit_), loopBuffers(*op->body)));
      for (size_t j = 0; j < info.carried; ++j) b = addBytes(b, 2 * bytes(op->operands[j]->type));
    }
    return b;
  }

  void visit(const Thunk& th, const ir::Function& f, bool step, const std::vector<std::optional<ir::Sharding>>&) override {
    // Training states: the arguments after the thunk's own, the step and
    // the per-step scalars.
    const std::optional<ir::TrainRequest>& tr = th.fn->train;
    size_t firstState = step && tr ? th.leaves.size() + 1 + tr->scalars.size() : f.args.size();
    uint64_t inputs = 0, results = 0, states = 0;
    for (size_t i = 0; i < f.args.size(); ++i) {
      uint64_t b = bytes(f.args[i]->type);
      if (i >= firstState && i - firstState < tr->states.size()) {
        const auto& st = tr->states[i - firstState];
        states_["optimizer/" + tr->optimizer + "/" + st.param + "/" + st.slot] = b;
        stateTypes_["optimizer/" + tr->optimizer + "/" + st.param + "/" + st.slot] = st.type;
        states = addBytes(states, b);
      } else {
        inputs = addBytes(inputs, b);
      }
    }
    // A training step's updated params and states are written into the
    // old ones' buffers (minimize donates them) where the planner allows
    // it: those results take no memory of their own. Not a param whose
    // block is the whole param on several threads: the ranks share its
    // buffer until their first step, which then writes a new one.
    std::vector<backend::DonorInput> donors;
    if (step && tr && donating_) donors = backend::jitPlannedDonors(f, jit_);
    auto donated = [&](size_t j) {
      if (j >= donors.size() || !donors[j].valid()) return false;
      const backend::DonorInput& d = donors[j];
      if (d.arg >= 0) return (size_t)d.arg >= firstState && (size_t)d.arg - firstState < tr->states.size();
      if (std::find(tr->params.begin(), tr->params.end(), d.param) == tr->params.end()) return false;
      const ir::Module& m = programs_.module();
      const ir::Param* p = m.findParam(d.param);
      return p && (m.np == 1 || ir::localShape(m, p->type, p->sharding) != p->type.shape);
    };
    std::vector<const ir::Value*> seen;
    for (size_t j = 0; j < f.results.size(); ++j) {
      const ir::Value* r = f.results[j];
      if (r->argIndex >= 0 || std::find(seen.begin(), seen.end(), r) != seen.end()) continue;
      seen.push_back(r);
      if (!donated(j)) results = addBytes(results, bytes(r->type));
    }
    const uint64_t planned = backend::jitPlannedPeakBytes(f, jit_);
    maxWork_ = std::max(maxWork_, planned);
    uint64_t work = addBytes(planned, loopBuffers(f));
    uint64_t total = addBytes(addBytes(inputs, work), results);
    if (step && tr && tr->kind == ir::TrainRequest::Minimize) {
      // Its results: the loss, then each param's update (local, as its gradient), then the states.
      MemoryEstimate::TrainingStep t{0, 0, states, inputs, work, results, {}, th.loc};
      t.collectives = passes::estimateCost(programs_.module(), f).collectives;
      for (size_t i = 1; i <= tr->params.size() && i < f.results.size(); ++i)
        t.gradBytes = addBytes(t.gradBytes, bytes(f.results[i]->type));
      if (!est_.training || t.peak() > est_.training->peak()) est_.training = t;
    }
    if (total > est_.activationBytes || !est_.where.valid()) {
      est_.activationBytes = total;
      est_.inputBytes = inputs;
      est_.workspaceBytes = work;
      est_.resultBytes = results;
      est_.where = th.loc;
    }
  }
};

}  // namespace

MemoryEstimate estimateMemory(SpmdProgram& spmd, const frontend::CheckedProgram& prog, const RunOptions& opts) {
  MemoryEstimate est;
  MemoryWalker w(spmd, opts.jit, opts.engine == Engine::Jit, est);
  if (opts.checkpointEvery > 0) w.checkpointsAt({});
  w.walk(prog.host.body);
  w.finish();
  return est;
}

MemoryEstimate estimateMemory(const frontend::CheckedProgram& prog, const RunOptions& opts) {
  SpmdProgram spmd(prog, opts.seed);
  return estimateMemory(spmd, prog, opts);
}

bool checkMemory(const MemoryEstimate& est, const RunOptions& opts, Diagnostics& diags) {
  if (!opts.maxMemory || est.total() <= opts.maxMemory) return true;
  diags.error(est.where, "the run needs about " + formatBytes(est.total()) +
                             " of memory per rank, more than the limit of " + formatBytes(opts.maxMemory) +
                             " per rank" + (opts.maxMemorySource.empty() ? "" : " (" + opts.maxMemorySource + ")"));
  diags.note({}, "per rank: params " + formatBytes(est.paramBytes) + ", optimizer states " +
                     formatBytes(est.stateBytes) + ", and " + formatBytes(est.activationBytes) +
                     " for the largest computation, shown above (inputs " + formatBytes(est.inputBytes) +
                     ", intermediates " + formatBytes(est.workspaceBytes) + ", results " +
                     formatBytes(est.resultBytes) + ")");
  return false;
}

}  // namespace gsl::runtime
