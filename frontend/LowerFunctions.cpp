// User tensor functions: signatures, shape variables and generic
// instances (checked once per distinct binding), bodies, and inlining of
// calls (GSL inlines every call).
#include "frontend/SemaImpl.h"

#include <algorithm>

namespace gsl::frontend::sema {

// Shape variables of a function: names used as whole dims of its argument
// types that are not consts (`fn dense(x: f32[N, D], w: f32[D, H])`).
// A function with shape variables is generic: it is checked and lowered
// at each call, with the variables bound from the argument types.
// Explicit shape parameters (`fn f[C](...)`) come first; they are bound
// by keyword at each call (`f(x, C=4)`).
std::vector<std::string> Sema::shapeVarsOf(const ast::Decl& d) {
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
bool Sema::capturesDim(const ast::Decl& d, const std::string& name) {
  auto g = globals_.find(name);
  if (g == globals_.end()) return false;
  if (g->second.kind != ast::DeclKind::Const) return true;
  return d.loc.file == rootFile_ || g->second.loc.file == d.loc.file;
}

// Computes argument and result types and shardings of `d` into `f`
// (shape variables, if any, must be bound in shapeVars_.back()).
bool Sema::computeSignature(const ast::Decl& d, FnInfo& f) {
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
Sema::FnInfo& Sema::signature(const std::string& name) {
  FnInfo& f = fns_[name];
  if (f.state != 0 || f.sigOk) return f;
  f.shapeVars = shapeVarsOf(*f.decl);
  if (!f.shapeVars.empty()) return f;
  shapeVars_.emplace_back();
  f.sigOk = computeSignature(*f.decl, f);
  shapeVars_.pop_back();
  return f;
}

void Sema::lowerFnStandalone(const std::string& name) {
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
      } else if (p == "NP" || (globals_.count(p) && globals_.at(p).kind != ast::DeclKind::Const)) {
        err(l, "shape parameter '" + p + "' of '" + name + "' has the name of a " +
                   (p == "NP" ? std::string("predefined const") : ast::declKindName(globals_.at(p).kind)));
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
      if (f.decl->args[i].annot) a->shardingLoc = f.decl->args[i].annot->loc;
      f.fn->names.setName(a, f.decl->args[i].name);
      c.scopes.back()[f.decl->args[i].name] = EV::tensor(a);
      // An i32 scalar argument may be a layer index: its range is checked
      // where the function is inlined, with the caller's value.
      if (a->type == TensorType{DType::I32, {}}) indexRange_[a] = kUnknownRange;
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
bool Sema::lowerFnBody(Ctx& c, const ast::Decl& d, FnInfo& f, std::vector<Value*>& results) {
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
        err(c, s.loc, "cannot reassign '" + s.names[0] + "' in a tensor function (bind a new name with let, "
                      "or reassign it in a for loop)");
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
        ok &= lowerLoop(c, s);
        break;
      case ast::StmtKind::If:
        err(c, s.loc, "'if' is only allowed in fn main (tensor functions have no branches; use where(...) to select)");
        ok = false;
        break;
      case ast::StmtKind::Expr: {
        reportExprStatement(c, s, "return it");
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
bool Sema::bindLet(Ctx& c, const ast::Stmt& s) {
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

// Records a let name of a value of c.fn in c.fn's names (for the REPL,
// ir/ValueNames.h): as its name in a function's own body only (not in
// bodies inlined into it), first name wins; and as a call path wherever it
// is (addCallPath).
void Sema::nameValue(Ctx& c, Value* v, const std::string& n) {
  if (c.host) return;
  if (c.callStack.size() == 1 && c.fn->names.name(v).empty()) c.fn->names.setName(v, n);
  addCallPath(c, v, n);
}

// Adds `n` by its call path (the calls inlined below the function being
// lowered, then `n`) to the call paths of v, a value of c.fn.
void Sema::addCallPath(const Ctx& c, Value* v, const std::string& n) {
  std::string p;
  for (size_t i = 1; i < c.callStack.size(); ++i) p += c.callStack[i] + ".";
  p += n;
  c.fn->names.addCallPath(v, p);
}

// A call of user function `name` with the arguments of `e` from
// `firstArg` on (a method call passes its arguments after the function).
EV Sema::lowerUserCall(Ctx& c, const ast::Expr& e) { return lowerUserCall(c, e, e.text, 0); }

EV Sema::lowerUserCall(Ctx& c, const ast::Expr& e, const std::string& name, size_t firstArg) {
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
  InstanceKey key{name, {}, {}};
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
    key.shapeParams.push_back(*v);
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
      key.argTypes.emplace_back(v->type.dtype, v->type.shape);
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
  inner.loop = c.loop;  // params read in a loop body come from outside it
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
    addCallPath(inner, v, d.args[i].name);
    inner.scopes.back()[d.args[i].name] = EV::tensor(v);
  }
  if (!ok) return {};
  // A non-generic body was checked when `name` was lowered on its own; a
  // generic one is checked here, once per distinct instance.
  bool generic = !f.shapeVars.empty();
  inner.mute = (!generic || failedInstances_.count(key)) ? 1 : 0;
  int before = diags_.errorCount(), indexErrorsBefore = inlinedIndexErrors_;
  shapeVars_.push_back(bound);
  std::vector<Value*> results;
  bool bodyOk = lowerFnBody(inner, d, *sig, results);
  shapeVars_.pop_back();
  if (!bodyOk) {
    if (tooLarge_) return {};
    if (inlinedIndexErrors_ > indexErrorsBefore) {  // an index out of range with this call's arguments
      if (!c.mute) diags_.note(e.loc, "in this call of '" + name + "'");
      return {};
    }
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

}  // namespace gsl::frontend::sema
