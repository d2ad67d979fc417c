// What one rank of a run needs at its peak, estimated before it starts:
// params, optimizer states, and the largest single computation of fn main
// (or a checkpoint's group), from the per-rank programs and the JIT's
// buffer plans; and the --max-memory check against it.
#include "runtime/MemoryEstimate.h"

#include <algorithm>

#include "backend/Communicator.h"
#include "backend/Engine.h"
#include "backend/Kernels.h"
#include "backend/jit/JitEngine.h"
#include "ir/Loop.h"
#include "runtime/HostCheckpoint.h"
#include "runtime/Fibers.h"
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
  // `workspaces`: how many JIT workspaces the ranks of one process share
  // among `ranks` (see estimateMemory).
  MemoryWalker(SpmdProgram& prog, const backend::JitOptions& jit, const passes::MachineModel& machine, bool donating,
               int workspaces, int ranks, MemoryEstimate& est)
      : ShardingWalk(prog.programs()), jit_(jit), machine_(machine), donating_(donating), workspaces_(workspaces),
        ranks_(ranks), est_(est) {}

  void finish() {
    const ir::Module& m = programs_.module();
    // Each computation beside what the others leave behind: the loop
    // buffers every other function of the run keeps in the Tensor pool
    // (bounded by the pool's limit), and the collectives' kept scratch.
    uint64_t allLoops = 0;
    for (const auto& [name, b] : loopsByFunction_) allLoops = addBytes(allLoops, b);
    const uint64_t kept = addBytes(keptScratch_[0], keptScratch_[1]);
    for (Computation& c : computations_) {
      const uint64_t others = std::min<uint64_t>(allLoops - loopsByFunction_[c.fn], backend::kPoolMaxCachedBytes);
      const uint64_t extra = addBytes(addBytes(others, kept), c.transientScratch);
      c.work = addBytes(c.work, extra);
      if (c.training) {
        c.training->activationBytes = addBytes(c.training->activationBytes, extra);
        if (!est_.training || c.training->peak() > est_.training->peak()) est_.training = *c.training;
      }
      const uint64_t total = addBytes(addBytes(c.inputs, c.work), c.results);
      if (total > est_.activationBytes || !est_.where.valid()) {
        est_.activationBytes = total;
        est_.inputBytes = c.inputs;
        est_.workspaceBytes = c.work;
        est_.resultBytes = c.results;
        est_.where = c.where;
      }
    }
    for (const auto& p : m.params) {
      ir::TensorType local{p.type.dtype, ir::localShape(m, p.type, p.sharding)};
      est_.paramBytes = addBytes(est_.paramBytes, bytes(local));
    }
    for (const auto& [key, b] : states_) est_.stateBytes = addBytes(est_.stateBytes, b);
    if (est_.training) est_.training->paramBytes = est_.paramBytes;
    // A checkpoint save: each rank holds one group of the checkpoint whole
    // at a time (the params, then the states, as writeCheckpoint lists them).
    if (saves_) {
      // Each group whole, beside the scratch its gather program (the one
      // writeCheckpoint runs, built here and kept for the run) packs in.
      std::vector<std::string> names;
      std::vector<ir::TensorType> types;
      std::vector<std::optional<ir::Sharding>> shardings;
      for (const auto& p : m.params) {
        names.push_back(p.name);
        types.push_back(p.type);
        shardings.push_back(p.sharding);
      }
      for (const auto& [key, t] : stateTypes_) {
        names.push_back(key);
        types.push_back(t);
        shardings.push_back(stateShardings_[key]);
      }
      std::vector<uint64_t> sizes;
      for (const auto& t : types) sizes.push_back(bytes(t));
      uint64_t group = 0;
      for (auto [lo, hi] : checkpointGroups(sizes)) {
        uint64_t sum = 0;
        for (size_t i = lo; i < hi; ++i) sum += sizes[i];
        if (m.np > 1) {
          auto part = [&](const auto& v) { return std::vector(v.begin() + (std::ptrdiff_t)lo, v.begin() + (std::ptrdiff_t)hi); };
          sum = addBytes(sum, collectiveScratch(programs_.gatherProgram(part(names), part(types), part(shardings))));
        }
        group = std::max(group, sum);
      }
      // Beside the group: the JIT's workspace, kept at the largest size a
      // function of the run planned, and the kept scratch (the pool's
      // buffers are released).
      const uint64_t work = addBytes(maxWork_, addBytes(keptScratch_[0], keptScratch_[1]));
      if (addBytes(group, work) > est_.activationBytes) {
        est_.activationBytes = addBytes(group, work);
        est_.resultBytes = group;
        est_.workspaceBytes = work;
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
  const passes::MachineModel& machine_;  // the training step's predicted seconds
  bool donating_;
  int workspaces_, ranks_;
  MemoryEstimate& est_;
  std::map<std::string, uint64_t> states_;  // optimizer state -> bytes per rank
  std::map<std::string, ir::TensorType> stateTypes_;  // optimizer state -> its whole type
  std::map<std::string, std::optional<ir::Sharding>> stateShardings_;  // optimizer state -> its sharding
  std::optional<SourceLoc> saves_;
  uint64_t maxWork_ = 0;  // the largest planned workspace of a function the run calls
  // One function call of the walk, as measured; finish() adds what the
  // other calls leave behind and keeps the largest.
  struct Computation {
    std::string fn;
    uint64_t inputs = 0, work = 0, results = 0;
    uint64_t transientScratch = 0;  // its largest collective's scratch beyond the kept buffers
    SourceLoc where;
    std::optional<MemoryEstimate::TrainingStep> training;
  };
  std::vector<Computation> computations_;
  std::map<std::string, uint64_t> loopsByFunction_;  // function -> its loop buffers (the pool keeps them)
  uint64_t keptScratch_[2] = {0, 0};  // the communicator's kept scratch buffers (backend/Communicator.h)

  void saveCheckpoint(const HostStmt& s) override { checkpointsAt(s.loc); }

  static uint64_t bytes(const ir::TensorType& t) { return (uint64_t)t.byteSize(); }

  // One rank's share of a planned workspace: each OS thread keeps one
  // (backend/jit/JitEngine.cpp), used in turn by the rank fibers it runs.
  uint64_t workspaceShare(uint64_t b) const {
    return workspaces_ >= ranks_ ? b : (uint64_t)((unsigned __int128)b * workspaces_ / ranks_);
  }

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

  // The scratch the collectives of `f` (and of its loop bodies) pack
  // their blocks in (backend/Collectives.cpp, Communicator::scratch): up to
  // kKeptScratch per slot kept from call to call (into keptScratch_), a
  // larger one for its call only; returns the largest of those.
  uint64_t collectiveScratch(const ir::Function& f) {
    uint64_t transient = 0;
    for (const auto& op : f.ops) {
      if (op->body) transient = std::max(transient, collectiveScratch(*op->body));
      if (op->info().cls != ir::OpClass::Collective) continue;
      const std::array<size_t, 2> slot = backend::collectiveScratchBytes(*op);
      uint64_t call = 0;
      for (int i = 0; i < 2; ++i) {
        if (slot[i] > backend::Communicator::kKeptScratch) call = addBytes(call, slot[i]);
        else keptScratch_[i] = std::max(keptScratch_[i], slot[i]);
      }
      transient = std::max(transient, call);
    }
    return transient;
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
        const std::string key = "optimizer/" + tr->optimizer + "/" + st.param + "/" + st.slot;
        states_[key] = b;
        stateTypes_[key] = st.type;
        stateShardings_[key] = f.args[i]->sharding;
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
    const uint64_t planned = workspaceShare(backend::jitPlannedPeakBytes(f, jit_));
    maxWork_ = std::max(maxWork_, planned);
    const uint64_t loops = loopBuffers(f);
    loopsByFunction_[f.name] = loops;
    Computation c{f.name, inputs, addBytes(planned, loops), results, programs_.module().np > 1 ? collectiveScratch(f) : 0,
                  th.loc, std::nullopt};
    if (step && tr && tr->kind == ir::TrainRequest::Minimize) {
      // Its results: the loss, then each param's update (local, as its gradient), then the states.
      MemoryEstimate::TrainingStep t{0, 0, states, inputs, c.work, results, {}, th.loc};
      t.cost = passes::estimateCost(programs_.module(), f, machine_);
      for (size_t i = 1; i <= tr->params.size() && i < f.results.size(); ++i)
        t.gradBytes = addBytes(t.gradBytes, bytes(f.results[i]->type));
      c.training = t;
    }
    computations_.push_back(std::move(c));
  }
};

}  // namespace

MemoryEstimate estimateMemory(SpmdProgram& spmd, const frontend::CheckedProgram& prog, const RunOptions& opts) {
  MemoryEstimate est;
  // Thread ranks beyond the cores run as fibers on one OS thread per core
  // (runtime/Fibers.h, as runRanks does), sharing that thread's workspace;
  // an MPI rank is a process of its own.
  const int ranks = opts.mpi ? 1 : (int)std::max<int64_t>(1, spmd.programs().module().np);
  MemoryWalker w(spmd, opts.jit, opts.machine, opts.engine == Engine::Jit, fibers::workersFor(ranks), ranks, est);
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
