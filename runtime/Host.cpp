#include "runtime/Host.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "backend/Engine.h"
#include "backend/Npy.h"
#include "backend/Random.h"
#include "backend/jit/JitEngine.h"
#include "ir/Printer.h"
#include "passes/Pipeline.h"
#include "passes/Training.h"
#include "runtime/Checkpoint.h"
#include "runtime/CompileAhead.h"
#include "runtime/Data.h"
#include "runtime/Distribute.h"
#include "runtime/HostCheckpoint.h"
#include "runtime/HostWalk.h"
#include "runtime/MemoryEstimate.h"
#include "runtime/MpiComm.h"
#include "runtime/SpmdProgram.h"
#include "runtime/TestFaults.h"
#include "runtime/ThreadComm.h"
#include "runtime/Trace.h"
#include "support/Interrupt.h"

namespace gsl::runtime {

using backend::Tensor;
using frontend::HostLeaf;
using frontend::HostStmt;
using frontend::Thunk;
using ir::Sharding;

namespace {

// One half of a batch not made yet: it is made when a thunk takes it, only
// the block this rank holds as that thunk wants it (wantedSharding); for
// npy_pairs only those rows are read from the file.
struct PendingBatch {
  const frontend::Dataset* ds = nullptr;
  int64_t step = 0;
  int index = 0;  // 0 inputs, 1 labels (targets)
  SourceLoc loc;  // the batch(...) call
};

struct HostValue {
  Tensor local;
  std::optional<Sharding> sharding;
  std::optional<PendingBatch> pending;  // set: `local` is not made yet

  HostValue() = default;
  HostValue(Tensor l, std::optional<Sharding> s) : local(std::move(l)), sharding(std::move(s)) {}
  explicit HostValue(const PendingBatch& p) : pending(p) {}
};


// One rank running the host script: loops run, the branch taken, each
// thunk on the rank's engine.
class RankRunner : public HostWalker<HostValue> {
 public:
  // `mpi`: this rank's MPI communicator when ranks are MPI processes (to
  // agree on stopping), else null.
  // `diags` renders the warnings rank 0 prints while it runs.
  RankRunner(SpmdProgram& prog, const frontend::HostProgram& host, const RunOptions& o, int rank,
             backend::Communicator& comm, std::ostream& out, MpiComm* mpi, const Diagnostics& diags)
      : prog_(prog), host_(host), opts_(o), rank_(rank), comm_(comm), out_(out), mpi_(mpi), diags_(diags) {
    const ir::Module& m = prog.module();
    for (const auto& p : m.params) params_[p.name] = prog.localParam(p, rank);
    backend::KernelContext ctx;
    ctx.seed = o.seed;
    ctx.rank = rank;
    ctx.comm = &comm;
    ctx.param = [this](const std::string& n) -> const Tensor& { return params_.at(n); };
    ctx.mesh = [&m](const std::string& n) -> const ir::Mesh& { return *m.findMesh(n); };
    engine_ = o.engine == Engine::Jit ? backend::makeJitEngine(ctx, o.jit) : backend::makeInterpreterEngine(ctx);
    if (!o.resume.empty()) restore(o.resume);
    if (rank == 0 && !o.logPath.empty()) {
      log_.open(o.logPath, std::ios::out | std::ios::trunc);
      if (!log_) throw RankError({}, o.logPath + ": cannot write the metrics log");
    }
  }

  void run() {
    try {
      block(host_.body);
    } catch (const Interrupted&) {
      flushLogRecord();
      clearProgress();  // the message goes on a line of its own
      out_.flush();
      throw;
    }
    flushLogRecord();
    showProgress();
    clearProgress();
    out_.flush();
  }

 private:
  SpmdProgram& prog_;
  const frontend::HostProgram& host_;
  const RunOptions& opts_;
  int rank_;
  backend::Communicator& comm_;
  std::ostream& out_;
  MpiComm* mpi_;
  const Diagnostics& diags_;
  std::map<std::string, Tensor> params_;
  std::unique_ptr<backend::Engine> engine_;
  // Training state: optimizer states ("opt/param/slot" -> this rank's
  // block), step counters per optimizer, whole states read by --resume
  // (sliced when the step that uses them is built).
  std::map<std::string, HostValue> optStates_;
  std::map<std::string, ir::TensorType> optStateTypes_;  // each state's whole type
  std::map<std::string, int64_t> optSteps_;
  std::map<std::string, Tensor> resumedStates_;  // whole; kept by every later save (none is dropped)
  int64_t startStep_ = 0;
  std::map<std::string, Tensor> npyTokens_;
  // npy_pairs data sets by name: their two files (this rank's own reader
  // of each) and the shuffled order.
  struct PairsData {
    std::unique_ptr<NpyRows> x, y;
    std::unique_ptr<ShuffledOrder> order;
  };
  std::map<std::string, PairsData> pairs_;
  // Loops being run (for the progress line's total and ETA).
  struct Loop {
    int64_t lo, hi, i;
  };
  std::vector<Loop> loops_;
  std::chrono::steady_clock::time_point trainStart_;
  double compileAtStart_ = 0;  // jitThreadReadySeconds() at trainStart_
  int64_t stepsRun_ = 0;
  bool progressShown_ = false;
  std::ofstream log_;
  // The --log record of the last step, written when the next step starts
  // or the run ends (log_metric adds to it); the metrics' latest values,
  // in the order they were first logged (the progress line).
  std::optional<nlohmann::ordered_json> logRecord_;
  struct Metric {
    std::string name, text;
    int64_t step;  // the loop step that logged it
  };
  std::vector<Metric> metrics_;

  static std::string stateKey(const std::string& opt, const std::string& param, const std::string& slot) {
    return "optimizer/" + opt + "/" + param + "/" + slot;
  }

  void restore(const std::string& path) {
    const ir::Module& m = prog_.module();
    std::map<std::string, std::string> meta;
    const std::map<std::string, Tensor>* all = nullptr;
    try {
      all = &prog_.resumed(path, meta);
    } catch (const CheckpointError& e) {
      std::error_code ec;
      if (mpi_ && !std::filesystem::exists(path, ec))  // docs/cluster.md: where --resume reads
        throw RankError({}, std::string(e.what()) + " on host " + MpiSession::hostName() +
                                " (--resume reads the checkpoint on every host: put it on a file system the hosts "
                                "share, or copy it to the same path on each host)");
      throw RankError({}, e.what());
    }
    for (const auto& p : m.params) {
      auto it = all->find(p.name);
      if (it == all->end()) throw RankError({}, path + ": the checkpoint has no param '" + p.name + "'");
      if (it->second.type() != p.type)
        throw RankError({}, path + ": param '" + p.name + "' is " + it->second.type().str() + " in the checkpoint but " +
                                p.type.str() + " in the program");
      params_[p.name] = localBlock(m, it->second, p.sharding, rank_);
    }
    for (const auto& [name, t] : *all) {
      if (name.rfind("optimizer/", 0) == 0) {
        std::string opt = name.substr(10, name.find('/', 10) - 10);
        if (!m.findOptimizer(opt))
          throw RankError({}, path + ": the checkpoint has states of optimizer '" + opt + "', which the program does not declare");
        resumedStates_[name] = t;
      } else if (!m.findParam(name)) {
        throw RankError({}, path + ": the checkpoint has a tensor '" + name + "' that is no param of the program");
      }
    }
    for (const auto& [k, v] : meta)
      if (k.rfind("step/", 0) == 0) {
        optSteps_[k.substr(5)] = std::stoll(v);
        startStep_ = std::max<int64_t>(startStep_, std::stoll(v));
      }
  }

  [[noreturn]] void fail(SourceLoc l, const std::string& m) { throw RankError(l, m); }

  // A file this rank could not read: under MPI the ranks may run on several
  // hosts, each reading its own file system, so the message names the host.
  [[noreturn]] void failReading(SourceLoc l, const std::string& m) { runtime::failReading(l, m, mpi_ != nullptr); }

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
          failReading(l.loc, e.what());
        }
        if (t.type() != l.type)
          fail(l.loc, l.name + ": the file holds " + t.type().str() + " but load declares " + l.type.str());
        return {localBlock(prog_.module(), t, leafSharding(l), rank_), leafSharding(l)};
      }
      case HostLeaf::StartStep: return {Tensor::scalarI32((int32_t)startStep_), std::nullopt};
      case HostLeaf::Batch: return batch(l);
      case HostLeaf::Minimize: return minimize(l);
    }
    return {};
  }

  HostValue batch(const HostLeaf& l) {
    int64_t step = (int64_t)whole(*l.sub).item();
    const frontend::Dataset* ds = nullptr;
    for (const auto& d : host_.datasets)
      if (d.name == l.name) ds = &d;
    GSL_ASSERT(ds, "unknown dataset");
    if (step < 0 && ds->kind == "pairs") fail(l.loc, "supervised data: negative step " + std::to_string(step));
    return HostValue(PendingBatch{ds, step, l.index, l.loc});
  }

  // A batch half of a token data set (synthetic or npy_tokens), whole.
  Tensor tokenBatch(const PendingBatch& p) {
    const frontend::Dataset* ds = p.ds;
    try {
      if (ds->kind == "npy") {
        auto it = npyTokens_.find(ds->path);
        if (it == npyTokens_.end()) {
          Tensor t;
          try {
            t = readTokenFile(ds->path, ds->vocab);
          } catch (const backend::NpyError& e) {
            failReading(ds->loc, e.what());
          } catch (const std::runtime_error& e) {
            fail(ds->loc, e.what());
          }
          it = npyTokens_.emplace(ds->path, t).first;
        }
        auto b = npyTokenBatch(it->second, p.step, ds->batch, ds->seq);
        return p.index == 0 ? b.inputs : b.targets;
      }
      auto b = syntheticBatch(ds->kind, opts_.seed, p.step, ds->batch, ds->seq, ds->vocab);
      return p.index == 0 ? b.inputs : b.targets;
    } catch (const RankError&) {
      throw;
    } catch (const std::runtime_error& e) {
      fail(p.loc, e.what());
    }
  }

  // An npy_pairs data set's files, opened (the headers read and checked)
  // at its first batch.
  PairsData& pairsData(const frontend::Dataset& ds) {
    auto it = pairs_.find(ds.name);
    if (it != pairs_.end()) return it->second;
    PairsData d;
    try {
      d.x = std::make_unique<NpyRows>(ds.path, false);
      d.y = std::make_unique<NpyRows>(ds.labelsPath, true);
    } catch (const backend::NpyError& e) {
      failReading(ds.loc, e.what());
    } catch (const std::runtime_error& e) {
      fail(ds.loc, e.what());
    }
    if (d.x->shape().size() < 2 || d.x->rowElements() != ds.features)
      fail(ds.loc, ds.path + ": npy_pairs needs inputs of N rows of " + std::to_string(ds.features) +
                       " values (features=" + std::to_string(ds.features) + "; a row may have any shape), got shape " +
                       ir::shapeStr(d.x->shape()));
    if (d.y->shape().size() != 1)
      fail(ds.loc, ds.labelsPath + ": npy_pairs needs labels of shape [N], got shape " +
                       ir::shapeStr(d.y->shape()));
    if (d.x->rows() != d.y->rows())
      fail(ds.loc, ds.path + " has " + std::to_string(d.x->rows()) + " rows but " + ds.labelsPath + " has " +
                       std::to_string(d.y->rows()) + " labels");
    try {
      d.order = std::make_unique<ShuffledOrder>(d.x->rows(), ds.batch, opts_.seed);
    } catch (const std::runtime_error& e) {
      fail(ds.loc, e.what());
    }
    return pairs_.emplace(ds.name, std::move(d)).first->second;
  }

  // Reads a pending batch half as this rank's block under `s`: the batch
  // rows this rank holds (its block of the batch's row positions, so
  // whatever localBlock's rule is, the rows agree with it), read from the
  // file, then the block of the other dims.
  HostValue readBatch(const PendingBatch& p, const std::optional<Sharding>& s) {
    const frontend::Dataset& ds = *p.ds;
    if (ds.kind != "pairs") return {localBlock(prog_.module(), tokenBatch(p), s, rank_), s};
    PairsData& d = pairsData(ds);
    NpyRows& file = p.index == 0 ? *d.x : *d.y;
    std::vector<int64_t> rows;
    try {
      rows = d.order->batchRows(p.step);
    } catch (const std::runtime_error& e) {
      fail(p.loc, e.what());
    }
    const ir::Module& m = prog_.module();
    const bool split0 = s && !s->isReplicated() && !s->dims[0].empty();
    if (split0) {
      Tensor pos(ir::TensorType{ir::DType::I32, {ds.batch}});
      for (int64_t i = 0; i < ds.batch; ++i) pos.i32()[i] = (int32_t)i;
      Tensor mine = localBlock(m, pos, Sharding{s->mesh, {s->dims[0]}, {}}, rank_);
      std::vector<int64_t> held;
      for (int64_t i = 0; i < mine.size(); ++i) held.push_back(rows[(size_t)mine.i32()[i]]);
      rows = std::move(held);
    }
    ir::Shape shape{(int64_t)rows.size()};
    if (p.index == 0) shape.push_back(ds.features);
    Tensor block(ir::TensorType{p.index == 0 ? ir::DType::F32 : ir::DType::I32, shape});
    {
      trace::Scope traced("data", ds.name);
      const uint64_t before = file.bytesRead();
      try {
        file.read(rows, block.raw());
      } catch (const std::runtime_error& e) {
        fail(ds.loc, e.what());
      }
      if (traced) {
        traced.arg("file", p.index == 0 ? ds.path : ds.labelsPath);
        traced.arg("step", p.step);
        traced.arg("rows", (int64_t)rows.size());
        traced.arg("bytes", (int64_t)(file.bytesRead() - before));
      }
    }
    if (s && !s->isReplicated()) {
      Sharding rest = *s;
      rest.dims[0].clear();
      if (!rest.isReplicated()) block = localBlock(m, block, rest, rank_);
    }
    return {block, s};
  }

  // The inputs of thunk `th` as its function takes them: pending batch
  // halves read as it wants them.
  void readPending(const ir::Function& fn, std::vector<HostValue>& in) {
    for (size_t i = 0; i < in.size(); ++i)
      if (in[i].pending) in[i] = readBatch(*in[i].pending, wantedSharding(fn, i));
  }

  // One training step: opt.minimize(loss, args...).
  HostValue minimize(const HostLeaf& l) {
    const Thunk& st = *l.sub;
    std::vector<Tensor> args;
    std::vector<std::optional<Sharding>> in;
    int64_t tokens = 0;
    bool examples = false;
    std::vector<HostValue> values;
    for (const auto& lf : st.leaves) values.push_back(input(lf));
    readPending(*st.fn, values);
    for (size_t li = 0; li < st.leaves.size(); ++li) {
      const HostLeaf& lf = st.leaves[li];
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
    const ir::Function& f = prog_.programs().perRank(st, in, false);
    const ir::TrainRequest& tr = *st.fn->train;
    const std::string& opt = tr.optimizer;
    int64_t t = ++optSteps_[opt];
    args.push_back(Tensor::scalarI32((int32_t)t));
    const ir::Module& m = prog_.module();
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
    for (size_t i = 0; i < tr.states.size(); ++i) {
      const auto& slot = tr.states[i];
      std::string key = stateKey(opt, slot.param, slot.slot);
      const ir::Value* a = f.args[firstState + i];
      auto it = optStates_.find(key);
      optStateTypes_[key] = slot.type;
      if (it == optStates_.end()) {
        std::optional<Sharding> sh = a->sharding;
        auto r = resumedStates_.find(key);
        if (r != resumedStates_.end()) {
          if (r->second.type() != slot.type)
            throw RankError(l.loc, "the resumed checkpoint's '" + key + "' is " + r->second.type().str() + ", expected " +
                                       slot.type.str());
          it = optStates_.emplace(key, HostValue{localBlock(m, r->second, sh, rank_), sh}).first;
        } else {
          it = optStates_.emplace(key, HostValue{Tensor(a->type), sh}).first;  // zeros
        }
      }
      args.push_back(std::move(it->second.local));
    }
    if (stepsRun_ == 0) {
      trainStart_ = std::chrono::steady_clock::now();
      compileAtStart_ = backend::jitThreadReadySeconds();
    }
    std::vector<Tensor> res;
    try {
      trace::Scope traced("function", f.name);
      if (traced) {  // a training step: its optimizer's step number and source line
        traced.arg("train_step", t);
        traced.arg("line", (int64_t)st.loc.line);
      }
      res = engine_->call(f, args, donated);
    } catch (const backend::RuntimeError& e) {
      fail(e.loc.valid() ? e.loc : st.loc, e.what());
    }
    args.clear();
    for (size_t i = 0; i < tr.params.size(); ++i) params_[tr.params[i]] = res[1 + i];
    for (size_t i = 0; i < tr.states.size(); ++i)
      optStates_[stateKey(opt, tr.states[i].param, tr.states[i].slot)].local = res[1 + tr.params.size() + i];
    ++stepsRun_;
    double loss = res[0].item();
    report(t, loss, tokens, examples);
    if (opts_.checkpointEvery > 0 && t % opts_.checkpointEvery == 0) checkpoint(opts_.checkpointPath, st.loc);
    return {res[0], f.resultShardings[0]};
  }

  // The progress line (rank 0, stderr) and the metrics log.
  // `examples`: the throughput counts rows (examples/s), not tokens/s.
  void report(int64_t t, double loss, int64_t tokens, bool examples) {
    if (rank_ != 0) return;
    // Compile time is not training time: tokens/s and the ETA leave it out.
    const double compileS = backend::jitThreadReadySeconds() - compileAtStart_;
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - trainStart_).count();
    elapsed = std::max(elapsed - compileS, 1e-9);
    double tps = elapsed > 0 ? (double)(tokens * stepsRun_) / elapsed : 0;
    if (log_.is_open()) {
      // The loss as its float prints (shortest digits); a NaN or infinite
      // loss is null (JSON has no number for it).
      nlohmann::ordered_json line = {{"step", t},
                                     {"loss", std::strtod(backend::formatF32((float)loss).c_str(), nullptr)},
                                     {examples ? "examples_per_s" : "tokens_per_s", (int64_t)tps},
                                     {"elapsed_s", elapsed},
                                     {"compile_s", backend::jitCompileSeconds()}};
      flushLogRecord();
      logRecord_ = line;
    }
    if (!opts_.progress) return;
    // The step as the program numbers it (the loop's variable), and how
    // many of the loop's steps are done; without a loop, the optimizer's
    // step number.
    Progress p;
    p.step = t;
    if (!loops_.empty()) {
      p.step = loops_.back().i;
      p.done = loops_.back().i - loops_.back().lo + 1;
      p.total = loops_.back().hi - loops_.back().lo;
    }
    p.depth = loops_.size();
    p.loss = loss;
    p.rate = tps;
    p.examples = examples;
    p.hasInputs = tokens > 0;
    if (p.total > p.done && stepsRun_ > 0) p.eta = elapsed / (double)stepsRun_ * (double)(p.total - p.done);
    progress_ = p;
    if (loops_.empty()) showProgress();  // else when the loop's iteration ends (its metrics logged)
  }

  // The progress line of the last step (rank 0, stderr), shown when its
  // loop iteration ends, so that it has the metrics the program logged in
  // that iteration; a metric logged at an earlier step says which.
  struct Progress {
    int64_t step = 0, done = 0, total = 0;
    size_t depth = 0;  // the loops around the step (shown when the innermost one's iteration ends)
    double loss = 0, rate = 0, eta = -1;
    bool examples = false, hasInputs = false;
  };
  std::optional<Progress> progress_;

  void showProgress() {
    if (!progress_) return;
    const Progress p = *progress_;
    progress_.reset();
    std::string line = "step " + std::to_string(p.step);
    if (p.total) line += "  " + std::to_string(p.done) + "/" + std::to_string(p.total);
    line += "  loss " + backend::formatF32((float)p.loss);
    for (const Metric& m : metrics_) {
      line += "  " + m.name + " " + m.text;
      if (m.step != p.step) line += " (step " + std::to_string(m.step) + ")";
    }
    char tail[96];
    if (p.hasInputs) {  // a loss of no inputs has no throughput
      std::snprintf(tail, sizeof tail, "  %.0f %s/s", p.rate, p.examples ? "examples" : "tokens");
      line += tail;
    }
    if (p.eta >= 0) {
      std::snprintf(tail, sizeof tail, "  ETA %.0fs", p.eta);
      line += tail;
    }
    static const bool tty = isatty(2);
    if (tty) {
      std::cerr << "\r\033[K" << line << std::flush;
      progressShown_ = true;
    } else {
      int64_t every = p.total > 0 ? std::max<int64_t>(1, p.total / 10) : 10;
      if (p.done % every == 0 || p.done == p.total || stepsRun_ == 1) std::cerr << line << "\n";
    }
  }

  void flushLogRecord() {
    if (!logRecord_) return;
    log_ << logRecord_->dump() << "\n";
    log_.flush();
    logRecord_.reset();
  }

  // log_metric(name, value): into the last step's --log record and the
  // progress line (from the next step's line on).
  void logMetric(const HostStmt& s) override {
    Tensor v = whole(s.value);
    if (rank_ != 0) return;
    const std::string& name = s.names[0];
    std::string text = v.dtype() == ir::DType::F32 ? backend::formatF32((float)v.item()) : std::to_string((int64_t)v.item());
    const int64_t step = loops_.empty() ? 0 : loops_.back().i;
    auto it = std::find_if(metrics_.begin(), metrics_.end(), [&](const Metric& m) { return m.name == name; });
    if (it == metrics_.end()) metrics_.push_back({name, text, step});
    else *it = {name, text, step};
    if (logRecord_) {
      if (v.dtype() == ir::DType::F32) (*logRecord_)[name] = std::strtod(text.c_str(), nullptr);
      else (*logRecord_)[name] = (int64_t)v.item();
    }
  }

  void clearProgress() {
    if (progressShown_) {
      std::cerr << "\r\033[K" << std::flush;
      progressShown_ = false;
    }
  }

  // save_checkpoint(path): params, optimizer states and step counters. The
  // states are those of the steps run and those --resume read that no step
  // has used yet (another optimizer's, or all of them when no step ran):
  // a save never drops a state the run has. `optimizer` false (the
  // program's save_checkpoint(path, optimizer=false)) writes the params only.
  void writeCheckpoint(const std::string& path, SourceLoc loc, bool optimizer) {
    const ir::Module& m = prog_.module();
    std::vector<std::string> names;
    std::vector<Tensor> locals;
    std::vector<ir::TensorType> types;
    std::vector<std::optional<Sharding>> shardings;
    for (const auto& p : m.params) {
      names.push_back(p.name);
      locals.push_back(params_.at(p.name));
      types.push_back(p.type);
      shardings.push_back(p.sharding);
    }
    std::map<std::string, std::string> meta{{"format", "gsl"}};
    std::vector<NamedTensor> whole;  // states --resume read that no step used: whole already
    if (optimizer) {
      for (const auto& [key, v] : optStates_) {
        names.push_back(key);
        locals.push_back(v.local);
        // The whole type (a padded block does not say it).
        types.push_back(optStateTypes_.at(key));
        shardings.push_back(v.sharding);
      }
      for (const auto& [key, t] : resumedStates_)
        if (!optStates_.count(key)) whole.push_back({key, t});
      for (const auto& [opt, n] : optSteps_) meta["step/" + opt] = std::to_string(n);
    }
    // Rank 0 writes the file while the ranks gather it a group of tensors
    // at a time (kCheckpointGroupBytes whole, or one larger tensor): a rank
    // holds one group whole at a time, not the whole model. Rank 0's first
    // failure (a refused overwrite, a write error, an interrupt) stops its
    // writing, not its gathers: every rank runs the same collectives, and
    // rank 0 reports it after the last.
    std::unique_ptr<SafetensorsWriter> writer;
    std::exception_ptr failure;
    auto onRank0 = [&](const auto& f) {
      if (rank_ != 0 || failure) return;
      try {
        f();
      } catch (...) {
        failure = std::current_exception();
        writer.reset();  // removes the temp file
      }
    };
    onRank0([&] {
      refuseDroppingStates(path, loc, optimizer, names.size() + whole.size() > m.params.size());
      std::vector<SafetensorsWriter::Entry> layout;
      for (size_t i = 0; i < names.size(); ++i) layout.push_back({names[i], types[i]});
      for (const auto& nt : whole) layout.push_back({nt.name, nt.value.type()});
      writer = std::make_unique<SafetensorsWriter>(path, std::move(layout), meta);
    });
    std::vector<uint64_t> sizes;
    for (const auto& t : types) sizes.push_back((uint64_t)t.byteSize());
    backend::releaseTensorPool();  // the steps' cached buffers: the groups take their place
    for (auto [lo, hi] : checkpointGroups(sizes)) {
      auto part = [&](const auto& v) { return std::vector(v.begin() + (std::ptrdiff_t)lo, v.begin() + (std::ptrdiff_t)hi); };
      const ir::Function& g = prog_.programs().gatherProgram(part(names), part(types), part(shardings));
      std::vector<Tensor> gathered;
      {
        trace::Scope traced("function", g.name);
        gathered = engine_->call(g, part(locals));
      }
      onRank0([&] {
        for (const Tensor& t : gathered) writer->put(t);
      });
      // The group's whole tensors go back to the system, not to the pool
      // (whose cached buffers would hold the whole checkpoint at the end).
      gathered.clear();
      backend::releaseTensorPool();
    }
    onRank0([&] {
      for (const auto& nt : whole) writer->put(nt.value);
      writer->commit();
    });
    if (rank_ != 0) return;  // the caller's barrier waits for rank 0's write
    if (failure) {
      try {
        std::rethrow_exception(failure);
      } catch (const CheckpointError& e) {
        fail(loc, e.what());
      }
    }
    if (opts_.lastCheckpoint) *opts_.lastCheckpoint = path;
  }

  // A checkpoint with optimizer states is not overwritten by one without
  // them unless the program asked (optimizer=false): resuming from it would
  // silently restart the optimizer.
  void refuseDroppingStates(const std::string& path, SourceLoc loc, bool optimizer, bool hasStates) {
    if (hasStates || !optimizer) return;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) return;
    size_t old = 0;
    try {
      for (const std::string& n : safetensorsNames(path)) old += n.rfind("optimizer/", 0) == 0;
    } catch (const CheckpointError&) {
      return;  // not a checkpoint we can read: nothing of ours to keep
    }
    if (old > 0)
      fail(loc, path + " holds " + std::to_string(old) + " optimizer state" + (old == 1 ? "" : "s") +
                    " and this save would write none (no training step has run): not overwritten; "
                    "save_checkpoint(\"" + path + "\", optimizer=false) writes the params alone");
  }

  // load_checkpoint(path): every param of the program from the checkpoint
  // (inference after training); optimizer states and step counters are not
  // read, nor tensors of params the program does not declare.
  void loadCheckpoint(const HostStmt& s) override {
    const ir::Module& m = prog_.module();
    std::map<std::string, Tensor> all;
    try {
      for (auto& nt : readSafetensors(s.path, nullptr)) all[nt.name] = nt.value;
    } catch (const CheckpointError& e) {
      failReading(s.loc, e.what());
    }
    for (const auto& p : m.params) {
      auto it = all.find(p.name);
      if (it == all.end()) fail(s.loc, s.path + ": the checkpoint has no param '" + p.name + "'");
      if (it->second.type() != p.type)
        fail(s.loc, s.path + ": param '" + p.name + "' is " + it->second.type().str() + " in the checkpoint but " +
                        p.type.str() + " in the program");
    }
    for (const auto& p : m.params) params_[p.name] = localBlock(m, all.at(p.name), p.sharding, rank_);
  }

  std::vector<HostValue> call(const Thunk& th, const std::vector<HostValue>& given, bool gather) override {
    // `let (x, y) = batch(data, step)`: the halves stay unmade until a
    // thunk takes them.
    if (isBatchLet(th)) return given;
    std::vector<HostValue> in = given;
    readPending(*th.fn, in);
    std::vector<Tensor> args;
    for (const HostValue& v : in) args.push_back(v.local);
    const ir::Function& f = prog_.programs().perRank(th, shardingsOf(in), gather);
    std::vector<Tensor> res;
    try {
      trace::Scope traced("function", f.name);
      if (traced) traced.arg("line", (int64_t)th.loc.line);
      res = engine_->call(f, args);
    } catch (const backend::RuntimeError& e) {
      fail(e.loc.valid() ? e.loc : th.loc, e.what());
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
      clearProgress();
      std::cerr << diags_.render({Severity::Warning, s.lo.loc,
                                  "--resume " + opts_.resume + " continues at step " + std::to_string(lo) +
                                      ", at or past this loop's end (" + std::to_string(hi) +
                                      "): no training step runs (a later save keeps the checkpoint's "
                                      "optimizer states)"})
                << std::flush;
    }
    loops_.push_back({lo, hi, lo});
    for (int64_t i = lo; i < hi; ++i) {
      pollInterrupt();
      loops_.back().i = i;
      scopes_.emplace_back();
      scopes_.back()[s.names[0]] = {Tensor::scalarI32((int32_t)i), std::nullopt};
      block(s.body);
      scopes_.pop_back();
      if (progress_ && progress_->depth == loops_.size()) showProgress();
    }
    loops_.pop_back();
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
      line += a.value ? whole(*a.value).str() : a.text;
    }
    if (rank_ == 0) {
      clearProgress();
      out_ << line << "\n";
    }
  }

  void save(const HostStmt& s) override {
    Tensor t = whole(s.value);
    if (rank_ == 0) {
      try {
        backend::writeNpy(s.path, t);
      } catch (const backend::NpyError& e) {
        fail(s.loc, e.what());
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
      writeCheckpoint(path, loc, optimizer);
    } catch (const Interrupted&) {
      if (!mpi_) throw;  // threads: the world's abort releases the others
      stopped = true;
    }
    if (!mpi_) comm_.barrier();
    pollInterrupt(stopped);
  }
};

}  // namespace

bool runMain(const frontend::CheckedProgram& prog, const RunOptions& opts, Diagnostics& diags) {
  std::ostream& out = opts.out ? *opts.out : std::cout;
  showCompilation(opts);
  SpmdProgram spmd(prog, opts.seed);
  spmd.setRanksHere(opts.mpi ? 1 : (int)prog.module->np);
  // The memory check partitions every thunk; the run reuses those programs.
  if (opts.maxMemory && !checkMemory(estimateMemory(spmd, prog, opts), opts, diags)) return false;
  MpiComm* mpiComm = nullptr;
  // --trace: one recorder per rank of this process, current on its thread
  // while the rank runs (support/Trace.h); times count from `traceOrigin`.
  const bool tracing = !opts.tracePath.empty();
  std::vector<trace::Recorder> recorders(tracing ? (size_t)prog.module->np : 0);
  int64_t traceOrigin = trace::nowNs();
  // The JIT's compile-ahead threads, from the ranks' start until their
  // end (joined before the trace file is written), and their trace tracks.
  const bool compilingAhead = opts.engine == Engine::Jit;
  std::vector<trace::Recorder> aheadTracks(tracing && compilingAhead ? CompileAhead::threads() : 0);
  std::optional<CompileAhead> ahead;
  auto startAhead = [&] {
    if (compilingAhead) ahead.emplace(spmd, prog, opts.jit, aheadTracks);
  };
  auto body = [&](int rank, backend::Communicator& realComm) {
    // TEST-ONLY: GSL_TEST_FAULT may wrap the communicator (runtime/TestFaults.h).
    std::unique_ptr<backend::Communicator> faulty = faultInjectingComm(realComm, rank);
    backend::Communicator& comm = faulty ? *faulty : realComm;
    struct Tracing {
      Tracing(trace::Recorder* r) { trace::current = r; }
      ~Tracing() { trace::current = nullptr; }
    } tracingGuard(tracing ? &recorders[(size_t)rank] : nullptr);
    RankRunner r(spmd, prog.host, opts, rank, comm, out, mpiComm, diags);
    r.run();
    if (rank == 0 && opts.commSeconds) *opts.commSeconds = comm.stats.seconds;
  };
  auto report = [&](std::exception_ptr e) {
    try {
      std::rethrow_exception(e);
    } catch (const RankError& x) {
      diags.error(x.loc, x.what());
    } catch (const backend::CommError& x) {
      diags.error({}, x.what());
    } catch (const UserError& x) {
      diags.error({}, x.what());
    } catch (const Interrupted&) {
      throw;
    } catch (const std::bad_alloc&) {
      diags.error({}, "out of memory: a tensor could not be allocated (the estimate before the run, which "
                      "--max-memory limits, counts only the largest computation)");
    } catch (const std::exception& x) {
      diags.error({}, x.what());  // never a crash: whatever it is, reported
    }
  };
  if (opts.mpi) {
    // The compile-ahead threads start before MPI_Init (0.1 s or more), which
    // they do not need (they make no MPI calls; MPI_THREAD_FUNNELED) -
    // except with --trace, where they start after the barrier that sets
    // the ranks' common time origin, so that their events come after it.
    if (!tracing) startAhead();
    MpiComm comm;
    mpiComm = &comm;
    try {
      if (tracing) {  // the ranks' clocks start together (to the barrier's skew)
        comm.barrier();
        traceOrigin = trace::nowNs();
        startAhead();
      }
      body(comm.rank(), comm);
      ahead.reset();
      if (tracing) {
        auto all = gatherTraceEvents(
            comm, rankTraceEvents(comm.rank(), recorders[(size_t)comm.rank()], traceOrigin, aheadTracks));
        if (comm.rank() == 0) writeTraceFile(opts.tracePath, all);
      }
    } catch (const Interrupted&) {
      throw;  // every rank agreed to stop: nothing to abort
    } catch (...) {
      report(std::current_exception());
      diags.print(std::cerr);
      std::cerr.flush();
      comm.abort(diags.all().empty() ? "error" : diags.all().back().message);
    }
    return !diags.hasErrors();
  }
  startAhead();
  auto errors = runRanks((int)prog.module->np, body);
  ahead.reset();
  if (auto e = rootCause(errors)) {
    report(e);  // rethrows Interrupted
    return false;
  }
  if (tracing) {
    const std::vector<trace::Recorder> noTracks;
    std::vector<std::string> all;
    for (size_t r = 0; r < recorders.size(); ++r)
      all.push_back(rankTraceEvents((int)r, recorders[r], traceOrigin, r == 0 ? aheadTracks : noTracks));
    try {
      writeTraceFile(opts.tracePath, all);
    } catch (const std::exception& x) {
      diags.error({}, x.what());
      return false;
    }
  }
  return true;
}

}  // namespace gsl::runtime
