#include "runtime/Host.h"

#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>

#include "backend/Engine.h"
#include "backend/Npy.h"
#include "backend/Random.h"
#include "ir/Printer.h"
#include "passes/Pipeline.h"
#include "runtime/Distribute.h"
#include "runtime/MpiComm.h"
#include "runtime/ThreadComm.h"

namespace gsl::runtime {

using backend::Tensor;
using frontend::HostLeaf;
using frontend::HostStmt;
using frontend::Thunk;
using ir::Sharding;

namespace {

// A user error on one rank, with its source location.
struct RankError : std::runtime_error {
  SourceLoc loc;
  RankError(SourceLoc l, const std::string& m) : std::runtime_error(m), loc(l) {}
};

// What all ranks share: the per-rank programs (built once per distinct
// input sharding of a thunk) and the params' global initial values.
class SpmdProgram {
 public:
  SpmdProgram(const frontend::CheckedProgram& p, uint64_t seed) : prog_(p), seed_(seed) {}
  const ir::Module& module() const { return *prog_.module; }

  // The per-rank function of thunk `th` for inputs lying as `in`; with
  // `gather`, its results are made whole (replicated) on every rank.
  const ir::Function& perRank(const Thunk& th, const std::vector<std::optional<Sharding>>& in, bool gather) {
    std::string key = th.fn->name + (gather ? "|gather" : "|");
    for (const auto& s : in) key += "|" + (s ? s->str() : std::string("_"));
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return *it->second;
    auto f = th.fn->clone();
    for (size_t i = 0; i < in.size(); ++i)
      f->args[i]->sharding = in[i] ? in[i] : Sharding::replicated("", f->args[i]->type.rank());
    auto local = passes::buildPerRankProgram(*prog_.module, *f, gather);
    return *(cache_[key] = std::move(local));
  }

  const Tensor& globalParam(const ir::Param& p) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = params_.find(p.name);
    if (it == params_.end()) it = params_.emplace(p.name, backend::initParam(p, seed_)).first;
    return it->second;
  }

 private:
  const frontend::CheckedProgram& prog_;
  uint64_t seed_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<ir::Function>> cache_;
  std::map<std::string, Tensor> params_;
};

struct HostValue {
  Tensor local;
  std::optional<Sharding> sharding;
};

// One rank running the host script.
class RankRunner {
 public:
  RankRunner(SpmdProgram& prog, const frontend::HostProgram& host, const RunOptions& o, int rank,
             backend::Communicator& comm, std::ostream& out)
      : prog_(prog), host_(host), opts_(o), rank_(rank), out_(out) {
    const ir::Module& m = prog.module();
    for (const auto& p : m.params) params_[p.name] = localBlock(m, prog.globalParam(p), p.sharding, rank);
    backend::KernelContext ctx;
    ctx.seed = o.seed;
    ctx.rank = rank;
    ctx.comm = &comm;
    ctx.param = [this](const std::string& n) -> const Tensor& { return params_.at(n); };
    ctx.mesh = [&m](const std::string& n) -> const ir::Mesh& { return *m.findMesh(n); };
    engine_ = backend::makeInterpreterEngine(ctx);
  }

  void run() {
    scopes_.emplace_back();
    block(host_.body);
    out_.flush();
  }

 private:
  SpmdProgram& prog_;
  const frontend::HostProgram& host_;
  const RunOptions& opts_;
  int rank_;
  std::ostream& out_;
  std::map<std::string, Tensor> params_;
  std::unique_ptr<backend::Engine> engine_;
  std::vector<std::map<std::string, HostValue>> scopes_;

  [[noreturn]] void fail(SourceLoc l, const std::string& m) { throw RankError(l, m); }

  HostValue* lookup(const std::string& n) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(n);
      if (f != it->end()) return &f->second;
    }
    return nullptr;
  }

  HostValue leaf(const HostLeaf& l) {
    switch (l.kind) {
      case HostLeaf::Var: {
        HostValue* v = lookup(l.name);
        GSL_ASSERT(v, "host variable '" + l.name + "' has no value");
        return *v;
      }
      case HostLeaf::Exists: {
        std::error_code ec;
        return {Tensor::scalarBool(std::filesystem::exists(l.name, ec)), std::nullopt};
      }
      case HostLeaf::Load: {
        Tensor t;
        try {
          t = backend::readNpy(l.name);
        } catch (const backend::NpyError& e) {
          fail(l.loc, e.what());
        }
        if (t.type() != l.type)
          fail(l.loc, l.name + ": the file holds " + t.type().str() + " but load declares " + l.type.str());
        return {localBlock(prog_.module(), t, l.sharding, rank_), l.sharding};
      }
    }
    return {};
  }

  std::vector<HostValue> eval(const Thunk& th, bool gather) {
    std::vector<Tensor> args;
    std::vector<std::optional<Sharding>> in;
    for (const auto& l : th.leaves) {
      HostValue v = leaf(l);
      args.push_back(v.local);
      in.push_back(v.sharding);
    }
    const ir::Function& f = prog_.perRank(th, in, gather);
    std::vector<Tensor> res;
    try {
      res = engine_->call(f, args);
    } catch (const backend::RuntimeError& e) {
      fail(e.loc.valid() ? e.loc : th.loc, e.what());
    }
    std::vector<HostValue> out;
    for (size_t i = 0; i < res.size(); ++i) out.push_back({res[i], f.resultShardings[i]});
    return out;
  }

  Tensor whole(const Thunk& th) { return eval(th, true)[0].local; }

  void block(const std::vector<HostStmt>& b) {
    for (const auto& s : b) stmt(s);
  }

  void stmt(const HostStmt& s) {
    switch (s.kind) {
      case HostStmt::Let: {
        auto vals = eval(s.value, false);
        for (size_t i = 0; i < s.names.size(); ++i) scopes_.back()[s.names[i]] = vals[i];
        break;
      }
      case HostStmt::Assign: {
        auto vals = eval(s.value, false);
        HostValue* v = lookup(s.names[0]);
        GSL_ASSERT(v, "assignment to unknown host variable");
        *v = vals[0];
        break;
      }
      case HostStmt::For: {
        int64_t lo = (int64_t)whole(s.lo).item(), hi = (int64_t)whole(s.hi).item();
        for (int64_t i = lo; i < hi; ++i) {
          scopes_.emplace_back();
          scopes_.back()[s.names[0]] = {Tensor::scalarI32((int32_t)i), std::nullopt};
          block(s.body);
          scopes_.pop_back();
        }
        break;
      }
      case HostStmt::If: {
        bool c = whole(s.cond).item() != 0;
        scopes_.emplace_back();
        block(c ? s.body : s.elseBody);
        scopes_.pop_back();
        break;
      }
      case HostStmt::Print: {
        std::string line;
        for (size_t i = 0; i < s.printArgs.size(); ++i) {
          if (i) line += " ";
          const auto& a = s.printArgs[i];
          line += a.value ? whole(*a.value).str() : a.text;
        }
        if (rank_ == 0) out_ << line << "\n";
        break;
      }
      case HostStmt::Save: {
        Tensor t = whole(s.value);
        if (rank_ == 0) {
          try {
            backend::writeNpy(s.path, t);
          } catch (const backend::NpyError& e) {
            fail(s.loc, e.what());
          }
        }
        break;
      }
      case HostStmt::Eval: eval(s.value, false); break;
    }
  }
};

}  // namespace

bool runMain(const frontend::CheckedProgram& prog, const RunOptions& opts, Diagnostics& diags) {
  std::ostream& out = opts.out ? *opts.out : std::cout;
  SpmdProgram spmd(prog, opts.seed);
  auto body = [&](int rank, backend::Communicator& comm) {
    RankRunner r(spmd, prog.host, opts, rank, comm, out);
    r.run();
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
    }
  };
  if (opts.mpi) {
    MpiComm comm;
    try {
      body(comm.rank(), comm);
    } catch (...) {
      report(std::current_exception());
      diags.print(std::cerr);
      std::cerr.flush();
      comm.abort(diags.all().empty() ? "error" : diags.all().back().message);
    }
    return !diags.hasErrors();
  }
  auto errors = runRanks((int)prog.module->np, body);
  if (auto e = rootCause(errors)) {
    report(e);
    return false;
  }
  return true;
}

}  // namespace gsl::runtime
