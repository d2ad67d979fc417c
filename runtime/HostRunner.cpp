// How one rank runs the host script: the HostWalker's hooks as they run
// (loops run, the branch taken, thunks called on the rank's engine),
// print and save on rank 0, and the safe points where it stops on an
// interrupt.
#include "runtime/HostRunner.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>

#include "backend/Npy.h"
#include "runtime/Batches.h"
#include "runtime/Distribute.h"
#include "runtime/HostCheckpoint.h"
#include "runtime/HostWalk.h"
#include "runtime/Progress.h"
#include "runtime/RankModel.h"
#include "runtime/TrainingStep.h"
#include "support/Interrupt.h"
#include "support/Trace.h"

namespace gsl::runtime {

using backend::Tensor;

namespace {

// One rank running the host script: loops run, the branch taken, each
// thunk on the rank's engine.
class RankRunner : public HostWalker<HostValue> {
 public:
  RankRunner(SpmdProgram& prog, const frontend::HostProgram& host, const RunOptions& o, int rank,
             backend::Communicator& comm, std::ostream& out, MpiComm* mpi, const Diagnostics& diags)
      : host_(host),
        opts_(o),
        rank_(rank),
        comm_(comm),
        out_(out),
        mpi_(mpi),
        diags_(diags),
        model_(prog, o, rank, comm),
        batches_(prog.module(), host.datasets, o.seed, rank, mpi != nullptr),
        progress_(rank, o.progress) {
    if (!o.resume.empty()) resumeFrom(model_, o.resume, mpi_ != nullptr);
    progress_.openLog(o.logPath);
  }

  void run() {
    try {
      block(host_.body);
    } catch (const Interrupted&) {
      progress_.flushLogRecord();
      progress_.clear();  // the message goes on a line of its own
      out_.flush();
      throw;
    }
    progress_.flushLogRecord();
    progress_.show();
    progress_.clear();
    out_.flush();
  }

 private:
  const frontend::HostProgram& host_;
  const RunOptions& opts_;
  int rank_;
  backend::Communicator& comm_;
  std::ostream& out_;
  MpiComm* mpi_;
  const Diagnostics& diags_;
  RankModel model_;
  Batcher batches_;
  Progress progress_;

  // A safe point: throws Interrupted when this process (or, with `stopped`,
  // this rank's own work) was interrupted. MPI ranks first agree (one small
  // all-reduce over every rank), so all of them stop at the same point and
  // none is left waiting in a collective for a rank that stopped. Every
  // rank calls it at the same points of the host script.
  void pollInterrupt(bool stopped = false) {
    stopped = stopped || interruptRequested();
    if (mpi_) stopped = mpi_->anyRank(stopped);
    if (stopped) throw Interrupted();
  }

  HostValue leaf(const HostLeaf& l) override {
    switch (l.kind) {
      case HostLeaf::Var: break;  // HostWalker::input
      case HostLeaf::Exists: {
        std::error_code ec;
        const bool found = std::filesystem::exists(l.name, ec);
        // Every rank looks before any goes on (to a save that creates the
        // file): otherwise a late rank sees a file an early one just wrote,
        // takes the other branch, and the ranks' collectives no longer match.
        comm_.barrier();
        return {Tensor::scalarBool(found), std::nullopt};
      }
      case HostLeaf::Load: {
        Tensor t;
        try {
          t = backend::readNpy(l.name);
        } catch (const backend::NpyError& e) {
          failReading(l.loc, e.what(), mpi_ != nullptr);
        }
        if (t.type() != l.type)
          throw RankError(l.loc, l.name + ": the file holds " + t.type().str() + " but load declares " + l.type.str());
        return {localBlock(model_.prog.module(), t, leafSharding(l), rank_), leafSharding(l)};
      }
      case HostLeaf::StartStep: return {Tensor::scalarI32((int32_t)model_.training.startStep), std::nullopt};
      case HostLeaf::Batch: return batches_.batch(l, (int64_t)whole(*l.sub).item());
      case HostLeaf::Minimize: return minimize(l);
      case HostLeaf::Evaluate: return evaluate(l);
    }
    return {};
  }

  // evaluate(loss, data): the loss (forward only) on each validation batch
  // in order, whole on every rank, and their mean. Every rank runs the
  // same batches.
  HostValue evaluate(const HostLeaf& l) {
    const Thunk& st = *l.sub;
    const int64_t n = batches_.validationBatches(l);
    double sum = 0;
    for (int64_t k = 0; k < n; ++k) {
      if (!mpi_) throwIfInterrupted();
      std::vector<HostValue> in;
      for (const HostLeaf& lf : st.leaves) in.push_back(batches_.validationBatch(l, lf.index, k));
      sum += call(st, in, true)[0].local.item();
    }
    return {Tensor::scalarF32((float)(sum / (double)n)), std::nullopt};
  }

  // The aux outputs of each training step's last run, for the leaves after
  // its loss's (HostLeaf::index > 0).
  std::map<const Thunk*, std::vector<HostValue>> stepAux_;

  // One training step: opt.minimize(loss, args...), and the checkpoint
  // --checkpoint-every asks for after it. Its value is the loss (leaf
  // index 0, which runs the step); leaf k > 0 takes aux output k of that run.
  HostValue minimize(const HostLeaf& l) {
    const Thunk& st = *l.sub;
    if (l.index > 0) {
      auto it = stepAux_.find(&st);
      GSL_ASSERT(it != stepAux_.end(), "an aux output of a training step before its loss");
      return it->second.at((size_t)l.index - 1);
    }
    std::vector<HostValue> values;
    for (const auto& lf : st.leaves) values.push_back(input(lf));
    batches_.readPending(*st.fn, values);
    StepResult r = trainingStep(model_, l, values, progress_);
    if (!r.aux.empty()) stepAux_[&st] = std::move(r.aux);
    if (opts_.checkpointEvery > 0 && r.step % opts_.checkpointEvery == 0) checkpoint(opts_.checkpointPath, st.loc);
    return r.loss;
  }

  // log_metric(name, value): into the last step's --log record and the
  // progress line (from the next step's line on).
  void logMetric(const HostStmt& s) override {
    Tensor v = whole(s.value);
    progress_.metric(s.names[0], v);
  }

  // log_moe(name, stats): the MoE layers' telemetry into the last step's
  // --log record and the progress line, and, when tracing, counter events
  // on rank 0's track (docs/moe.md, "Telemetry"). Every rank evaluates the
  // value (it may need a collective); rank 0 reports it.
  void logMoe(const HostStmt& s) override {
    Tensor v = whole(s.value);
    if (rank_ != 0) return;
    const std::vector<MoeLayerStats> layers = moeLayers(v);
    progress_.moe(s.names[0], layers);
    if (!trace::current) return;
    for (size_t l = 0; l < layers.size(); ++l) {
      const MoeLayerStats& m = layers[l];
      const std::string name = s.names[0] + "[" + std::to_string(l) + "]";
      trace::counter("moe", name,
                     {{"dropped", m.dropped}, {"overload", m.overload}, {"entropy", m.entropy}, {"aux", m.aux}});
      std::vector<std::pair<std::string, double>> tokens;
      if (m.tokens.size() <= kMoeTokensListed) {
        for (size_t e = 0; e < m.tokens.size(); ++e) tokens.push_back({"e" + std::to_string(e), m.tokens[e]});
      } else {
        tokens = {{"min", m.tokensMin()}, {"mean", m.tokensMean()}, {"max", m.tokensMax()}};
      }
      trace::counter("moe", name + " tokens", std::move(tokens));
    }
  }

  void loadCheckpoint(const HostStmt& s) override { loadParams(model_, s.path, s.loc, mpi_ != nullptr); }

  std::vector<HostValue> call(const Thunk& th, const std::vector<HostValue>& given, bool gather) override {
    // `let (x, y) = batch(data, step)`: the halves stay unmade until a
    // thunk takes them.
    if (isBatchLet(th)) return given;
    std::vector<HostValue> in = given;
    batches_.readPending(*th.fn, in);
    std::vector<Tensor> args;
    for (const HostValue& v : in) args.push_back(v.local);
    const ir::Function& f = model_.prog.programs().perRank(th, shardingsOf(in), gather);
    std::vector<Tensor> res;
    try {
      trace::Scope traced("function", f.name);
      if (traced) {
        traced.arg("line", (int64_t)th.loc.line);
        traceSchedule(traced, model_, f);
      }
      res = model_.engine->call(f, args);
    } catch (const backend::RuntimeError& e) {
      throw RankError(e.loc.valid() ? e.loc : th.loc, e.what());
    }
    std::vector<HostValue> out;
    for (size_t i = 0; i < res.size(); ++i) out.push_back({res[i], f.resultShardings[i]});
    return out;
  }

  Tensor whole(const Thunk& th) { return eval(th, true)[0].local; }

  void beforeStatement(const HostStmt&) override {
    if (!mpi_) throwIfInterrupted();  // threads: a flag read, at every statement
  }

  void forLoop(const HostStmt& s) override {
    int64_t lo = (int64_t)whole(s.lo).item(), hi = (int64_t)whole(s.hi).item();
    if (lo >= hi && !opts_.resume.empty() && rank_ == 0 && startsAtStartStep(s)) {
      progress_.clear();
      std::cerr << diags_.render({Severity::Warning, s.lo.loc,
                                  "--resume " + opts_.resume + " continues at step " + std::to_string(lo) +
                                      ", at or past this loop's end (" + std::to_string(hi) +
                                      "): no training step runs (a later save keeps the checkpoint's "
                                      "optimizer states)"})
                << std::flush;
    }
    progress_.enterLoop(lo, hi);
    for (int64_t i = lo; i < hi; ++i) {
      pollInterrupt();
      progress_.iteration(i);
      scopes_.emplace_back();
      scopes_.back()[s.names[0]] = {Tensor::scalarI32((int32_t)i), std::nullopt};
      block(s.body);
      scopes_.pop_back();
      progress_.iterationEnded();
    }
    progress_.leaveLoop();
  }

  // Whether a loop's start is start_step() (a training loop that --resume continues).
  static bool startsAtStartStep(const HostStmt& s) {
    return std::any_of(s.lo.leaves.begin(), s.lo.leaves.end(),
                       [](const HostLeaf& l) { return l.kind == HostLeaf::StartStep; });
  }

  void ifElse(const HostStmt& s) override {
    bool c = whole(s.cond).item() != 0;
    scopes_.emplace_back();
    block(c ? s.body : s.elseBody);
    scopes_.pop_back();
  }

  void print(const HostStmt& s) override {
    std::string line;
    for (size_t i = 0; i < s.printArgs.size(); ++i) {
      if (i) line += " ";
      const auto& a = s.printArgs[i];
      if (!a.value) {
        line += a.text;
      } else if (a.bytes) {
        // print_text: the elements, in C order, as the bytes they are; a
        // control byte other than newline and tab as \xNN.
        Tensor t = whole(*a.value);
        const int32_t* v = t.i32();
        for (int64_t k = 0; k < t.size(); ++k) {
          if (v[k] < 0 || v[k] > 255)
            throw RankError(s.loc, "print_text: element " + std::to_string(k) + " is " + std::to_string(v[k]) +
                                       ", not a byte (0..255)");
          if ((v[k] < 32 && v[k] != '\n' && v[k] != '\t') || v[k] == 127) {
            char esc[8];
            std::snprintf(esc, sizeof esc, "\\x%02x", (unsigned)v[k]);
            line += esc;
          } else {
            line += (char)v[k];
          }
        }
      } else {
        line += whole(*a.value).str();
      }
    }
    if (rank_ == 0) {
      progress_.clear();
      out_ << line << "\n";
    }
  }

  void save(const HostStmt& s) override {
    Tensor t = whole(s.value);
    if (rank_ == 0) {
      try {
        backend::writeNpy(s.path, t);
      } catch (const backend::NpyError& e) {
        throw RankError(s.loc, e.what());
      }
    }
    // Nobody reads the file before it is there (a later load or exists):
    // the barrier, or under MPI the agreement's all-reduce.
    if (!mpi_) comm_.barrier();
    pollInterrupt();
  }

  void saveCheckpoint(const HostStmt& s) override { checkpoint(s.path, s.loc, s.optimizer); }

  // Writes a checkpoint (every rank takes part). An interrupt abandons a
  // checkpoint being written (its temp file is removed; an older
  // checkpoint at the path stays as it was).
  void checkpoint(const std::string& path, SourceLoc loc, bool optimizer = true) {
    bool stopped = false;
    try {
      writeCheckpoint(model_, path, loc, optimizer, opts_.lastCheckpoint);
    } catch (const Interrupted&) {
      if (!mpi_) throw;  // threads: the world's abort releases the others
      stopped = true;
    }
    if (!mpi_) comm_.barrier();
    pollInterrupt(stopped);
  }
};

}  // namespace

void runRank(SpmdProgram& prog, const frontend::HostProgram& host, const RunOptions& opts, int rank,
             backend::Communicator& comm, std::ostream& out, MpiComm* mpi, const Diagnostics& diags) {
  RankRunner r(prog, host, opts, rank, comm, out, mpi, diags);
  r.run();
}

}  // namespace gsl::runtime
