#include "frontend/Sema.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <sstream>

namespace gsl::frontend {
namespace {

using namespace ir;

// A compile-time number (const expressions, static builtin arguments).
struct Num {
  bool isInt = true;
  int64_t i = 0;
  double f = 0;
  double d() const { return isInt ? (double)i : f; }
};

// The value of an expression while lowering.
struct EV {
  enum Kind { Error, Tensor, Literal, Tuple } kind = Error;
  Value* v = nullptr;          // Tensor
  Num lit;                     // Literal: a weakly typed number (adopts the other operand's dtype)
  std::vector<Value*> tuple;   // Tuple: a call's results
  static EV tensor(Value* v) { EV e; e.kind = Tensor; e.v = v; return e; }
  static EV literal(Num n) { EV e; e.kind = Literal; e.lit = n; return e; }
  bool ok() const { return kind != Error; }
};

size_t editDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string suggest(const std::string& name, const std::vector<std::string>& candidates) {
  // At most one edit per three characters (as clang's typo correction), so
  // a one-letter name is not "corrected" to an unrelated two-letter one.
  std::string best;
  size_t bestD = std::max<size_t>(1, (name.size() + 2) / 3) + 1;
  for (const auto& c : candidates) {
    size_t d = editDistance(name, c);
    if (d < bestD) {
      bestD = d;
      best = c;
    }
  }
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

// Where an expression starts: a binary expression's own location is its
// operator, but an error about the whole value belongs at its first token.
SourceLoc startLoc(const ast::Expr& e) {
  if ((e.kind == ast::ExprKind::Binary || e.kind == ast::ExprKind::Annot) && !e.elems.empty())
    return startLoc(*e.elems[0]);
  return e.loc;
}

const std::set<std::string> kHostBuiltins = {"print", "save", "exists", "load", "grad", "batch", "start_step",
                                             "save_checkpoint"};
const std::set<std::string> kInitializers = {"zeros", "ones", "normal", "uniform", "glorot"};

class Sema {
 public:
  Sema(const Options& o, Diagnostics& d, CheckedProgram& out) : opts_(o), diags_(d), out_(out) {
    out_.module = std::make_unique<Module>();
    mod_ = out_.module.get();
    mod_->np = o.np;
  }

  bool run(const std::vector<const ast::Decl*>& decls) {
    for (const ast::Decl* d : decls)  // the root file is loaded (added) first
      if (d->loc.file >= 0 && (rootFile_ < 0 || d->loc.file < rootFile_)) rootFile_ = d->loc.file;
    registerNames(decls);
    checkDefines();
    for (const ast::Decl* d : decls) {
      switch (d->kind) {
        case ast::DeclKind::Const: declConst(*d); break;
        case ast::DeclKind::Mesh: declMesh(*d); break;
        case ast::DeclKind::Param: declParam(*d); break;
        case ast::DeclKind::Optimizer: declOptimizer(*d); break;
        case ast::DeclKind::Dataset: declDataset(*d); break;
        default: break;
      }
    }
    for (const ast::Decl* d : decls)
      if (d->kind == ast::DeclKind::Fn && d->name != "main" && fns_[d->name].decl == d) lowerFnStandalone(d->name);
    for (const ast::Decl* d : decls)
      if (d->kind == ast::DeclKind::Fn && d->name == "main" && fns_[d->name].decl == d) lowerMain(*d);
    // Functions in declaration order, then the host thunks.
    for (const ast::Decl* d : decls)
      if (d->kind == ast::DeclKind::Fn && d->name != "main" && fns_[d->name].fn && fns_[d->name].decl == d) {
        out_.userFunctions.push_back(d->name);
        mod_->functions.push_back(std::move(fns_[d->name].owned));
      }
    for (auto& t : thunks_) mod_->functions.push_back(std::move(t));
    return !diags_.hasErrors();
  }

 private:
  // ------------------------------------------------------------ state
  const Options& opts_;
  Diagnostics& diags_;
  CheckedProgram& out_;
  Module* mod_;

  struct Global {
    std::string kind;  // const, mesh, param, fn
    SourceLoc loc;
  };
  std::map<std::string, Global> globals_;
  int rootFile_ = -1;  // the program's own file (imports are other files)
  std::map<std::string, int64_t> consts_;
  std::set<std::string> usedDefines_;

  struct FnInfo {
    const ast::Decl* decl = nullptr;
    int state = 0;  // 0 not lowered, 1 in progress, 2 done
    bool ok = false;
    bool sigOk = false;
    std::vector<TensorType> argTypes, resultTypes;
    std::vector<std::optional<Sharding>> argShardings, resultShardings;
    std::unique_ptr<Function> owned;
    Function* fn = nullptr;
    std::vector<std::string> shapeVars;  // non-empty: generic
  };
  // Shape variables bound for the function being lowered (innermost last;
  // only the innermost is visible, as a function sees only its own).
  std::vector<std::map<std::string, int64_t>> shapeVars_{{}};
  std::set<std::string> failedInstances_;
  std::map<std::string, FnInfo> fns_;
  std::vector<std::unique_ptr<Function>> thunks_;
  int nextThunk_ = 0;  // thunks are named main.0, main.1, ... in creation order

  // A lowering context: the function being built and its local names.
  struct Ctx {
    Function* fn = nullptr;
    std::vector<std::map<std::string, EV>> scopes;
    bool host = false;                         // building a thunk of fn main
    std::vector<HostLeaf>* leaves = nullptr;   // host: thunk inputs
    std::map<std::string, Value*> hostArgs;    // host variable -> thunk argument
    std::map<std::string, Value*> paramVals;   // param -> its `param` op in this function
    std::vector<std::string> callStack;
    int mute = 0;                              // > 0 while inlining an already checked body
  };
  std::vector<std::map<std::string, TensorType>> hostScopes_;
  // Calls are inlined, so a few lines can ask for exponentially many ops (f1
  // calls f0 twice, f2 calls f1 twice, ...): each inlining first checks the
  // ops built so far against opts_.maxOps (found by fuzzing, tests/fuzz).
  size_t builtOps_ = 0;  // ops of the finished standalone functions
  bool tooLarge_ = false;
  bool opLimitReached(const Ctx& c, SourceLoc l) {
    size_t total = builtOps_ + c.fn->ops.size();
    for (const auto& t : thunks_) total += t->ops.size();
    if (!tooLarge_ && (int64_t)total >= opts_.maxOps)
      diags_.error(l, "the program is too large: GSL inlines calls, and inlining this one into '" +
                          c.callStack.front() + "' takes it past " + std::to_string(opts_.maxOps) + " operations");
    return tooLarge_ = tooLarge_ || (int64_t)total >= opts_.maxOps;
  }

  void err(Ctx& c, SourceLoc l, const std::string& m) {
    if (!c.mute) diags_.error(l, m);
  }
  void err(SourceLoc l, const std::string& m) { diags_.error(l, m); }

  // ------------------------------------------------------------ declarations
  void registerNames(const std::vector<const ast::Decl*>& decls) {
    static const char* kinds[] = {"import", "const", "mesh", "param", "fn", "optimizer", "dataset"};
    for (const ast::Decl* d : decls) {
      if (d->kind == ast::DeclKind::Import) continue;
      const char* kind = kinds[(int)d->kind];
      if (d->name == "NP") {
        err(d->loc, "'NP' is predefined (the number of ranks, set with -np)");
        continue;
      }
      if (lookupBuiltin(d->name) || kHostBuiltins.count(d->name)) {
        err(d->loc, std::string("cannot declare ") + kind + " '" + d->name + "': it is a builtin");
        continue;
      }
      auto it = globals_.find(d->name);
      if (it != globals_.end()) {
        err(d->loc, "redefinition of '" + d->name + "'");
        diags_.note(it->second.loc, "'" + d->name + "' was first declared here as a " + it->second.kind);
        continue;
      }
      globals_[d->name] = {kind, d->loc};
      if (d->kind == ast::DeclKind::Fn) fns_[d->name].decl = d;
    }
  }

  void checkDefines() {
    for (const auto& [k, v] : opts_.defines) {
      if (k == "NP") {
        err({}, "-D NP=" + std::to_string(v) + ": NP is the number of ranks; set it with -np");
        continue;
      }
      auto it = globals_.find(k);
      if (it == globals_.end() || it->second.kind != "const")
        err({}, "-D " + k + "=" + std::to_string(v) + ": the program declares no const '" + k + "'");
    }
  }

  // False for a declaration that lost to an earlier one of the same name
  // (already reported by registerNames): only the first one counts.
  bool isRegistered(const ast::Decl& d) {
    auto it = globals_.find(d.name);
    if (it == globals_.end()) return false;
    const SourceLoc& l = it->second.loc;
    return l.file == d.loc.file && l.line == d.loc.line && l.col == d.loc.col;
  }

  void declConst(const ast::Decl& d) {
    if (!isRegistered(d)) return;
    if (auto it = opts_.defines.find(d.name); it != opts_.defines.end()) {
      consts_[d.name] = it->second;
      return;
    }
    if (auto v = evalInt(*d.value, "const '" + d.name + "'")) consts_[d.name] = *v;
  }

  void declMesh(const ast::Decl& d) {
    if (!isRegistered(d)) return;
    Mesh m;
    m.name = d.name;
    bool ok = true;
    std::set<std::string> names;
    for (const auto& a : d.axes) {
      auto size = evalInt(*a.size, "mesh axis size");
      if (!size) {
        ok = false;
        continue;
      }
      if (*size < 1) {
        err(startLoc(*a.size), "mesh axis '" + a.name + "' has size " + std::to_string(*size) + "; sizes must be at least 1");
        ok = false;
      }
      if (!names.insert(a.name).second) {
        err(a.loc, "mesh '" + d.name + "' has two axes named '" + a.name + "'");
        ok = false;
      }
      m.axes.push_back({a.name, *size});
    }
    if (!ok) return;
    int64_t prod = 1;
    std::string expr;
    for (const auto& a : m.axes) {
      if (prod > (int64_t)1 << 40) break;
      prod *= a.size;
      expr += (expr.empty() ? "" : " x ") + std::to_string(a.size);
    }
    if (prod != opts_.np) {
      // "2 x 3 = 6 devices"; one axis: "2 devices".
      err(d.loc, "mesh '" + d.name + "' has " + (m.axes.size() > 1 ? expr + " = " : "") + std::to_string(prod) +
                     (prod == 1 ? " device" : " devices") + ", but the program runs on NP = " +
                     std::to_string(opts_.np) + (opts_.np == 1 ? " rank" : " ranks") + " (-np)");
      return;
    }
    mod_->meshes.push_back(m);
  }

  void declParam(const ast::Decl& d) {
    if (!isRegistered(d)) return;
    auto t = lowerType(*d.type);
    if (!t) return;
    Param p;
    p.name = d.name;
    p.type = *t;
    p.loc = d.loc;
    if (d.annot) {
      auto s = checkSharding(*d.annot, *t);
      if (!s) return;
      p.sharding = s;
    }
    if (!lowerInit(*d.value, p.init)) return;
    if (p.type.dtype != DType::F32) {
      err(d.type->loc, "params must be f32 (trainable), got " + p.type.str());
      return;
    }
    mod_->params.push_back(p);
  }

  // Keyword arguments of a declaration's constructor call, as numbers.
  bool numericKeywords(const ast::Expr& e, const std::map<std::string, double>& defaults,
                       std::map<std::string, double>& out, size_t positional = 0) {
    out = defaults;
    std::string names;
    for (auto& [k, v] : defaults) names += (names.empty() ? "" : ", ") + k;
    for (size_t i = positional; i < e.args.size(); ++i) {
      const auto& a = e.args[i];
      if (a.keyword.empty()) {
        err(a.loc, e.text + " takes keyword arguments (" + names + ")");
        return false;
      }
      if (!defaults.count(a.keyword)) {
        std::vector<std::string> ks;
        for (auto& [k, v] : defaults) ks.push_back(k);
        err(a.loc, e.text + " has no argument '" + a.keyword + "' (it takes " + names + ")" + suggest(a.keyword, ks));
        return false;
      }
      auto n = constEval(*a.value);
      if (!n) return false;
      out[a.keyword] = n->d();
    }
    return true;
  }

  void declOptimizer(const ast::Decl& d) {
    static const std::map<std::string, std::pair<Optimizer::Kind, std::map<std::string, double>>> kinds = {
        {"sgd", {Optimizer::SGD, {{"lr", 0.01}, {"momentum", 0.0}}}},
        {"adam", {Optimizer::Adam, {{"lr", 1e-3}, {"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}}}},
        {"adafactor", {Optimizer::Adafactor, {{"lr", 1e-2}, {"decay", 0.8}, {"eps", 1e-30}, {"clip", 1.0}}}},
    };
    const ast::Expr& e = *d.value;
    auto it = e.kind == ast::ExprKind::Call ? kinds.find(e.text) : kinds.end();
    if (it == kinds.end()) {
      err(e.loc, "an optimizer is sgd(...), adam(...) or adafactor(...)");
      return;
    }
    Optimizer o;
    o.name = d.name;
    o.kind = it->second.first;
    o.loc = d.loc;
    if (!numericKeywords(e, it->second.second, o.hp)) return;
    for (auto& [k, v] : o.hp)
      if (v < 0 || (k == "lr" && v <= 0)) {
        err(e.loc, e.text + "'s " + k + " must be " + (k == "lr" ? "positive" : "non-negative"));
        return;
      }
    mod_->optimizers.push_back(o);
  }

  void declDataset(const ast::Decl& d) {
    const ast::Expr& e = *d.value;
    Dataset ds;
    ds.name = d.name;
    ds.loc = d.loc;
    std::map<std::string, double> kw;
    if (e.kind == ast::ExprKind::Call && (e.text == "copy_task" || e.text == "reverse_task")) {
      ds.kind = e.text == "copy_task" ? "copy" : "reverse";
      if (!numericKeywords(e, {{"batch", 0}, {"seq", 0}, {"vocab", 0}}, kw)) return;
    } else if (e.kind == ast::ExprKind::Call && e.text == "npy_tokens") {
      ds.kind = "npy";
      if (e.args.empty() || !e.args[0].keyword.empty() || e.args[0].value->kind != ast::ExprKind::String) {
        err(e.loc, "npy_tokens takes the path of an i32 .npy file first: npy_tokens(\"tokens.npy\", batch=B, seq=S)");
        return;
      }
      ds.path = e.args[0].value->text;
      if (!numericKeywords(e, {{"batch", 0}, {"seq", 0}}, kw, 1)) return;
    } else {
      err(e.loc, "a dataset is copy_task(batch=, seq=, vocab=), reverse_task(batch=, seq=, vocab=) or npy_tokens(\"file.npy\", batch=, seq=)");
      return;
    }
    for (auto& [k, v] : kw)
      if (v < 1 || v != (double)(int64_t)v) {
        err(e.loc, e.text + " needs a positive integer '" + k + "'");
        return;
      }
    ds.batch = (int64_t)kw["batch"];
    ds.seq = (int64_t)kw["seq"];
    ds.vocab = kw.count("vocab") ? (int64_t)kw["vocab"] : 0;
    if (ds.kind != "npy" && (ds.seq < 4 || ds.vocab < 3)) {
      err(e.loc, e.text + " needs seq >= 4 and vocab >= 3");
      return;
    }
    out_.host.datasets.push_back(ds);
  }

  const Dataset* findDataset(const std::string& n) const {
    for (const auto& d : out_.host.datasets)
      if (d.name == n) return &d;
    return nullptr;
  }

  bool lowerInit(const ast::Expr& e, ParamInit& init) {
    const std::string hint = "(use zeros, ones, normal(std), uniform(lo, hi) or glorot)";
    std::string name = e.kind == ast::ExprKind::Name || e.kind == ast::ExprKind::Call ? e.text : "";
    std::map<std::string, std::pair<ParamInit::Kind, size_t>> known = {
        {"zeros", {ParamInit::Zeros, 0}}, {"ones", {ParamInit::Ones, 0}},
        {"glorot", {ParamInit::Glorot, 0}}, {"normal", {ParamInit::Normal, 1}},
        {"uniform", {ParamInit::Uniform, 2}}};
    auto it = known.find(name);
    if (it == known.end()) {
      err(e.loc, (name.empty() ? std::string("invalid initializer ") : "unknown initializer '" + name + "' ") + hint);
      return false;
    }
    init.kind = it->second.first;
    size_t nargs = e.kind == ast::ExprKind::Call ? e.args.size() : 0;
    if (nargs != it->second.second || (e.kind == ast::ExprKind::Call && it->second.second == 0)) {
      err(e.loc, "initializer '" + name + "' takes " + std::to_string(it->second.second) + " argument" +
                     (it->second.second == 1 ? "" : "s") + " " + hint);
      return false;
    }
    std::vector<double> vals;
    for (const auto& a : e.args) {
      auto n = constEval(*a.value);
      if (!n) return false;
      vals.push_back(n->d());
    }
    if (init.kind == ParamInit::Normal) {
      init.a = vals[0];
      if (init.a < 0) {
        err(startLoc(*e.args[0].value), "normal's standard deviation must be >= 0");
        return false;
      }
    }
    if (init.kind == ParamInit::Uniform) {
      init.a = vals[0];
      init.b = vals[1];
      if (!(init.a < init.b)) {
        err(e.loc, "uniform(lo, hi) needs lo < hi");
        return false;
      }
    }
    return true;
  }

  // ------------------------------------------------------------ constants
  std::optional<Num> constEval(const ast::Expr& e) {
    switch (e.kind) {
      case ast::ExprKind::Int: return Num{true, e.ival, 0};
      case ast::ExprKind::Float: return Num{false, 0, e.fval};
      case ast::ExprKind::Name: {
        if (auto sv = shapeVars_.back().find(e.text); sv != shapeVars_.back().end())
          return Num{true, sv->second, 0};
        if (e.text == "NP") return Num{true, opts_.np, 0};
        auto it = consts_.find(e.text);
        if (it != consts_.end()) return Num{true, it->second, 0};
        auto g = globals_.find(e.text);
        if (g != globals_.end() && g->second.kind == "const")
          err(e.loc, "const '" + e.text + "' is used before its value is known (declare it earlier)");
        else if (g != globals_.end())
          err(e.loc, "'" + e.text + "' is a " + g->second.kind + ", not a compile-time constant");
        else
          err(e.loc, "unknown name '" + e.text + "'" + suggest(e.text, constNames()));
        return std::nullopt;
      }
      case ast::ExprKind::Unary: {
        auto v = constEval(*e.elems[0]);
        if (!v) return v;
        if (e.text == "+") return v;
        if (e.text == "-") {
          if (v->isInt) v->i = -v->i;
          else v->f = -v->f;
          return v;
        }
        break;
      }
      case ast::ExprKind::Binary: {
        auto a = constEval(*e.elems[0]);
        auto b = a ? constEval(*e.elems[1]) : std::nullopt;
        if (!a || !b) return std::nullopt;
        return foldBinary(e.text, *a, *b, e.loc, true);
      }
      case ast::ExprKind::Call: {
        // ceil(x) / floor(x) round a real value (`ceil(2.0 * S / E)`: a
        // float operand makes `/` true division) to an integer.
        if ((e.text == "ceil" || e.text == "floor") && e.args.size() == 1 && e.args[0].keyword.empty()) {
          auto v = constEval(*e.args[0].value);
          if (!v || v->isInt) return v;
          double r = e.text == "ceil" ? std::ceil(v->f) : std::floor(v->f);
          if (!(std::fabs(r) < 9.0e18)) {
            err(e.loc, e.text + "(...) of " + std::to_string(v->f) + " does not fit in a 64-bit integer");
            return std::nullopt;
          }
          return Num{true, (int64_t)r, 0};
        }
        if (e.text == "ceil" || e.text == "floor") {
          err(e.loc, e.text + " in a constant expression takes one argument");
          return std::nullopt;
        }
        break;
      }
      default: break;
    }
    err(e.loc, "expected a compile-time constant expression");
    return std::nullopt;
  }

  std::vector<std::string> constNames() const {
    std::vector<std::string> r{"NP"};
    for (auto& [k, v] : consts_) r.push_back(k);
    return r;
  }

  // Folds a binary op on two numbers. `exactDiv`: integer `/` must divide
  // exactly (const expressions); otherwise `/` is true division.
  std::optional<Num> foldBinary(const std::string& op, Num a, Num b, SourceLoc l, bool exactDiv) {
    if (a.isInt && b.isInt) {
      int64_t r = 0;
      bool ovf = false;
      if (op == "+") ovf = __builtin_add_overflow(a.i, b.i, &r);
      else if (op == "-") ovf = __builtin_sub_overflow(a.i, b.i, &r);
      else if (op == "*") ovf = __builtin_mul_overflow(a.i, b.i, &r);
      else if (op == "/" || op == "%") {
        if (b.i == 0) {
          err(l, "division by zero in a constant expression");
          return std::nullopt;
        }
        // Outside const expressions `/` is true division (f32) even when it
        // divides evenly: 6 / 3 is 2.0, as i32 / i32 on tensors.
        if (op == "/" && !exactDiv) return Num{false, 0, (double)a.i / (double)b.i};
        if (b.i == -1) {  // INT64_MIN / -1 overflows (and INT64_MIN % -1 traps)
          if (op == "/") ovf = __builtin_sub_overflow(int64_t(0), a.i, &r);
          else r = 0;
        } else if (op == "/") {
          if (a.i % b.i != 0) {
            err(l, std::to_string(a.i) + " / " + std::to_string(b.i) + " is not exact (const division must divide evenly)");
            return std::nullopt;
          }
          r = a.i / b.i;
        } else {  // Python's %: the result has the divisor's sign
          r = a.i % b.i;
          if (r != 0 && (r < 0) != (b.i < 0)) r += b.i;
        }
      } else if (op == "**") {
        if (b.i < 0) return Num{false, 0, std::pow((double)a.i, (double)b.i)};
        // Square and multiply: 1 ** 10**15 must not loop 10**15 times.
        r = 1;
        int64_t base = a.i;
        for (int64_t k = b.i; k > 0 && !ovf; k >>= 1) {
          if (k & 1) ovf = __builtin_mul_overflow(r, base, &r);
          if (k > 1 && !ovf) ovf = __builtin_mul_overflow(base, base, &base);
        }
      } else {
        err(l, "operator '" + op + "' is not allowed in a constant expression");
        return std::nullopt;
      }
      if (ovf) {
        err(l, "integer overflow in a constant expression: " + std::to_string(a.i) + " " + op + " " +
                   std::to_string(b.i) + " does not fit in 64 bits");
        return std::nullopt;
      }
      return Num{true, r, 0};
    }
    double x = a.d(), y = b.d(), r;
    if (op == "+") r = x + y;
    else if (op == "-") r = x - y;
    else if (op == "*") r = x * y;
    else if (op == "/") r = x / y;
    else if (op == "%") r = x - std::floor(x / y) * y;
    else if (op == "**") r = std::pow(x, y);
    else {
      err(l, "operator '" + op + "' is not allowed in a constant expression");
      return std::nullopt;
    }
    return Num{false, 0, r};
  }

  std::optional<int64_t> evalInt(const ast::Expr& e, const std::string& what) {
    auto n = constEval(e);
    if (!n) return std::nullopt;
    if (!n->isInt) {
      std::ostringstream v;
      v << n->f;
      err(startLoc(e), what + " must be an integer, got " + v.str() + " (round it with ceil(...) or floor(...))");
      return std::nullopt;
    }
    return n->i;
  }

  std::optional<TensorType> lowerType(const ast::TypeExpr& t) {
    TensorType r;
    r.dtype = t.dtype;
    bool ok = true;
    for (size_t i = 0; i < t.dims.size(); ++i) {
      auto v = evalInt(*t.dims[i], "a dimension");
      if (!v) {
        ok = false;
        continue;
      }
      if (*v <= 0) {
        err(startLoc(*t.dims[i]), "dimension " + std::to_string(i) + " of the type must be positive, got " + std::to_string(*v));
        ok = false;
      }
      r.shape.push_back(*v);
    }
    if (!ok) return std::nullopt;
    if (!r.sizeFits()) {
      err(t.loc, "type " + r.str() + " is too large: its size in bytes overflows 64 bits");
      return std::nullopt;
    }
    return r;
  }

  std::optional<Sharding> checkSharding(const ast::ShardAnnot& a, const TensorType& t) {
    const Mesh* m = mod_->findMesh(a.mesh);
    if (!m) {
      auto g = globals_.find(a.mesh);
      if (g != globals_.end() && g->second.kind == "mesh") return std::nullopt;  // mesh had its own error
      std::vector<std::string> meshes;
      for (auto& mm : mod_->meshes) meshes.push_back(mm.name);
      err(a.loc, "unknown mesh '" + a.mesh + "'" + suggest(a.mesh, meshes));
      return std::nullopt;
    }
    if (a.replicate) return Sharding::replicated(a.mesh, t.rank());
    if ((int)a.dims.size() != t.rank()) {
      err(a.loc, "@shard gives " + std::to_string(a.dims.size()) + " entr" + (a.dims.size() == 1 ? "y" : "ies") +
                     " for a tensor of rank " + std::to_string(t.rank()) + " (" + t.str() + ")");
      return std::nullopt;
    }
    Sharding s;
    s.mesh = a.mesh;
    std::set<std::string> used;
    for (size_t d = 0; d < a.dims.size(); ++d) {
      int64_t prod = 1;
      std::string names;
      for (const auto& ax : a.dims[d]) {
        if (m->axisIndex(ax) < 0) {
          std::string axes;
          for (auto& x : m->axes) axes += (axes.empty() ? "" : ", ") + x.name;
          err(a.dimLocs[d], "mesh '" + m->name + "' has no axis '" + ax + "' (its axes: " + axes + ")");
          return std::nullopt;
        }
        if (!used.insert(ax).second) {
          err(a.dimLocs[d], "mesh axis '" + ax + "' is used twice in one sharding");
          return std::nullopt;
        }
        prod *= m->axisSize(ax);
        names += (names.empty() ? "" : " x ") + ax;
      }
      if (t.shape[d] % prod != 0) {
        err(a.dimLocs[d], "dim " + std::to_string(d) + " of " + t.str() + " has size " + std::to_string(t.shape[d]) +
                              ", which is not divisible by " + std::to_string(prod) + " (" + names + ")");
        return std::nullopt;
      }
      s.dims.push_back(a.dims[d]);
    }
    return s;
  }

  // ------------------------------------------------------------ values
  Value* materialize(Ctx& c, const EV& e, DType dt, SourceLoc l) {
    if (e.kind == EV::Tensor) return e.v;
    GSL_ASSERT(e.kind == EV::Literal, "materialize: not a value");
    AttrMap at;
    double v = e.lit.d();
    if (dt == DType::Bool) dt = e.lit.isInt ? DType::I32 : DType::F32;
    if (dt == DType::I32 && !e.lit.isInt) dt = DType::F32;
    if (dt == DType::I32 && (e.lit.i > std::numeric_limits<int32_t>::max() || e.lit.i < std::numeric_limits<int32_t>::min())) {
      err(c, l, "integer " + std::to_string(e.lit.i) + " does not fit in i32");
      v = 0;  // stays i32: no second error about mismatched types
    }
    at.set("value", v);
    return c.fn->append(OpKind::Constant, {}, at, TensorType{dt, {}}, l)->result;
  }

  DType defaultDType(const EV& e) { return e.lit.isInt ? DType::I32 : DType::F32; }

  // `attrLocs`: where a builtin call gave its static arguments. A type
  // rule's message that starts with such an argument's name ("axis 2 is out
  // of range ...") is about that argument, so it points there.
  EV emit(Ctx& c, OpKind k, std::vector<Value*> operands, AttrMap at, SourceLoc l,
          const std::map<std::string, SourceLoc>& attrLocs = {}) {
    std::vector<TensorType> in;
    for (Value* v : operands) in.push_back(v->type);
    TensorType out;
    std::string e = inferType(k, in, at, out);
    if (!e.empty()) {
      for (const auto& [name, al] : attrLocs)
        if (e.rfind(name + " ", 0) == 0) l = al;
      err(c, l, e);
      return {};
    }
    return EV::tensor(c.fn->append(k, std::move(operands), std::move(at), out, l)->result);
  }

  // Attaches a sharding constraint to `v`, copying when `v` already has
  // an identity of its own (an argument, a param, an annotated value).
  Value* constrain(Ctx& c, Value* v, const Sharding& s, SourceLoc l) {
    if (v->sharding && *v->sharding == s) return v;
    if (!v->def || v->sharding || v->def->kind == OpKind::Param)
      v = c.fn->append(OpKind::Copy, {v}, {}, v->type, l)->result;
    v->sharding = s;
    v->shardingLoc = l;
    return v;
  }

  std::vector<std::string> visibleNames(Ctx& c) {
    std::vector<std::string> r;
    for (auto& s : c.scopes)
      for (auto& [k, v] : s) r.push_back(k);
    for (auto& s : hostScopes_)
      for (auto& [k, v] : s) r.push_back(k);
    for (auto& [k, g] : globals_) r.push_back(k);
    return r;
  }

  EV lowerName(Ctx& c, const ast::Expr& e) {
    for (auto it = c.scopes.rbegin(); it != c.scopes.rend(); ++it) {
      auto f = it->find(e.text);
      if (f != it->end()) return f->second;
    }
    if (c.host) {
      for (auto it = hostScopes_.rbegin(); it != hostScopes_.rend(); ++it) {
        auto f = it->find(e.text);
        if (f == it->end()) continue;
        auto a = c.hostArgs.find(e.text);
        if (a != c.hostArgs.end()) return EV::tensor(a->second);
        Value* arg = c.fn->addArg(f->second);
        arg->name = e.text;
        c.leaves->push_back({HostLeaf::Var, e.text, f->second, std::nullopt, e.loc});
        c.hostArgs[e.text] = arg;
        return EV::tensor(arg);
      }
    }
    if (auto sv = shapeVars_.back().find(e.text); sv != shapeVars_.back().end())
      return EV::literal(Num{true, sv->second, 0});
    if (e.text == "NP") return EV::literal(Num{true, opts_.np, 0});
    if (auto it = consts_.find(e.text); it != consts_.end()) return EV::literal(Num{true, it->second, 0});
    if (const Param* p = mod_->findParam(e.text)) {
      auto pv = c.paramVals.find(p->name);
      if (pv != c.paramVals.end()) return EV::tensor(pv->second);
      AttrMap at;
      at.set("name", p->name);
      Op* op = c.fn->append(OpKind::Param, {}, at, p->type, e.loc);
      op->result->sharding = p->sharding;
      c.paramVals[p->name] = op->result;
      return EV::tensor(op->result);
    }
    auto g = globals_.find(e.text);
    if (g != globals_.end()) {
      if (g->second.kind == "fn") err(c, e.loc, "'" + e.text + "' is a function; call it as " + e.text + "(...)");
      else if (g->second.kind == "mesh") err(c, e.loc, "'" + e.text + "' is a mesh, not a value");
      return {};  // a const or param whose declaration had an error
    }
    if (lookupBuiltin(e.text) || kHostBuiltins.count(e.text))
      err(c, e.loc, "'" + e.text + "' is a builtin function; call it as " + e.text + "(...)");
    else
      err(c, e.loc, "unknown name '" + e.text + "'" + suggest(e.text, visibleNames(c)));
    return {};
  }

  static OpKind binaryKind(const std::string& op) {
    static const std::map<std::string, OpKind> m = {
        {"+", OpKind::Add}, {"-", OpKind::Sub}, {"*", OpKind::Mul}, {"/", OpKind::Div},
        {"%", OpKind::Mod}, {"**", OpKind::Pow}, {"@", OpKind::MatMul}, {"==", OpKind::Eq},
        {"!=", OpKind::Ne}, {"<", OpKind::Lt}, {"<=", OpKind::Le}, {">", OpKind::Gt},
        {">=", OpKind::Ge}, {"and", OpKind::And}, {"or", OpKind::Or}};
    return m.at(op);
  }

  // Brings two operands to a common dtype: a weakly typed literal adopts the
  // other operand's dtype (as JAX's weak types / Python scalars in PyTorch).
  // `la`, `lb`: where each operand is (a literal's errors point at it).
  bool unify(Ctx& c, EV& a, EV& b, SourceLoc la, SourceLoc lb, std::vector<Value*>& out) {
    DType dt;
    if (a.kind == EV::Tensor) dt = a.v->type.dtype;
    else if (b.kind == EV::Tensor) dt = b.v->type.dtype;
    else dt = (a.lit.isInt && b.lit.isInt) ? DType::I32 : DType::F32;
    out = {materialize(c, a, dt, la), materialize(c, b, dt, lb)};
    return true;
  }

  EV lowerBinary(Ctx& c, const ast::Expr& e) {
    EV a = lower(c, *e.elems[0]);
    EV b = lower(c, *e.elems[1]);
    if (!a.ok() || !b.ok()) return {};
    for (EV* x : {&a, &b})
      if (x->kind == EV::Tuple) {
        err(c, e.loc, "a function with several results cannot be used as an operand");
        return {};
      }
    const std::string& op = e.text;
    bool arith = op == "+" || op == "-" || op == "*" || op == "/" || op == "%" || op == "**";
    if (a.kind == EV::Literal && b.kind == EV::Literal && arith) {
      auto r = foldBinary(op, a.lit, b.lit, e.loc, false);
      if (!r) return {};
      return EV::literal(*r);
    }
    OpKind k = binaryKind(op);
    std::vector<Value*> ops;
    if (k == OpKind::MatMul) {
      ops = {materialize(c, a, DType::F32, e.loc), materialize(c, b, DType::F32, e.loc)};
    } else {
      unify(c, a, b, startLoc(*e.elems[0]), startLoc(*e.elems[1]), ops);
      if (k == OpKind::Div && ops[0]->type.dtype == DType::I32 && ops[1]->type.dtype == DType::I32) {
        // True division, as NumPy/JAX/PyTorch: i32 / i32 gives f32.
        AttrMap at;
        at.set("dtype", DType::F32);
        for (auto& v : ops) {
          EV cv = emit(c, OpKind::Cast, {v}, at, e.loc);
          v = cv.v;
        }
      }
    }
    return emit(c, k, ops, {}, e.loc);
  }

  EV lowerUnary(Ctx& c, const ast::Expr& e) {
    EV a = lower(c, *e.elems[0]);
    if (!a.ok()) return {};
    if (a.kind == EV::Tuple) {
      err(c, e.loc, "a function with several results cannot be used as an operand");
      return {};
    }
    if (e.text == "+") return a;
    if (e.text == "-") {
      if (a.kind == EV::Literal) {
        Num n = a.lit;
        if (n.isInt) n.i = -n.i;
        else n.f = -n.f;
        return EV::literal(n);
      }
      return emit(c, OpKind::Neg, {a.v}, {}, e.loc);
    }
    // not
    if (a.kind == EV::Literal) {
      err(c, e.loc, "not needs a bool operand, got a number");
      return {};
    }
    return emit(c, OpKind::Not, {a.v}, {}, e.loc);
  }

  EV lower(Ctx& c, const ast::Expr& e) {
    switch (e.kind) {
      case ast::ExprKind::Int: return EV::literal(Num{true, e.ival, 0});
      case ast::ExprKind::Float: return EV::literal(Num{false, 0, e.fval});
      case ast::ExprKind::Bool: {
        AttrMap at;
        at.set("value", e.bval ? 1.0 : 0.0);
        return EV::tensor(c.fn->append(OpKind::Constant, {}, at, TensorType{DType::Bool, {}}, e.loc)->result);
      }
      case ast::ExprKind::String:
        err(c, e.loc, "a string is not a tensor value (strings are for print, save, load and einsum specs)");
        return {};
      case ast::ExprKind::DType:
        err(c, e.loc, "a dtype is not a value (dtypes are for cast(x, f32) and types)");
        return {};
      case ast::ExprKind::List:
        err(c, e.loc, "a list is not a tensor value (lists are for static arguments such as axis=[0, 1] and concat's operands)");
        return {};
      case ast::ExprKind::Tuple:
        err(c, e.loc, "a tuple can only be returned (return a, b)");
        return {};
      case ast::ExprKind::Name: return lowerName(c, e);
      case ast::ExprKind::Unary: return lowerUnary(c, e);
      case ast::ExprKind::Binary: return lowerBinary(c, e);
      case ast::ExprKind::Call: return lowerCall(c, e);
      case ast::ExprKind::Annot: {
        EV a = lower(c, *e.elems[0]);
        if (!a.ok()) return {};
        if (a.kind == EV::Tuple) {
          err(c, e.loc, "@shard applies to one value, not to several results");
          return {};
        }
        Value* v = materialize(c, a, defaultDType(a), e.loc);
        auto s = checkSharding(*e.annot, v->type);
        if (!s) return {};
        return EV::tensor(constrain(c, v, *s, e.annot->loc));
      }
      case ast::ExprKind::Load: return lowerLoad(c, e);
      case ast::ExprKind::Method: return lowerMethod(c, e);
    }
    return {};
  }

  // The params a function reads, in declaration order.
  std::vector<std::string> paramsUsed(const Function& f) {
    std::set<std::string> used;
    for (const auto& op : f.ops)
      if (op->kind == OpKind::Param) used.insert(op->attrs.getString("name"));
    std::vector<std::string> r;
    for (const auto& p : mod_->params)
      if (used.count(p.name)) r.push_back(p.name);
    return r;
  }

  // A thunk computing the loss `fnName(args of e from firstArg)`, which
  // must be an f32 scalar.
  bool makeLossThunk(const ast::Expr& e, const std::string& fnName, size_t firstArg, Thunk& t) {
    auto fn = std::make_unique<Function>();
    fn->name = "main." + std::to_string(nextThunk_++);
    fn->loc = e.loc;
    Ctx c;
    c.fn = fn.get();
    c.host = true;
    c.leaves = &t.leaves;
    c.callStack.push_back("main");
    EV v = lowerUserCall(c, e, fnName, firstArg);
    if (!v.ok()) return false;
    if (v.kind != EV::Tensor || v.v->type != TensorType{DType::F32, {}}) {
      err(e.loc, "the loss function '" + fnName + "' must return an f32 scalar" +
                     (v.kind == EV::Tensor ? ", got " + v.v->type.str() : std::string()));
      return false;
    }
    fn->results = {v.v};
    fn->resultShardings = {std::nullopt};
    t.fn = fn.get();
    t.loc = e.loc;
    thunks_.push_back(std::move(fn));
    return true;
  }

  // The loss function named by the first argument of grad(...) or minimize(...).
  std::string lossFunction(const ast::Expr& e, const char* what) {
    if (e.args.empty() || !e.args[0].keyword.empty() || e.args[0].value->kind != ast::ExprKind::Name ||
        !fns_.count(e.args[0].value->text)) {
      err(e.loc, std::string(what) + "'s first argument is the loss function, then its arguments: " + what +
                     "(loss, x, y)");
      return "";
    }
    return e.args[0].value->text;
  }

  // opt.minimize(loss, args...): one training step; its value is the loss.
  EV lowerMethod(Ctx& c, const ast::Expr& e) {
    const Optimizer* o = mod_->findOptimizer(e.text);
    if (!o) {
      auto g = globals_.find(e.text);
      if (g != globals_.end()) err(c, e.loc, "'" + e.text + "' is a " + g->second.kind + "; only optimizers have methods (opt.minimize(...))");
      else err(c, e.loc, "unknown name '" + e.text + "'" + suggest(e.text, visibleNames(c)));
      return {};
    }
    if (e.member != "minimize") {
      err(c, e.loc, "an optimizer has one method, minimize, not '" + e.member + "'");
      return {};
    }
    if (!c.host) {
      err(c, e.loc, "opt.minimize(...) is only allowed in fn main");
      return {};
    }
    std::string fnName = lossFunction(e, (e.text + ".minimize").c_str());
    if (fnName.empty()) return {};
    auto step = std::make_shared<Thunk>();
    if (!makeLossThunk(e, fnName, 1, *step)) return {};
    TrainRequest tr;
    tr.kind = TrainRequest::Minimize;
    tr.params = paramsUsed(*step->fn);
    tr.optimizer = o->name;
    if (tr.params.empty()) {
      err(e.loc, "the loss function '" + fnName + "' reads no params: there is nothing to train");
      return {};
    }
    step->fn->train = tr;
    TensorType f32{DType::F32, {}};
    Value* arg = c.fn->addArg(f32);
    HostLeaf leaf{HostLeaf::Minimize, o->name, f32, std::nullopt, e.loc};
    leaf.sub = step;
    c.leaves->push_back(leaf);
    return EV::tensor(arg);
  }

  EV lowerLoad(Ctx& c, const ast::Expr& e) {
    if (!c.host) {
      err(c, e.loc, "load(...) is only allowed in fn main (tensor functions take their inputs as arguments)");
      return {};
    }
    if (e.elems[0]->kind != ast::ExprKind::String) {
      err(c, startLoc(*e.elems[0]), "load's path must be a string literal");
      return {};
    }
    auto t = lowerType(*e.type);
    if (!t) return {};
    std::optional<Sharding> s;
    if (e.annot) {
      s = checkSharding(*e.annot, *t);
      if (!s) return {};
    }
    Value* arg = c.fn->addArg(*t);
    arg->sharding = s;
    c.leaves->push_back({HostLeaf::Load, e.elems[0]->text, *t, s, e.loc});
    return EV::tensor(arg);
  }

  // ------------------------------------------------------------ calls
  EV lowerCall(Ctx& c, const ast::Expr& e) {
    const std::string& name = e.text;
    if (name == "print" || name == "save") {
      err(c, e.loc, name + "(...) is a statement of fn main, not a value");
      return {};
    }
    if (name == "exists") {
      if (!c.host) {
        err(c, e.loc, "exists(...) is only allowed in fn main");
        return {};
      }
      if (e.args.size() != 1 || e.args[0].value->kind != ast::ExprKind::String || !e.args[0].keyword.empty()) {
        err(c, e.loc, "exists takes one argument: a path as a string literal");
        return {};
      }
      TensorType bt{DType::Bool, {}};
      Value* arg = c.fn->addArg(bt);
      c.leaves->push_back({HostLeaf::Exists, e.args[0].value->text, bt, std::nullopt, e.loc});
      return EV::tensor(arg);
    }
    if (name == "start_step") {
      if (!c.host || !e.args.empty()) {
        err(c, e.loc, "start_step() takes no arguments and is only allowed in fn main");
        return {};
      }
      TensorType i32{DType::I32, {}};
      Value* arg = c.fn->addArg(i32);
      c.leaves->push_back({HostLeaf::StartStep, "", i32, std::nullopt, e.loc});
      return EV::tensor(arg);
    }
    if (name == "grad" || name == "batch") {
      err(c, e.loc, name == "grad" ? "grad(...) can only be the value of a let in fn main: let (dw1, dw2) = grad(loss, x, y)"
                                   : "batch(...) can only be the value of a let in fn main: let (x, y) = batch(data, step)");
      return {};
    }
    if (name == "save_checkpoint") {
      err(c, e.loc, "save_checkpoint(...) is a statement of fn main, not a value");
      return {};
    }
    if (fns_.count(name)) return lowerUserCall(c, e);
    if (const OpInfo* op = lookupBuiltin(name)) return lowerBuiltin(c, e, *op);
    if (kInitializers.count(name)) {
      err(c, e.loc, "'" + name + "' is a param initializer; it can only be used in a param declaration");
      return {};
    }
    auto g = globals_.find(name);
    if (g != globals_.end()) {
      err(c, e.loc, "'" + name + "' is a " + g->second.kind + ", not a function");
      return {};
    }
    std::vector<std::string> cands;
    for (auto& [k, f] : fns_) cands.push_back(k);
    for (auto& o : allOps())
      if (o.builtin) cands.push_back(o.builtin);
    for (auto& h : kHostBuiltins) cands.push_back(h);
    err(c, e.loc, "unknown function '" + name + "'" + suggest(name, cands));
    return {};
  }

  static std::string argList(const OpInfo& op) {
    std::string r;
    for (auto& a : op.args) r += std::string(r.empty() ? "" : ", ") + a.name;
    return r;
  }

  // Maps positional and keyword arguments onto a signature. Returns false
  // after reporting an error.
  template <class NameOf>
  bool bindArgs(Ctx& c, const ast::Expr& call, size_t nparams, NameOf nameOf, bool variadicLast,
                const std::string& sig, std::vector<const ast::Expr*>& slots,
                std::vector<const ast::Expr*>& rest, size_t firstArg = 0, const std::string* calleeName = nullptr) {
    slots.assign(nparams, nullptr);
    size_t pos = 0;
    bool sawKeyword = false;
    const std::string& callee = calleeName ? *calleeName : call.text;
    for (size_t ai = firstArg; ai < call.args.size(); ++ai) {
      const auto& a = call.args[ai];
      if (a.keyword.empty()) {
        if (sawKeyword) {
          err(c, a.loc, "positional argument after a keyword argument");
          return false;
        }
        if (variadicLast && pos + 1 >= nparams) {
          rest.push_back(a.value.get());
          pos = nparams - 1;
          continue;
        }
        if (pos >= nparams) {
          err(c, a.loc, "too many arguments to " + callee + " (it takes " + sig + ")");
          return false;
        }
        slots[pos++] = a.value.get();
      } else {
        sawKeyword = true;
        size_t i = 0;
        while (i < nparams && a.keyword != nameOf(i)) ++i;
        if (i == nparams) {
          std::vector<std::string> names;
          for (size_t j = 0; j < nparams; ++j) names.push_back(nameOf(j));
          std::string hint = suggest(a.keyword, names);
          err(c, a.loc, callee + " has no argument '" + a.keyword + "'" + (hint.empty() ? " (it takes " + sig + ")" : hint));
          return false;
        }
        if (slots[i]) {
          err(c, a.loc, "argument '" + a.keyword + "' of " + callee + " is given twice");
          return false;
        }
        slots[i] = a.value.get();
      }
    }
    return true;
  }

  EV lowerBuiltin(Ctx& c, const ast::Expr& e, const OpInfo& op) {
    std::vector<const ast::Expr*> slots, rest;
    bool variadic = !op.args.empty() && op.args.back().kind == ArgKind::Variadic;
    if (!bindArgs(c, e, op.args.size(), [&](size_t i) { return std::string(op.args[i].name); }, variadic,
                  argList(op), slots, rest))
      return {};
    AttrMap at;
    std::map<std::string, SourceLoc> attrLocs;
    std::vector<EV> operands;
    std::vector<SourceLoc> operandLocs;
    bool ok = true;
    for (size_t i = 0; i < op.args.size(); ++i) {
      const ArgSpec& spec = op.args[i];
      const ast::Expr* x = slots[i];
      if (spec.kind == ArgKind::Variadic) {
        for (const ast::Expr* r : rest) {
          operands.push_back(lower(c, *r));
          operandLocs.push_back(startLoc(*r));
        }
        if (rest.empty()) {
          err(c, e.loc, std::string(op.builtin) + " needs at least one tensor operand");
          return {};
        }
        continue;
      }
      if (!x) {
        if (spec.dflt) at.set(spec.name, *spec.dflt);
        else if (!spec.optional) {
          err(c, e.loc, std::string(op.builtin) + " is missing its argument '" + spec.name + "' (it takes " + argList(op) + ")");
          return {};
        }
        continue;
      }
      if (spec.kind != ArgKind::Tensor && spec.kind != ArgKind::Tensors) attrLocs[spec.name] = startLoc(*x);
      switch (spec.kind) {
        case ArgKind::Tensor:
          operands.push_back(lower(c, *x));
          operandLocs.push_back(startLoc(*x));
          break;
        case ArgKind::Tensors:
          if (x->kind != ast::ExprKind::List) {
            err(c, startLoc(*x), std::string(op.builtin) + "'s '" + spec.name + "' must be a list of tensors, as [a, b]");
            return {};
          }
          for (const auto& el : x->elems) {
            operands.push_back(lower(c, *el));
            operandLocs.push_back(startLoc(*el));
          }
          break;
        case ArgKind::Int: {
          auto v = evalInt(*x, std::string(op.builtin) + "'s '" + spec.name + "'");
          if (!v) ok = false;
          else at.set(spec.name, *v);
          break;
        }
        case ArgKind::Ints: {
          std::vector<int64_t> vs;
          if (x->kind == ast::ExprKind::List) {
            for (const auto& el : x->elems) {
              auto v = evalInt(*el, std::string(op.builtin) + "'s '" + spec.name + "'");
              if (!v) ok = false;
              else vs.push_back(*v);
            }
          } else if (auto v = evalInt(*x, std::string(op.builtin) + "'s '" + spec.name + "'")) {
            vs.push_back(*v);
          } else {
            ok = false;
          }
          at.set(spec.name, vs);
          break;
        }
        case ArgKind::Float: {
          auto v = constEval(*x);
          if (!v) ok = false;
          else at.set(spec.name, v->d());
          break;
        }
        case ArgKind::Bool:
          if (x->kind != ast::ExprKind::Bool) {
            err(c, startLoc(*x), std::string(op.builtin) + "'s '" + spec.name + "' must be true or false");
            ok = false;
          } else {
            at.set(spec.name, x->bval);
          }
          break;
        case ArgKind::String:
          if (x->kind != ast::ExprKind::String) {
            err(c, startLoc(*x), std::string(op.builtin) + "'s '" + spec.name + "' must be a string literal");
            ok = false;
          } else {
            at.set(spec.name, x->text);
          }
          break;
        case ArgKind::DTypeArg:
          if (x->kind != ast::ExprKind::DType) {
            err(c, startLoc(*x), std::string(op.builtin) + "'s '" + spec.name + "' must be a dtype (f32, i32 or bool)");
            ok = false;
          } else {
            at.set(spec.name, x->dtype);
          }
          break;
        case ArgKind::Variadic: break;
      }
    }
    for (auto& o : operands) {
      if (!o.ok()) ok = false;
      else if (o.kind == EV::Tuple) {
        err(c, e.loc, "a function with several results cannot be used as an operand");
        ok = false;
      }
    }
    if (!ok) return {};
    std::vector<Value*> vals;
    if (op.cls == OpClass::Binary) {
      unify(c, operands[0], operands[1], operandLocs[0], operandLocs[1], vals);
    } else if (op.kind == OpKind::Where) {
      std::vector<Value*> ab;
      unify(c, operands[1], operands[2], operandLocs[1], operandLocs[2], ab);
      vals = {materialize(c, operands[0], DType::Bool, operandLocs[0]), ab[0], ab[1]};
    } else {
      // A literal operand takes its natural dtype (int -> i32, float -> f32),
      // except for ops defined on f32 only, where it is f32 (exp(1) works).
      static const std::set<OpKind> floatOnly = {
          OpKind::Exp, OpKind::Log, OpKind::Sqrt, OpKind::Rsqrt, OpKind::Tanh, OpKind::Gelu,
          OpKind::Sigmoid, OpKind::MatMul, OpKind::Einsum, OpKind::Mean, OpKind::Softmax,
          OpKind::LogSoftmax, OpKind::LayerNorm};
      for (size_t i = 0; i < operands.size(); ++i) {
        DType dt = floatOnly.count(op.kind) ? DType::F32 : defaultDType(operands[i]);
        vals.push_back(materialize(c, operands[i], dt, operandLocs[i]));
      }
    }
    return emit(c, op.kind, vals, at, e.loc, attrLocs);
  }

  // Shape variables of a function: names used as whole dims of its argument
  // types that are not consts (`fn dense(x: f32[N, D], w: f32[D, H])`).
  // A function with shape variables is generic: it is checked and lowered
  // at each call, with the variables bound from the argument types.
  // Explicit shape parameters (`fn f[C](...)`) come first; they are bound
  // by keyword at each call (`f(x, C=4)`).
  std::vector<std::string> shapeVarsOf(const ast::Decl& d) {
    std::vector<std::string> vars;
    for (const auto& [p, l] : d.shapeParams) vars.push_back(p);
    for (const auto& a : d.args)
      for (const auto& dim : a.type->dims)
        if (dim->kind == ast::ExprKind::Name && dim->text != "NP" && !capturesDim(d, dim->text) &&
            std::find(vars.begin(), vars.end(), dim->text) == vars.end())
          vars.push_back(dim->text);
    return vars;
  }

  // Whether global `name` is what a dim `name` in fn `d`'s argument types
  // means. A const declared in another file does not capture the dims of an
  // imported file's functions: `S` in stdlib's `fn moe(x: f32[G, S, M])`
  // stays a shape variable when the program declares its own `const S`.
  // Functions of the program's own (root) file see every const.
  bool capturesDim(const ast::Decl& d, const std::string& name) {
    auto g = globals_.find(name);
    if (g == globals_.end()) return false;
    if (g->second.kind != "const") return true;
    return d.loc.file == rootFile_ || g->second.loc.file == d.loc.file;
  }

  // Computes argument and result types and shardings of `d` into `f`
  // (shape variables, if any, must be bound in shapeVars_.back()).
  bool computeSignature(const ast::Decl& d, FnInfo& f) {
    bool ok = true;
    std::set<std::string> argNames;
    f.argTypes.clear();
    f.argShardings.clear();
    f.resultTypes.clear();
    f.resultShardings.clear();
    for (const auto& a : d.args) {
      if (!argNames.insert(a.name).second) {
        err(a.loc, "function '" + d.name + "' has two arguments named '" + a.name + "'");
        ok = false;
      }
      auto t = lowerType(*a.type);
      if (!t) {
        ok = false;
        t = TensorType{};
      }
      f.argTypes.push_back(*t);
      std::optional<Sharding> s;
      if (a.annot && ok) {
        s = checkSharding(*a.annot, *t);
        if (!s) ok = false;
      }
      f.argShardings.push_back(s);
    }
    for (const auto& r : d.results) {
      auto t = lowerType(*r.type);
      if (!t) {
        ok = false;
        t = TensorType{};
      }
      f.resultTypes.push_back(*t);
      std::optional<Sharding> s;
      if (r.annot && ok) {
        s = checkSharding(*r.annot, *t);
        if (!s) ok = false;
      }
      f.resultShardings.push_back(s);
    }
    return ok;
  }

  // Computes (once) a non-generic function's signature.
  FnInfo& signature(const std::string& name) {
    FnInfo& f = fns_[name];
    if (f.state != 0 || f.sigOk) return f;
    f.shapeVars = shapeVarsOf(*f.decl);
    if (!f.shapeVars.empty()) return f;
    shapeVars_.emplace_back();
    f.sigOk = computeSignature(*f.decl, f);
    shapeVars_.pop_back();
    return f;
  }

  void lowerFnStandalone(const std::string& name) {
    FnInfo& f = signature(name);
    if (f.state != 0) return;
    if (!f.shapeVars.empty()) {  // generic: checked and lowered at each call
      f.state = 2;
      f.ok = true;
      std::set<std::string> seen;
      for (const auto& [p, l] : f.decl->shapeParams) {
        if (!seen.insert(p).second) {
          err(l, "function '" + name + "' has two shape parameters named '" + p + "'");
          f.ok = false;
        } else if (p == "NP" || (globals_.count(p) && globals_.at(p).kind != "const")) {
          err(l, "shape parameter '" + p + "' of '" + name + "' has the name of a " +
                     (p == "NP" ? std::string("predefined const") : globals_.at(p).kind));
          f.ok = false;
        } else if (std::any_of(f.decl->args.begin(), f.decl->args.end(), [&](const auto& a) { return a.name == p; })) {
          err(l, "shape parameter '" + p + "' of '" + name + "' has the name of an argument");
          f.ok = false;
        }
      }
      return;
    }
    f.state = 1;
    shapeVars_.emplace_back();
    int before = diags_.errorCount();
    f.owned = std::make_unique<Function>();
    f.fn = f.owned.get();
    f.fn->name = name;
    f.fn->loc = f.decl->loc;
    bool bodyOk = false;
    if (f.sigOk) {
      Ctx c;
      c.fn = f.fn;
      c.callStack.push_back(name);
      c.scopes.emplace_back();
      for (size_t i = 0; i < f.argTypes.size(); ++i) {
        Value* a = f.fn->addArg(f.argTypes[i]);
        a->sharding = f.argShardings[i];
        a->name = f.decl->args[i].name;
        c.scopes.back()[f.decl->args[i].name] = EV::tensor(a);
      }
      std::vector<Value*> results;
      bodyOk = lowerFnBody(c, *f.decl, f, results);
      if (bodyOk) {
        f.fn->results = results;
        f.fn->resultShardings = f.resultShardings;
      }
    }
    shapeVars_.pop_back();
    // The body can fail without a new error: a use of a mesh whose own
    // declaration had the error. Such a function must not be inlined.
    f.ok = f.sigOk && bodyOk && diags_.errorCount() == before;
    if (!f.ok) f.fn = nullptr;
    if (f.fn) builtOps_ += f.fn->ops.size();
    f.state = 2;
  }

  // Lowers the statements of a tensor function in context `c` (its
  // arguments already bound). Returns false after an error.
  bool lowerFnBody(Ctx& c, const ast::Decl& d, FnInfo& f, std::vector<Value*>& results) {
    bool ok = true, returned = false;
    for (size_t i = 0; i < d.body.size(); ++i) {
      const ast::Stmt& s = *d.body[i];
      if (returned) {
        err(c, s.loc, "code after return is unreachable (return must be the last statement)");
        return false;
      }
      switch (s.kind) {
        case ast::StmtKind::Let:
        case ast::StmtKind::LetTuple:
          ok &= bindLet(c, s);
          break;
        case ast::StmtKind::Assign:
          err(c, s.loc, "cannot reassign '" + s.names[0] + "' in a tensor function (bind a new name with let)");
          ok = false;
          break;
        case ast::StmtKind::Return: {
          returned = true;
          // `return f(...)` passes on all of a call's results.
          std::vector<EV> vals;
          size_t given = s.exprs.size();
          if (given == 1 && f.resultTypes.size() > 1) {
            EV v = lower(c, *s.exprs[0]);
            if (!v.ok()) return false;
            if (v.kind == EV::Tuple) {
              for (Value* t : v.tuple) vals.push_back(EV::tensor(t));
              given = vals.size();
            } else {
              vals.push_back(v);
            }
          }
          if (given != f.resultTypes.size()) {
            err(c, s.loc, "function '" + d.name + "' returns " + std::to_string(f.resultTypes.size()) +
                              " value" + (f.resultTypes.size() == 1 ? "" : "s") + " but this return gives " +
                              std::to_string(given));
            return false;
          }
          for (size_t k = 0; k < given; ++k) {
            size_t ek = std::min(k, s.exprs.size() - 1);
            EV v = vals.empty() ? lower(c, *s.exprs[k]) : vals[k];
            if (!v.ok()) {
              ok = false;
              continue;
            }
            if (v.kind == EV::Tuple) {
              err(c, startLoc(*s.exprs[ek]), "a function with several results cannot be returned as one value");
              ok = false;
              continue;
            }
            Value* r = materialize(c, v, f.resultTypes[k].dtype, startLoc(*s.exprs[ek]));
            if (r->type != f.resultTypes[k]) {
              err(c, startLoc(*s.exprs[ek]), "function '" + d.name + "' is declared to return " + f.resultTypes[k].str() +
                                          " but this value has type " + r->type.str());
              ok = false;
              continue;
            }
            results.push_back(r);
          }
          break;
        }
        case ast::StmtKind::For:
        case ast::StmtKind::If:
          err(c, s.loc, std::string("'") + (s.kind == ast::StmtKind::For ? "for" : "if") +
                            "' is only allowed in fn main (tensor functions are straight-line code; use where(...) to select)");
          ok = false;
          break;
        case ast::StmtKind::Expr: {
          const ast::Expr& x = *s.exprs[0];
          if (x.kind == ast::ExprKind::Call && (x.text == "print" || x.text == "save"))
            err(c, s.loc, x.text + "(...) is only allowed in fn main");
          else
            err(c, s.loc, "the value of this expression is unused (bind it with let or return it)");
          ok = false;
          break;
        }
      }
    }
    if (ok && !returned && !f.resultTypes.empty()) {
      err(c, d.loc, "function '" + d.name + "' must end with a return");
      return false;
    }
    return ok;
  }

  // let x = e, let x: T = e, let (a, b) = f(...): binds names in the innermost scope.
  bool bindLet(Ctx& c, const ast::Stmt& s) {
    EV v = lower(c, *s.exprs[0]);
    if (!v.ok()) {
      for (auto& n : s.names) c.scopes.back()[n] = EV{};
      return false;
    }
    if (s.kind == ast::StmtKind::LetTuple) {
      if (v.kind != EV::Tuple || v.tuple.size() != s.names.size()) {
        size_t got = v.kind == EV::Tuple ? v.tuple.size() : 1;
        err(c, s.loc, "cannot unpack " + std::to_string(got) + " value" + (got == 1 ? "" : "s") + " into " +
                          std::to_string(s.names.size()) + " names");
        for (auto& n : s.names) c.scopes.back()[n] = EV{};
        return false;
      }
      for (size_t i = 0; i < s.names.size(); ++i) {
        nameValue(c, v.tuple[i], s.names[i]);
        c.scopes.back()[s.names[i]] = EV::tensor(v.tuple[i]);
      }
      return true;
    }
    if (v.kind == EV::Tuple) {
      err(c, s.loc, "this call returns " + std::to_string(v.tuple.size()) + " values; unpack them with let (a, b) = ...");
      c.scopes.back()[s.names[0]] = EV{};
      return false;
    }
    if (s.type) {
      auto t = lowerType(*s.type);
      if (!t) return false;
      Value* x = materialize(c, v, t->dtype, startLoc(*s.exprs[0]));
      if (x->type != *t) {
        err(c, startLoc(*s.exprs[0]), "'" + s.names[0] + "' is declared as " + t->str() + " but its value has type " + x->type.str());
        c.scopes.back()[s.names[0]] = EV{};
        return false;
      }
      v = EV::tensor(x);
    }
    if (v.kind == EV::Tensor) nameValue(c, v.v, s.names[0]);
    c.scopes.back()[s.names[0]] = v;
    return true;
  }

  // Records a let name on its value (for the REPL), in a function's own
  // body only (not in bodies inlined into it), first name wins.
  static void nameValue(Ctx& c, Value* v, const std::string& n) {
    if (c.callStack.size() == 1 && !c.host && v->name.empty()) v->name = n;
  }

  // A call of user function `name` with the arguments of `e` from
  // `firstArg` on (a method call passes its arguments after the function).
  EV lowerUserCall(Ctx& c, const ast::Expr& e) { return lowerUserCall(c, e, e.text, 0); }
  EV lowerUserCall(Ctx& c, const ast::Expr& e, const std::string& name, size_t firstArg) {
    if (name == "main") {
      err(c, e.loc, "fn main cannot be called");
      return {};
    }
    if (std::find(c.callStack.begin(), c.callStack.end(), name) != c.callStack.end() || fns_[name].state == 1) {
      err(c, e.loc, "recursive call of '" + name + "' (GSL inlines function calls, so recursion is not allowed)");
      return {};
    }
    lowerFnStandalone(name);
    FnInfo& f = fns_[name];
    const ast::Decl& d = *f.decl;
    std::string argNames;
    for (auto& a : d.args) argNames += (argNames.empty() ? "" : ", ") + a.name;
    // Explicit shape parameters are keyword arguments after the tensor ones.
    const size_t nargs = d.args.size(), nshape = d.shapeParams.size();
    for (const auto& sp : d.shapeParams) argNames += (argNames.empty() ? "" : ", ") + sp.first + "=INT";
    size_t positional = 0;
    for (size_t ai = firstArg; ai < e.args.size(); ++ai)
      if (e.args[ai].keyword.empty() && ++positional > nargs && nshape) {
        err(c, e.args[ai].loc, "shape parameter '" + d.shapeParams[std::min(positional - nargs, nshape) - 1].first +
                                   "' of '" + name + "' must be given by name (" + argNames + ")");
        return {};
      }
    std::vector<const ast::Expr*> slots, rest;
    if (!bindArgs(c, e, nargs + nshape,
                  [&](size_t i) { return i < nargs ? d.args[i].name : d.shapeParams[i - nargs].first; }, false,
                  argNames.empty() ? "no arguments" : argNames, slots, rest, firstArg, &name))
      return {};
    bool ok = true;
    std::map<std::string, int64_t> bound;
    std::string key = name;
    for (size_t i = 0; i < nshape; ++i) {
      const std::string& sp = d.shapeParams[i].first;
      if (!slots[nargs + i]) {
        err(c, e.loc, "call of '" + name + "' must give its shape parameter '" + sp + "' (" + sp + "=INT)");
        return {};
      }
      auto v = evalInt(*slots[nargs + i], "shape parameter '" + sp + "' of '" + name + "'");
      if (!v) return {};
      if (*v <= 0) {
        err(c, startLoc(*slots[nargs + i]), "shape parameter '" + sp + "' of '" + name + "' must be positive, got " +
                                               std::to_string(*v));
        return {};
      }
      bound[sp] = *v;
      key += "/" + sp + "=" + std::to_string(*v);
    }
    std::vector<EV> vals;
    for (size_t i = 0; i < d.args.size(); ++i) {
      if (!slots[i]) {
        err(c, e.loc, "call of '" + name + "' is missing argument '" + d.args[i].name + "'");
        return {};
      }
      vals.push_back(lower(c, *slots[i]));
      if (!vals.back().ok()) ok = false;
      else if (vals.back().kind == EV::Tuple) {
        err(c, startLoc(*slots[i]), "a function with several results cannot be used as an argument");
        ok = false;
      }
    }
    if (!ok || !f.ok) return {};
    // A generic function: bind its shape variables from the argument types
    // and compute this instance's signature.
    FnInfo inst;
    FnInfo* sig = &f;
    if (!f.shapeVars.empty()) {
      for (size_t i = 0; i < d.args.size(); ++i) {
        Value* v = materialize(c, vals[i], d.args[i].type->dtype, startLoc(*slots[i]));
        vals[i] = EV::tensor(v);
        const auto& dims = d.args[i].type->dims;
        if ((int)dims.size() != v->type.rank()) {
          err(c, startLoc(*slots[i]), "argument '" + d.args[i].name + "' of '" + name + "' must have rank " +
                                    std::to_string(dims.size()) + ", got " + v->type.str());
          return {};
        }
        for (size_t j = 0; j < dims.size(); ++j) {
          if (dims[j]->kind != ast::ExprKind::Name ||
              std::find(f.shapeVars.begin(), f.shapeVars.end(), dims[j]->text) == f.shapeVars.end())
            continue;
          int64_t actual = v->type.shape[j];
          auto [it, fresh] = bound.emplace(dims[j]->text, actual);
          if (!fresh && it->second != actual) {
            bool given = std::any_of(d.shapeParams.begin(), d.shapeParams.end(),
                                     [&](const auto& p) { return p.first == dims[j]->text; });
            err(c, startLoc(*slots[i]), "argument '" + d.args[i].name + "' of '" + name + "' has type " + v->type.str() +
                                      ", but shape variable " + dims[j]->text + " is " + std::to_string(it->second) +
                                      (given ? " as given at the call" : " from an earlier argument"));
            return {};
          }
        }
        key += "/" + v->type.str();
      }
      shapeVars_.push_back(bound);
      bool sigOk = computeSignature(d, inst);
      shapeVars_.pop_back();
      if (!sigOk) return {};
      sig = &inst;
    } else {
      bound.clear();
    }
    if (opLimitReached(c, e.loc)) return {};
    Ctx inner;
    inner.fn = c.fn;
    inner.host = false;
    inner.paramVals = c.paramVals;
    inner.callStack = c.callStack;
    inner.callStack.push_back(name);
    inner.scopes.emplace_back();
    for (size_t i = 0; i < d.args.size(); ++i) {
      Value* v = materialize(c, vals[i], sig->argTypes[i].dtype, startLoc(*slots[i]));
      if (v->type != sig->argTypes[i]) {
        err(c, startLoc(*slots[i]), "argument '" + d.args[i].name + "' of '" + name + "' must be " + sig->argTypes[i].str() +
                                  ", got " + v->type.str());
        ok = false;
        continue;
      }
      if (sig->argShardings[i]) v = constrain(c, v, *sig->argShardings[i], startLoc(*slots[i]));
      inner.scopes.back()[d.args[i].name] = EV::tensor(v);
    }
    if (!ok) return {};
    // A non-generic body was checked when `name` was lowered on its own; a
    // generic one is checked here, once per distinct instance.
    bool generic = !f.shapeVars.empty();
    inner.mute = (!generic || failedInstances_.count(key)) ? 1 : 0;
    int before = diags_.errorCount();
    shapeVars_.push_back(bound);
    std::vector<Value*> results;
    bool bodyOk = lowerFnBody(inner, d, *sig, results);
    shapeVars_.pop_back();
    if (!bodyOk) {
      if (tooLarge_) return {};
      GSL_ASSERT(generic, "inlining '" + name + "' failed after it was checked");
      if (diags_.errorCount() > before) {
        std::string vars;
        for (auto& [k, v] : bound) vars += (vars.empty() ? "" : ", ") + k + " = " + std::to_string(v);
        if (!c.mute) diags_.note(e.loc, "in this call of '" + name + "' (" + vars + ")");
      }
      failedInstances_.insert(key);
      return {};
    }
    for (auto& [k, v] : inner.paramVals) c.paramVals[k] = v;
    for (size_t i = 0; i < results.size(); ++i)
      if (sig->resultShardings[i]) results[i] = constrain(c, results[i], *sig->resultShardings[i], e.loc);
    if (results.size() == 1) return EV::tensor(results[0]);
    EV t;
    t.kind = EV::Tuple;
    t.tuple = results;
    return t;
  }

  // ------------------------------------------------------------ fn main
  // Lowers the tensor expression `e` of the host script into a new thunk.
  // `want`: the dtype a weakly typed literal result takes.
  bool makeThunk(const ast::Expr& e, Thunk& t, std::optional<DType> want = std::nullopt, bool allowTuple = false) {
    auto fn = std::make_unique<Function>();
    fn->name = "main." + std::to_string(nextThunk_++);
    fn->loc = e.loc;
    Ctx c;
    c.fn = fn.get();
    c.host = true;
    c.leaves = &t.leaves;
    c.callStack.push_back("main");
    EV v = lower(c, e);
    if (!v.ok()) return false;
    if (v.kind == EV::Tuple) {
      if (!allowTuple) {
        err(e.loc, "this call returns " + std::to_string(v.tuple.size()) + " values; unpack them with let (a, b) = ...");
        return false;
      }
      fn->results = v.tuple;
    } else {
      fn->results = {materialize(c, v, want ? *want : defaultDType(v), e.loc)};
    }
    fn->resultShardings.assign(fn->results.size(), std::nullopt);
    t.fn = fn.get();
    t.loc = startLoc(e);
    thunks_.push_back(std::move(fn));
    return true;
  }

  const TensorType* findHostVar(const std::string& n) {
    for (auto it = hostScopes_.rbegin(); it != hostScopes_.rend(); ++it) {
      auto f = it->find(n);
      if (f != it->end()) return &f->second;
    }
    return nullptr;
  }

  // let (g1, g2) = grad(loss, x, y) and let (x, y) = batch(data, step).
  bool lowerSpecialLet(const ast::Stmt& s, const ast::Expr& rhs, HostStmt& h) {
    if (rhs.text == "grad") {
      std::string fnName = lossFunction(rhs, "grad");
      if (fnName.empty()) return false;
      if (!makeLossThunk(rhs, fnName, 1, h.value)) return false;
      TrainRequest tr;
      tr.kind = TrainRequest::Grad;
      tr.params = paramsUsed(*h.value.fn);
      h.value.fn->train = tr;
      if (tr.params.size() != s.names.size()) {
        std::string ps;
        for (auto& p : tr.params) ps += (ps.empty() ? "" : ", ") + p;
        err(s.loc, "grad(" + fnName + ", ...) gives one gradient per param that '" + fnName + "' reads (" +
                       (ps.empty() ? "none" : ps) + "): unpack " + std::to_string(tr.params.size()) + " name" +
                       (tr.params.size() == 1 ? "" : "s"));
        return false;
      }
      for (size_t i = 0; i < s.names.size(); ++i) hostScopes_.back()[s.names[i]] = mod_->findParam(tr.params[i])->type;
      return true;
    }
    // batch(dataset, step)
    if (rhs.args.size() != 2 || !rhs.args[0].keyword.empty() || !rhs.args[1].keyword.empty() ||
        rhs.args[0].value->kind != ast::ExprKind::Name) {
      err(rhs.loc, "batch takes a dataset and a step: let (x, y) = batch(data, step)");
      return false;
    }
    const Dataset* ds = findDataset(rhs.args[0].value->text);
    if (!ds) {
      err(rhs.args[0].value->loc, "'" + rhs.args[0].value->text + "' is not a dataset (declare one with dataset NAME = copy_task(...))");
      return false;
    }
    if (s.names.size() != 2) {
      err(s.loc, "batch(...) gives two values, the inputs and the targets: let (x, y) = batch(data, step)");
      return false;
    }
    auto step = std::make_shared<Thunk>();
    if (!makeThunk(*rhs.args[1].value, *step, DType::I32)) return false;
    if (step->fn->results[0]->type != TensorType{DType::I32, {}}) {
      err(rhs.args[1].value->loc, "batch's step must be an i32 scalar, got " + step->fn->results[0]->type.str());
      return false;
    }
    auto fn = std::make_unique<Function>();
    fn->name = "main." + std::to_string(nextThunk_++);
    fn->loc = rhs.loc;
    TensorType t{DType::I32, {ds->batch, ds->seq}};
    for (int i = 0; i < 2; ++i) {
      fn->results.push_back(fn->addArg(t));
      HostLeaf leaf{HostLeaf::Batch, ds->name, t, std::nullopt, rhs.loc};
      leaf.index = i;
      leaf.sub = step;
      h.value.leaves.push_back(leaf);
    }
    fn->resultShardings.assign(2, std::nullopt);
    h.value.fn = fn.get();
    h.value.loc = rhs.loc;
    thunks_.push_back(std::move(fn));
    for (auto& n : s.names) hostScopes_.back()[n] = t;
    return true;
  }

  void lowerMain(const ast::Decl& d) {
    if (!d.args.empty() || !d.results.empty()) {
      err(d.loc, "fn main takes no arguments and returns nothing (it is the host script)");
      return;
    }
    out_.host.hasMain = true;
    out_.host.loc = d.loc;
    hostScopes_.emplace_back();
    lowerHostBlock(d.body, out_.host.body);
    hostScopes_.pop_back();
  }

  void lowerHostBlock(const ast::Block& b, std::vector<HostStmt>& out) {
    for (const auto& s : b) lowerHostStmt(*s, out);
  }

  void lowerHostStmt(const ast::Stmt& s, std::vector<HostStmt>& out) {
    HostStmt h;
    h.loc = s.loc;
    switch (s.kind) {
      case ast::StmtKind::Let:
      case ast::StmtKind::LetTuple: {
        h.kind = HostStmt::Let;
        h.names = s.names;
        const ast::Expr& rhs = *s.exprs[0];
        if (rhs.kind == ast::ExprKind::Call && (rhs.text == "grad" || rhs.text == "batch") && !s.type) {
          if (!lowerSpecialLet(s, rhs, h)) {
            for (auto& n : s.names) hostScopes_.back()[n] = TensorType{};
            return;
          }
          break;
        }
        std::optional<TensorType> declared;
        if (s.type && !(declared = lowerType(*s.type))) return;
        bool tuple = s.kind == ast::StmtKind::LetTuple;
        if (!makeThunk(*s.exprs[0], h.value, declared ? std::optional(declared->dtype) : std::nullopt, tuple)) {
          for (auto& n : s.names) hostScopes_.back()[n] = TensorType{};  // no cascades
          return;
        }
        auto& res = h.value.fn->results;
        if (tuple && res.size() != s.names.size()) {
          err(s.loc, "cannot unpack " + std::to_string(res.size()) + " value" + (res.size() == 1 ? "" : "s") +
                         " into " + std::to_string(s.names.size()) + " names");
          return;
        }
        if (declared && res[0]->type != *declared) {
          err(startLoc(*s.exprs[0]), "'" + s.names[0] + "' is declared as " + declared->str() + " but its value has type " +
                                   res[0]->type.str());
          return;
        }
        for (size_t i = 0; i < s.names.size(); ++i) hostScopes_.back()[s.names[i]] = res[i]->type;
        break;
      }
      case ast::StmtKind::Assign: {
        h.kind = HostStmt::Assign;
        h.names = s.names;
        const TensorType* t = findHostVar(s.names[0]);
        if (!t) {
          std::vector<std::string> names;
          for (auto& sc : hostScopes_)
            for (auto& [k, v] : sc) names.push_back(k);
          std::string hint = suggest(s.names[0], names);
          err(s.nameLocs[0], "assignment to undeclared variable '" + s.names[0] + "'" +
                                 (hint.empty() ? " (declare it with let)" : hint));
          return;
        }
        TensorType want = *t;
        if (!makeThunk(*s.exprs[0], h.value, want.dtype)) return;
        const TensorType& got = h.value.fn->results[0]->type;
        if (got != want) {
          err(startLoc(*s.exprs[0]), "cannot assign a value of type " + got.str() + " to '" + s.names[0] + "', which has type " +
                                   want.str());
          return;
        }
        break;
      }
      case ast::StmtKind::For: {
        h.kind = HostStmt::For;
        h.names = s.names;
        bool ok = makeThunk(*s.exprs[0], h.lo, DType::I32);
        ok = makeThunk(*s.exprs[1], h.hi, DType::I32) && ok;
        TensorType i32{DType::I32, {}};
        if (ok) {
          for (auto* t : {&h.lo, &h.hi})
            if (t->fn->results[0]->type != i32) {
              err(t->loc, "loop bounds must be i32 scalars, got " + t->fn->results[0]->type.str());
              ok = false;
            }
        }
        hostScopes_.emplace_back();
        hostScopes_.back()[s.names[0]] = i32;
        lowerHostBlock(s.body, h.body);
        hostScopes_.pop_back();
        if (!ok) return;
        break;
      }
      case ast::StmtKind::If: {
        h.kind = HostStmt::If;
        bool ok = makeThunk(*s.exprs[0], h.cond);
        if (ok && h.cond.fn->results[0]->type != TensorType{DType::Bool, {}}) {
          err(startLoc(*s.exprs[0]), "the condition of if must be a bool scalar, got " + h.cond.fn->results[0]->type.str());
          ok = false;
        }
        hostScopes_.emplace_back();
        lowerHostBlock(s.body, h.body);
        hostScopes_.pop_back();
        hostScopes_.emplace_back();
        lowerHostBlock(s.elseBody, h.elseBody);
        hostScopes_.pop_back();
        if (!ok) return;
        break;
      }
      case ast::StmtKind::Return:
        err(s.loc, "fn main cannot return (it is the host script)");
        return;
      case ast::StmtKind::Expr: {
        const ast::Expr& x = *s.exprs[0];
        if (x.kind == ast::ExprKind::Call && x.text == "print") {
          h.kind = HostStmt::Print;
          for (const auto& a : x.args) {
            if (!a.keyword.empty()) {
              err(a.loc, "print takes no keyword arguments");
              return;
            }
            HostStmt::PrintArg pa;
            if (a.value->kind == ast::ExprKind::String) {
              pa.text = a.value->text;
            } else {
              Thunk t;
              if (!makeThunk(*a.value, t)) return;
              pa.value = t;
            }
            h.printArgs.push_back(std::move(pa));
          }
          break;
        }
        if (x.kind == ast::ExprKind::Call && x.text == "save_checkpoint") {
          h.kind = HostStmt::SaveCheckpoint;
          if (x.args.size() != 1 || !x.args[0].keyword.empty() || x.args[0].value->kind != ast::ExprKind::String) {
            err(x.loc, "save_checkpoint takes one argument: a path as a string literal");
            return;
          }
          h.path = x.args[0].value->text;
          break;
        }
        if (x.kind == ast::ExprKind::Call && x.text == "save") {
          h.kind = HostStmt::Save;
          if (x.args.size() != 2 || !x.args[0].keyword.empty() || !x.args[1].keyword.empty()) {
            err(x.loc, "save takes two arguments: save(\"path.npy\", tensor)");
            return;
          }
          if (x.args[0].value->kind != ast::ExprKind::String) {
            err(startLoc(*x.args[0].value), "save's path must be a string literal");
            return;
          }
          h.path = x.args[0].value->text;
          if (!makeThunk(*x.args[1].value, h.value)) return;
          break;
        }
        if (x.kind == ast::ExprKind::Call && fns_.count(x.text)) {
          h.kind = HostStmt::Eval;
          if (!makeThunk(x, h.value, std::nullopt, true)) return;
          break;
        }
        err(s.loc, "the value of this expression is unused (bind it with let, or print it)");
        return;
      }
    }
    out.push_back(std::move(h));
  }
};

}  // namespace

bool analyze(const std::vector<const ast::Decl*>& decls, const Options& opts, Diagnostics& diags,
             CheckedProgram& out) {
  Sema s(opts, diags, out);
  return s.run(decls);
}

}  // namespace gsl::frontend
