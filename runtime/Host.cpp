#include "runtime/Host.h"

#include <filesystem>
#include <iostream>
#include <map>

#include "backend/Engine.h"
#include "backend/Npy.h"

namespace gsl::runtime {

using backend::Tensor;
using frontend::HostLeaf;
using frontend::HostStmt;
using frontend::Thunk;

namespace {

class HostRunner {
 public:
  HostRunner(const frontend::CheckedProgram& p, const RunOptions& o, Diagnostics& d)
      : prog_(p), opts_(o), diags_(d), out_(o.out ? *o.out : std::cout) {
    params_.initialize(*p.module, o.seed);
    engine_ = backend::makeInterpreterEngine(params_, o.seed);
  }

  bool run() {
    try {
      scopes_.emplace_back();
      block(prog_.host.body);
      out_.flush();
      return true;
    } catch (const UserError&) {
      out_.flush();
      return false;
    }
  }

 private:
  const frontend::CheckedProgram& prog_;
  const RunOptions& opts_;
  Diagnostics& diags_;
  std::ostream& out_;
  backend::ParamStore params_;
  std::unique_ptr<backend::Engine> engine_;
  std::vector<std::map<std::string, Tensor>> scopes_;

  [[noreturn]] void fail(SourceLoc l, const std::string& m) {
    diags_.error(l, m);
    throw UserError(m);
  }

  Tensor* lookup(const std::string& n) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(n);
      if (f != it->end()) return &f->second;
    }
    return nullptr;
  }

  Tensor leaf(const HostLeaf& l) {
    switch (l.kind) {
      case HostLeaf::Var: {
        Tensor* t = lookup(l.name);
        GSL_ASSERT(t, "host variable '" + l.name + "' has no value");
        return *t;
      }
      case HostLeaf::Exists: {
        std::error_code ec;
        return Tensor::scalarBool(std::filesystem::exists(l.name, ec));
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
        return t;
      }
    }
    return {};
  }

  std::vector<Tensor> eval(const Thunk& th) {
    std::vector<Tensor> args;
    for (const auto& l : th.leaves) args.push_back(leaf(l));
    try {
      return engine_->call(*th.fn, args);
    } catch (const backend::RuntimeError& e) {
      fail(e.loc.valid() ? e.loc : th.loc, e.what());
    }
  }

  void block(const std::vector<HostStmt>& b) {
    for (const auto& s : b) stmt(s);
  }

  void stmt(const HostStmt& s) {
    switch (s.kind) {
      case HostStmt::Let: {
        auto vals = eval(s.value);
        for (size_t i = 0; i < s.names.size(); ++i) scopes_.back()[s.names[i]] = vals[i];
        break;
      }
      case HostStmt::Assign: {
        auto vals = eval(s.value);
        Tensor* t = lookup(s.names[0]);
        GSL_ASSERT(t, "assignment to unknown host variable");
        *t = vals[0];
        break;
      }
      case HostStmt::For: {
        int64_t lo = (int64_t)eval(s.lo)[0].item(), hi = (int64_t)eval(s.hi)[0].item();
        for (int64_t i = lo; i < hi; ++i) {
          scopes_.emplace_back();
          scopes_.back()[s.names[0]] = Tensor::scalarI32((int32_t)i);
          block(s.body);
          scopes_.pop_back();
        }
        break;
      }
      case HostStmt::If: {
        bool c = eval(s.cond)[0].item() != 0;
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
          line += a.value ? eval(*a.value)[0].str() : a.text;
        }
        out_ << line << "\n";
        break;
      }
      case HostStmt::Save: {
        Tensor t = eval(s.value)[0];
        try {
          backend::writeNpy(s.path, t);
        } catch (const backend::NpyError& e) {
          fail(s.loc, e.what());
        }
        break;
      }
      case HostStmt::Eval: eval(s.value); break;
    }
  }
};

}  // namespace

bool runMain(const frontend::CheckedProgram& prog, const RunOptions& opts, Diagnostics& diags) {
  HostRunner r(prog, opts, diags);
  return r.run();
}

}  // namespace gsl::runtime
