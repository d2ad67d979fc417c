// The host script: fn main -> HostProgram. Host statements (let, assign,
// for, if, print, save, save_checkpoint, load_checkpoint), host builtins (load, exists,
// start_step, batch, grad, opt.minimize, evaluate) and the IR thunks that hold the
// tensor math of each statement.
#include <cctype>

#include "frontend/SemaImpl.h"

namespace gsl::frontend::sema {

// The params a function reads, in declaration order.
std::vector<std::string> Sema::paramsUsed(const Function& f) {
  std::set<std::string> used;
  for (const auto& op : f.ops)
    if (op->kind == OpKind::Param) used.insert(op->attrs.getString("name"));
  std::vector<std::string> r;
  for (const auto& p : mod_->params)
    if (used.count(p.name)) r.push_back(p.name);
  return r;
}

// A thunk computing the loss `fnName(args of e from firstArg)`, which
// must be an f32 scalar. With `aux` (opt.minimize), the function may
// instead return a tuple whose first value is that scalar: the thunk
// returns all of them (JAX's value_and_grad(has_aux=True)).
bool Sema::makeLossThunk(const ast::Expr& e, const std::string& fnName, size_t firstArg, Thunk& t, bool aux) {
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
  const TensorType f32{DType::F32, {}};
  if (aux && v.kind == EV::Tuple) {
    if (v.tuple.empty() || v.tuple[0]->type != f32) {
      err(e.loc, "the loss function '" + fnName + "' returns " + std::to_string(v.tuple.size()) +
                     " values; the first must be the loss, an f32 scalar" +
                     (v.tuple.empty() ? std::string() : ", got " + v.tuple[0]->type.str()) +
                     " (the others are auxiliary outputs, not differentiated)");
      return false;
    }
    fn->results = v.tuple;
    fn->resultShardings.assign(v.tuple.size(), std::nullopt);
    t.fn = fn.get();
    t.loc = e.loc;
    thunks_.push_back(std::move(fn));
    return true;
  }
  if (v.kind != EV::Tensor || v.v->type != f32) {
    std::string got = v.kind == EV::Tensor ? ", got " + v.v->type.str()
                      : v.kind == EV::Tuple ? ", got " + std::to_string(v.tuple.size()) + " values"
                                            : std::string();
    err(e.loc, "the loss function '" + fnName + "' must return an f32 scalar" + got +
                   (v.kind == EV::Tuple ? " (only opt.minimize takes a loss with auxiliary outputs)" : ""));
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
std::string Sema::lossFunction(const ast::Expr& e, const char* what) {
  if (e.args.empty() || !e.args[0].keyword.empty() || e.args[0].value->kind != ast::ExprKind::Name ||
      !fns_.count(e.args[0].value->text)) {
    err(e.loc, std::string(what) + "'s first argument is the loss function, then its arguments: " + what +
                   "(loss, x, y)");
    return "";
  }
  return e.args[0].value->text;
}

// opt.minimize(loss, args...): one training step; its value is the loss,
// or, when the loss function returns (loss, aux...), the tuple (loss,
// aux...): the step's values of the auxiliary outputs, computed by the
// step's own forward pass and not differentiated (TrainRequest::aux).
EV Sema::lowerMethod(Ctx& c, const ast::Expr& e) {
  const Optimizer* o = mod_->findOptimizer(e.text);
  if (!o) {
    auto g = globals_.find(e.text);
    if (g != globals_.end() && g->second.kind == ast::DeclKind::Optimizer) return {};  // its declaration had an error
    if (g != globals_.end()) err(c, e.loc, "'" + e.text + "' is a " + ast::declKindName(g->second.kind) + "; only optimizers have methods (opt.minimize(...))");
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
  if (!makeLossThunk(e, fnName, 1, *step, true)) return {};
  TrainRequest tr;
  tr.kind = TrainRequest::Minimize;
  tr.loss = fnName;
  tr.params = paramsUsed(*step->fn);
  tr.optimizer = o->name;
  tr.aux = step->fn->results.size() - 1;
  if (tr.params.empty()) {
    err(e.loc, "the loss function '" + fnName + "' reads no params: there is nothing to train");
    return {};
  }
  step->fn->train = tr;
  // One leaf per value: the loss (index 0) runs the step, the others
  // (index k: aux output k) take its results.
  std::vector<Value*> outs;
  for (size_t k = 0; k < step->fn->results.size(); ++k) {
    const TensorType t = step->fn->results[k]->type;
    outs.push_back(c.fn->addArg(t));
    HostLeaf leaf{HostLeaf::Minimize, o->name, t, std::nullopt, e.loc};
    leaf.index = (int)k;
    leaf.sub = step;
    c.leaves->push_back(leaf);
  }
  if (outs.size() == 1) return EV::tensor(outs[0]);
  EV r;
  r.kind = EV::Tuple;
  r.tuple = outs;
  return r;
}

// evaluate(loss, data[, batches=K]): the mean of loss(inputs, targets)
// over the validation batches of `data` (a text_bytes data set with a
// split), forward only; its value is an f32 scalar. The loss is lowered
// as a call on two host variables of the batch's type that stand for the
// batch's halves, which then become the batch leaves of the loss thunk.
EV Sema::lowerEvaluate(Ctx& c, const ast::Expr& e) {
  if (!c.host) {
    err(c, e.loc, "evaluate(...) is only allowed in fn main");
    return {};
  }
  const auto& a = e.args;
  if (a.size() < 2 || a.size() > 3 || !a[0].keyword.empty() || !a[1].keyword.empty() ||
      a[0].value->kind != ast::ExprKind::Name || a[1].value->kind != ast::ExprKind::Name ||
      (a.size() == 3 && a[2].keyword != "batches")) {
    err(c, e.loc, "evaluate takes a loss function, a dataset and optionally batches=K (at most K validation "
                  "batches): evaluate(loss, data)");
    return {};
  }
  const std::string& fnName = a[0].value->text;
  if (!fns_.count(fnName)) {
    std::vector<std::string> names;
    for (auto& [k, f] : fns_) names.push_back(k);
    err(c, a[0].value->loc, "evaluate's first argument is the loss function; '" + fnName + "' is not a function" +
                                suggest(fnName, names));
    return {};
  }
  const std::string& dsName = a[1].value->text;
  const Dataset* ds = findDataset(dsName);
  if (!ds) {
    err(c, a[1].value->loc, "'" + dsName + "' is not a dataset (declare one with dataset NAME = text_bytes(...))");
    return {};
  }
  if (ds->kind != "text" || ds->split >= 1) {
    err(c, a[1].value->loc, "evaluate needs a dataset with a validation part, text_bytes(..., split=S) with S < 1; '" +
                                dsName + "' has none");
    return {};
  }
  int64_t limit = 0;
  if (a.size() == 3) {
    auto v = evalInt(*a[2].value, "evaluate's batches");
    if (!v) return {};
    if (*v < 1) {
      err(c, startLoc(*a[2].value), "evaluate's batches must be positive, got " + std::to_string(*v));
      return {};
    }
    limit = *v;
  }
  const size_t nargs = fns_.at(fnName).decl->args.size();
  if (nargs != 2) {
    err(c, a[0].value->loc, "evaluate calls '" + fnName + "' on each validation batch as " + fnName +
                                "(inputs, targets), but it takes " + std::to_string(nargs) + " argument" +
                                (nargs == 1 ? "" : "s"));
    return {};
  }
  // Not identifiers, so no name of the program is shadowed.
  static const char* const kHalves[2] = {"evaluate inputs", "evaluate targets"};
  ast::Expr call;
  call.kind = ast::ExprKind::Call;
  call.loc = e.loc;
  call.text = fnName;
  hostScopes_.emplace_back();
  for (const char* h : kHalves) {
    auto v = std::make_unique<ast::Expr>();
    v->kind = ast::ExprKind::Name;
    v->loc = a[1].value->loc;
    v->text = h;
    call.args.push_back({"", v->loc, std::move(v)});
    hostScopes_.back()[h] = TensorType{DType::I32, {ds->batch, ds->seq}};
  }
  auto loss = std::make_shared<Thunk>();
  const bool ok = makeLossThunk(call, fnName, 0, *loss);
  hostScopes_.pop_back();
  if (!ok) return {};
  for (HostLeaf& l : loss->leaves) {
    GSL_ASSERT(l.kind == HostLeaf::Var, "evaluate: a leaf of the loss is not a batch half");
    l.kind = HostLeaf::Batch;
    l.index = l.name == kHalves[0] ? 0 : 1;
    l.name = ds->name;
    l.loc = e.loc;
  }
  TensorType f32{DType::F32, {}};
  Value* arg = c.fn->addArg(f32);
  HostLeaf leaf{HostLeaf::Evaluate, ds->name, f32, std::nullopt, e.loc};
  leaf.sub = loss;
  leaf.limit = limit;
  c.leaves->push_back(leaf);
  return EV::tensor(arg);
}

EV Sema::lowerLoad(Ctx& c, const ast::Expr& e) {
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

// Lowers the tensor expression `e` of the host script into a new thunk.
// `want`: the dtype a weakly typed literal result takes.
bool Sema::makeThunk(const ast::Expr& e, Thunk& t, std::optional<DType> want, bool allowTuple) {
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

const TensorType* Sema::findHostVar(const std::string& n) {
  for (auto it = hostScopes_.rbegin(); it != hostScopes_.rend(); ++it) {
    auto f = it->find(n);
    if (f != it->end()) return &f->second;
  }
  return nullptr;
}

// let (g1, g2) = grad(loss, x, y): one gradient per param the loss reads.
bool Sema::lowerGradLet(const ast::Stmt& s, const ast::Expr& rhs, HostStmt& h) {
  std::string fnName = lossFunction(rhs, "grad");
  if (fnName.empty()) return false;
  if (!makeLossThunk(rhs, fnName, 1, h.value)) return false;
  TrainRequest tr;
  tr.kind = TrainRequest::Grad;
  tr.loss = fnName;
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

// let (x, y) = batch(data, step): the inputs and targets of one step.
bool Sema::lowerBatchLet(const ast::Stmt& s, const ast::Expr& rhs, HostStmt& h) {
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
  TensorType tokens{DType::I32, {ds->batch, ds->seq}};
  std::vector<TensorType> types{tokens, tokens};
  if (ds->kind == "pairs") types = {TensorType{DType::F32, {ds->batch, ds->features}}, TensorType{DType::I32, {ds->batch}}};
  for (int i = 0; i < 2; ++i) {
    const TensorType& t = types[i];
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
  for (size_t i = 0; i < 2; ++i) hostScopes_.back()[s.names[i]] = types[i];
  return true;
}

void Sema::lowerMain(const ast::Decl& d) {
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

void Sema::lowerHostBlock(const ast::Block& b, std::vector<HostStmt>& out) {
  for (const auto& s : b) lowerHostStmt(*s, out);
}

void Sema::lowerHostStmt(const ast::Stmt& s, std::vector<HostStmt>& out) {
  HostStmt h;
  h.loc = s.loc;
  switch (s.kind) {
    case ast::StmtKind::Let:
    case ast::StmtKind::LetTuple: {
      h.kind = HostStmt::Let;
      h.names = s.names;
      const ast::Expr& rhs = *s.exprs[0];
      auto hb = rhs.kind == ast::ExprKind::Call ? hostBuiltin(rhs.text) : std::nullopt;
      if ((hb == HostBuiltin::Grad || hb == HostBuiltin::Batch) && !s.type) {
        if (!(hb == HostBuiltin::Grad ? lowerGradLet(s, rhs, h) : lowerBatchLet(s, rhs, h))) {
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
      auto hb = x.kind == ast::ExprKind::Call ? hostBuiltin(x.text) : std::nullopt;
      if (hb == HostBuiltin::Print || hb == HostBuiltin::PrintText || hb == HostBuiltin::Save ||
          hb == HostBuiltin::SaveCheckpoint ||
          hb == HostBuiltin::LoadCheckpoint || hb == HostBuiltin::LogMetric || hb == HostBuiltin::LogMoe) {
        if (!lowerHostCallStmt(x, *hb, h)) return;
        break;
      }
      if (x.kind == ast::ExprKind::Call && fns_.count(x.text)) {
        h.kind = HostStmt::Eval;
        if (!makeThunk(x, h.value, std::nullopt, true)) return;
        break;
      }
      if (isUnknownCallee(x))
        err(x.loc, unknownFunctionMessage(x.text));
      else
        err(s.loc, "the value of this expression is unused (bind it with let, or print it)");
      return;
    }
  }
  out.push_back(std::move(h));
}

// print(...), save(path, value), save_checkpoint(path) and
// load_checkpoint(path) as statements of
// fn main. False after an error (the statement is dropped).
bool Sema::lowerHostCallStmt(const ast::Expr& x, HostBuiltin b, HostStmt& h) {
  switch (b) {
    case HostBuiltin::Print:
    case HostBuiltin::PrintText:
      h.kind = HostStmt::Print;
      for (const auto& a : x.args) {
        if (!a.keyword.empty()) {
          err(a.loc, std::string(hostBuiltinName(b)) + " takes no keyword arguments");
          return false;
        }
        HostStmt::PrintArg pa;
        if (a.value->kind == ast::ExprKind::String) {
          pa.text = a.value->text;
        } else {
          Thunk t;
          if (!makeThunk(*a.value, t)) return false;
          if (b == HostBuiltin::PrintText) {
            if (t.fn->results.size() != 1 || t.fn->results[0]->type.dtype != DType::I32) {
              err(a.value->loc, "print_text writes i32 tensors of byte values (0..255) as text; this argument is " +
                                    (t.fn->results.size() != 1 ? std::to_string(t.fn->results.size()) + " values"
                                                               : t.fn->results[0]->type.str()));
              return false;
            }
            pa.bytes = true;
          }
          pa.value = t;
        }
        h.printArgs.push_back(std::move(pa));
      }
      return true;
    case HostBuiltin::SaveCheckpoint:
      h.kind = HostStmt::SaveCheckpoint;
      if (x.args.empty() || x.args.size() > 2 || !x.args[0].keyword.empty() ||
          x.args[0].value->kind != ast::ExprKind::String) {
        err(x.loc, "save_checkpoint takes a path as a string literal, and optionally optimizer=false: "
                   "save_checkpoint(\"ck.safetensors\")");
        return false;
      }
      if (x.args.size() == 2) {
        const auto& a = x.args[1];
        if (a.keyword != "optimizer" || a.value->kind != ast::ExprKind::Bool) {
          err(a.keyword.empty() ? startLoc(*a.value) : a.loc,
              "save_checkpoint's second argument is optimizer=true or optimizer=false (whether to write the "
              "optimizer states)");
          return false;
        }
        h.optimizer = a.value->bval;
      }
      h.path = x.args[0].value->text;
      return true;
    case HostBuiltin::LoadCheckpoint:
      h.kind = HostStmt::LoadCheckpoint;
      if (x.args.size() != 1 || !x.args[0].keyword.empty() || x.args[0].value->kind != ast::ExprKind::String) {
        err(x.loc, "load_checkpoint takes one argument: a path as a string literal");
        return false;
      }
      h.path = x.args[0].value->text;
      return true;
    case HostBuiltin::LogMetric:
    case HostBuiltin::LogMoe: {
      const bool moe = b == HostBuiltin::LogMoe;
      h.kind = moe ? HostStmt::LogMoe : HostStmt::LogMetric;
      if (x.args.size() != 2 || !x.args[0].keyword.empty() || !x.args[1].keyword.empty() ||
          x.args[0].value->kind != ast::ExprKind::String) {
        err(x.loc, moe ? "log_moe takes a name as a string literal and the MoE layers' telemetry (moe_stats): "
                         "log_moe(\"moe\", stats)"
                       : "log_metric takes a name as a string literal and a scalar: log_metric(\"accuracy\", acc)");
        return false;
      }
      const std::string& n = x.args[0].value->text;
      bool ident = !n.empty() && !std::isdigit((unsigned char)n[0]);
      for (char ch : n) ident = ident && (std::isalnum((unsigned char)ch) || ch == '_');
      if (!ident || n == "step" || n == "loss" || n == "elapsed_s" || n == "tokens_per_s" || n == "examples_per_s") {
        err(startLoc(*x.args[0].value), "a metric is named by letters, digits and '_' (not a digit first, and not step, "
                                        "loss, elapsed_s, tokens_per_s or examples_per_s), got \"" + n + "\"");
        return false;
      }
      h.names = {n};
      if (!makeThunk(*x.args[1].value, h.value)) return false;
      const ir::TensorType& t = h.value.fn->results[0]->type;
      if (moe) {
        // f32[E + MOE_STATS] (one layer) or f32[L, E + MOE_STATS] (L layers), E >= 1.
        const int64_t k = t.rank() >= 1 ? t.shape.back() : 0;
        if (t.dtype != DType::F32 || t.rank() < 1 || t.rank() > 2 || k < 5) {
          err(startLoc(*x.args[1].value), "log_moe's value is the telemetry of stdlib/moe.gsl's moe_stats: "
                                          "f32[E + MOE_STATS] for one MoE layer or f32[L, E + MOE_STATS] for L "
                                          "layers (MOE_STATS = 4, E >= 1), got " + t.str());
          return false;
        }
        return true;
      }
      if (t.rank() != 0 || t.dtype == DType::Bool) {
        err(startLoc(*x.args[1].value), "log_metric's value must be an f32 or i32 scalar, got " + t.str());
        return false;
      }
      return true;
    }
    case HostBuiltin::Save:
      h.kind = HostStmt::Save;
      if (x.args.size() != 2 || !x.args[0].keyword.empty() || !x.args[1].keyword.empty()) {
        err(x.loc, "save takes two arguments: save(\"path.npy\", tensor)");
        return false;
      }
      if (x.args[0].value->kind != ast::ExprKind::String) {
        err(startLoc(*x.args[0].value), "save's path must be a string literal");
        return false;
      }
      h.path = x.args[0].value->text;
      return makeThunk(*x.args[1].value, h.value);
    default:
      GSL_ASSERT(false, hostBuiltinName(b) + std::string(" is not a host statement"));
  }
  return false;
}

// A host builtin called as a value. exists(path) and start_step() are
// thunk inputs; the others are statements or let forms of fn main.
EV Sema::lowerHostBuiltinCall(Ctx& c, const ast::Expr& e, HostBuiltin b) {
  const std::string& name = e.text;
  switch (b) {
    case HostBuiltin::Print:
    case HostBuiltin::PrintText:
    case HostBuiltin::Save:
    case HostBuiltin::SaveCheckpoint:
    case HostBuiltin::LoadCheckpoint:
    case HostBuiltin::LogMetric:
    case HostBuiltin::LogMoe:
      err(c, e.loc, name + "(...) is a statement of fn main, not a value");
      return {};
    case HostBuiltin::Exists: {
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
    case HostBuiltin::StartStep: {
      if (!c.host || !e.args.empty()) {
        err(c, e.loc, "start_step() takes no arguments and is only allowed in fn main");
        return {};
      }
      TensorType i32{DType::I32, {}};
      Value* arg = c.fn->addArg(i32);
      c.leaves->push_back({HostLeaf::StartStep, "", i32, std::nullopt, e.loc});
      return EV::tensor(arg);
    }
    case HostBuiltin::Grad:
      err(c, e.loc, "grad(...) can only be the value of a let in fn main: let (dw1, dw2) = grad(loss, x, y)");
      return {};
    case HostBuiltin::Batch:
      err(c, e.loc, "batch(...) can only be the value of a let in fn main: let (x, y) = batch(data, step)");
      return {};
    case HostBuiltin::Evaluate: return lowerEvaluate(c, e);
    case HostBuiltin::Load:
    case HostBuiltin::Count:
      break;
  }
  GSL_ASSERT(false, std::string("no call form for host builtin ") + hostBuiltinName(b));
  return {};
}

}  // namespace gsl::frontend::sema
