// Loops in tensor functions and indexing (docs/language.md, "Loops"):
//
//   for l in 0..L { h = block(h, l) }   -> one `loop` op (ir/Loop.h): the
//       names the body reassigns are carried (fixed types and shardings);
//       the values of the code around the loop that the body reads are
//       its loop-invariant operands; the body is a function of its own.
//   w[l], x[2], x[2:6], x[:, 0:4]       -> dynamic_index (a loop index on
//       dim 0), slice (constant bounds) and reshape (a constant point
//       drops its dim)
//   blocks.wq[l]                        -> the stacked param `blocks.wq`,
//       read outside the loop and indexed inside it
#include "frontend/SemaImpl.h"

#include "ir/Loop.h"

namespace gsl::frontend::sema {

namespace {

// Names a block assigns that it does not bind itself (with let or as a
// loop index) before: in a loop body, the carried names.
void freeAssigns(const ast::Block& b, std::set<std::string> bound, std::vector<std::string>& out) {
  for (const auto& sp : b) {
    const ast::Stmt& s = *sp;
    switch (s.kind) {
      case ast::StmtKind::Let:
      case ast::StmtKind::LetTuple:
        for (const auto& n : s.names) bound.insert(n);
        break;
      case ast::StmtKind::Assign:
        if (!bound.count(s.names[0]) && std::find(out.begin(), out.end(), s.names[0]) == out.end())
          out.push_back(s.names[0]);
        break;
      case ast::StmtKind::For: {
        auto inner = bound;
        inner.insert(s.names[0]);
        freeAssigns(s.body, inner, out);
        break;
      }
      default: break;
    }
  }
}

std::string rangeStr(std::pair<int64_t, int64_t> r) {
  return std::to_string(r.first) + ".." + std::to_string(r.second);
}

}  // namespace

// The body argument standing for `outer` (a value of the loop's parent
// context), added on first use.
Value* Sema::capture(LoopFrame& f, Value* outer) {
  auto it = f.captured.find(outer);
  if (it != f.captured.end()) return it->second;
  Value* a = f.body->addArg(outer->type);
  f.captured[outer] = a;
  f.invariants.push_back(outer);
  if (auto r = indexRange_.find(outer); r != indexRange_.end()) indexRange_[a] = r->second;
  return a;
}

// An index error that may show only where a function is inlined (its i32
// argument bound to the caller's value): reported even while inlining a
// body that was checked on its own (c.mute), once per place and message.
void Sema::indexErr(Ctx& c, SourceLoc l, const std::string& m) {
  if (!c.mute) {
    diags_.error(l, m);
    return;
  }
  if (reportedIndexErrors_.insert({l.file, l.line, l.col, m}).second) diags_.error(l, m);
  ++inlinedIndexErrors_;
}

// `group.member`: the stacked param. `indexed`: it is the base of x[...]
// (a member must be read one layer at a time).
EV Sema::lowerMember(Ctx& c, const ast::Expr& e, bool indexed) {
  auto g = groups_.find(e.text);
  if (g == groups_.end()) {
    if (globals_.count(e.text) || mod_->findParam(e.text))
      err(c, e.loc, "'" + e.text + "' is not a param group, so it has no member '" + e.member + "'");
    else
      err(c, e.loc, "unknown param group '" + e.text + "'" + suggest(e.text, visibleNames(c)));
    return {};
  }
  const auto& ms = g->second.members;
  if (std::find(ms.begin(), ms.end(), e.member) == ms.end()) {
    err(c, e.loc, "param group '" + e.text + "' has no member '" + e.member + "'" + suggest(e.member, ms));
    return {};
  }
  const Param* p = mod_->findParam(e.text + "." + e.member);
  if (!p) return {};  // its declaration had an error
  if (!indexed) {
    err(c, e.loc, "param-group member '" + e.text + "." + e.member + "' holds " + std::to_string(g->second.layers) +
                      " layers; index it by a layer, as " + e.text + "." + e.member + "[l]");
    return {};
  }
  return paramRef(c, *p, e.loc);
}

EV Sema::lowerIndex(Ctx& c, const ast::Expr& e) {
  const ast::Expr& base = *e.elems[0];
  EV b = base.kind == ast::ExprKind::Member ? lowerMember(c, base, true) : lower(c, base);
  if (!b.ok()) return {};
  if (b.kind == EV::Literal) {
    err(c, e.loc, "a number cannot be indexed");
    return {};
  }
  if (b.kind == EV::Tuple) {
    err(c, e.loc, "a function with several results cannot be indexed (unpack them with let (a, b) = ...)");
    return {};
  }
  Value* x = b.v;
  const TensorType t = x->type;
  if (e.indices.empty()) {
    err(c, e.loc, "an index needs at least one item (x[i], x[a:b], x[:, i])");
    return {};
  }
  if ((int)e.indices.size() > t.rank()) {
    const ast::IndexItem& extra = e.indices[t.rank()];
    err(c, extra.loc, "cannot index dim " + std::to_string(t.rank()) + " of a value of type " + t.str() + " (it has " +
                          std::to_string(t.rank()) + " dim" + (t.rank() == 1 ? "" : "s") + ")");
    return {};
  }
  // A constant index or slice bound, NumPy-like: negative counts from the end.
  auto constIndex = [&](const ast::Expr& ie, const char* what) -> std::optional<int64_t> {
    EV v = lower(c, ie);
    if (!v.ok()) return std::nullopt;
    if (v.kind != EV::Literal || !v.lit.isInt) {
      err(c, startLoc(ie), std::string(what) + " must be " +
                               (v.kind == EV::Literal ? "an integer" : "a compile-time constant (an integer or a const)"));
      return std::nullopt;
    }
    return v.lit.i;
  };
  struct Plan {
    int64_t start = 0, end = 0;
    bool drop = false;
  };
  std::vector<Plan> plan(t.rank());
  for (int d = 0; d < t.rank(); ++d) plan[d] = {0, t.shape[d], false};
  Value* dynamic = nullptr;  // a loop index on dim 0
  for (size_t d = 0; d < e.indices.size(); ++d) {
    const ast::IndexItem& it = e.indices[d];
    const int64_t n = t.shape[d];
    const std::string dimStr = "dim " + std::to_string(d) + " of " + t.str();
    if (!it.slice) {
      EV v = lower(c, *it.point);
      if (!v.ok()) return {};
      // A constant passed as an argument (block(h, 0)) is still a constant.
      if (v.kind == EV::Tensor && v.v->def && v.v->def->kind == OpKind::Constant &&
          v.v->type == TensorType{DType::I32, {}})
        v = EV::literal(Num{true, (int64_t)v.v->def->attrs.getFloat("value"), 0});
      if (v.kind == EV::Tensor) {
        auto r = indexRange_.find(v.v);
        if (v.v->type == TensorType{DType::I32, {}} && r == indexRange_.end() && !v.v->def &&
            !c.callStack.empty() && c.callStack.front() == "main") {
          indexErr(c, startLoc(*it.point), "a variable of fn main cannot be an index (the index of a stacked value "
                                           "must be a compile-time constant or a loop index of a tensor function)");
          return {};
        }
        if (v.v->type != TensorType{DType::I32, {}} || r == indexRange_.end()) {
          indexErr(c, startLoc(*it.point), "an index must be a compile-time constant or a loop index (plus or minus a constant), got " +
                                          std::string(v.v->type == TensorType{DType::I32, {}} ? "a computed i32 value"
                                                                                             : "a value of type " + v.v->type.str()));
          return {};
        }
        if (d != 0) {
          err(c, startLoc(*it.point), "a loop index can only index the first dim (dim 0); index " + dimStr + " with a constant");
          return {};
        }
        if (r->second != kUnknownRange && (r->second.first < 0 || r->second.second >= n)) {
          indexErr(c, startLoc(*it.point), "loop index out of range for " + dimStr + " (size " + std::to_string(n) +
                                          "): it takes the values " + rangeStr(r->second));
          return {};
        }
        dynamic = v.v;
        continue;
      }
      if (v.kind != EV::Literal || !v.lit.isInt) {
        err(c, startLoc(*it.point), "an index must be an integer");
        return {};
      }
      int64_t i = v.lit.i < 0 ? v.lit.i + n : v.lit.i;
      if (i < 0 || i >= n) {
        indexErr(c, startLoc(*it.point), "index " + std::to_string(v.lit.i) + " is out of range for " + dimStr + " (size " +
                                        std::to_string(n) + ")");
        return {};
      }
      plan[d] = {i, i + 1, true};
      continue;
    }
    int64_t lo = 0, hi = n;
    if (it.lo) {
      auto v = constIndex(*it.lo, "a slice bound");
      if (!v) return {};
      lo = *v < 0 ? *v + n : *v;
    }
    if (it.hi) {
      auto v = constIndex(*it.hi, "a slice bound");
      if (!v) return {};
      hi = *v < 0 ? *v + n : *v;
    }
    if (lo < 0 || hi > n || lo >= hi) {
      err(c, it.loc, "slice " + std::to_string(lo) + ":" + std::to_string(hi) + " is out of range or empty for " + dimStr +
                         " (size " + std::to_string(n) + ")");
      return {};
    }
    plan[d] = {lo, hi, false};
  }
  if (dynamic) {
    EV r = emit(c, OpKind::DynamicIndex, {x, dynamic}, {}, e.loc);
    if (!r.ok()) return {};
    x = r.v;
    plan.erase(plan.begin());
  }
  Shape out;
  bool dropped = false;
  for (size_t d = 0; d < plan.size(); ++d) {
    const Plan& p = plan[d];
    if (p.start != 0 || p.end != x->type.shape[d]) {
      AttrMap at;
      at.set("axis", (int64_t)d);
      at.set("start", p.start);
      at.set("end", p.end);
      EV r = emit(c, OpKind::Slice, {x}, at, e.loc);
      if (!r.ok()) return {};
      x = r.v;
    }
    if (p.drop) dropped = true;
    else out.push_back(p.end - p.start);
  }
  if (dropped) {
    AttrMap at;
    at.set("shape", out);
    EV r = emit(c, OpKind::Reshape, {x}, at, e.loc);
    if (!r.ok()) return {};
    x = r.v;
  }
  return EV::tensor(x);
}

// `for l in lo..hi { ... }` in a tensor function: one loop op.
bool Sema::lowerLoop(Ctx& c, const ast::Stmt& s) {
  int64_t bounds[2];
  for (int k = 0; k < 2; ++k) {
    EV v = lower(c, *s.exprs[k]);
    if (!v.ok()) return false;
    if (v.kind != EV::Literal || !v.lit.isInt) {
      err(c, startLoc(*s.exprs[k]), std::string("loop bounds must be compile-time constants (integers, consts or shape "
                                                 "parameters), but this ") + (k ? "upper" : "lower") + " bound is " +
                                        (v.kind == EV::Literal ? "not an integer" : "a tensor value"));
      return false;
    }
    bounds[k] = v.lit.i;
  }
  const int64_t lo = bounds[0], hi = bounds[1];
  if (hi <= lo) {
    err(c, s.loc, "loop " + std::to_string(lo) + ".." + std::to_string(hi) + " runs no iterations (a loop in a tensor "
                  "function must run at least once)");
    return false;
  }
  if (opLimitReached(c, s.loc)) return false;
  LoopFrame f;
  f.parent = &c;
  f.var = s.names[0];
  auto body = std::make_unique<Function>();
  body->name = c.fn->name + ".loop";
  f.body = body.get();
  Value* index = body->addArg(TensorType{DType::I32, {}});
  index->name = s.names[0];
  Ctx b;
  b.fn = body.get();
  b.loop = &f;
  b.loopRoot = true;
  b.callStack = c.callStack;
  b.mute = c.mute;
  b.scopes.emplace_back();
  addCallPath(b, index, s.names[0]);
  // Carried: the names the body assigns that live outside it.
  std::vector<std::string> assigned;
  freeAssigns(s.body, {s.names[0]}, assigned);
  bool ok = true;
  for (const auto& n : assigned) {
    ast::Expr ne;
    ne.kind = ast::ExprKind::Name;
    ne.text = n;
    ne.loc = s.loc;
    // Only locals can be carried; a missing one is reported at the assignment.
    bool local = false;
    for (Ctx* k = &c; k && !local; k = k->loop && k->loopRoot ? k->loop->parent : nullptr)
      for (auto& sc : k->scopes)
        if (sc.count(n)) local = true;
    if (!local) continue;
    EV v = lowerName(c, ne);
    if (!v.ok() || v.kind == EV::Tuple) {  // its declaration had an error
      b.scopes[0][n] = EV{};
      ok = false;
      continue;
    }
    Value* init = materialize(c, v, defaultDType(v), s.loc);
    f.carried.push_back(n);
    f.carriedInit.push_back(init);
    Value* a = body->addArg(init->type);
    a->name = n;
    addCallPath(b, a, n);
    b.scopes[0][n] = EV::tensor(a);
  }
  // The loop index: the body's argument i counts 0..trip-1.
  Value* l = index;
  if (lo != 0) {
    AttrMap at;
    at.set("value", (double)lo);
    Value* k = body->append(OpKind::Constant, {}, at, TensorType{DType::I32, {}}, s.loc)->result;
    l = body->append(OpKind::Add, {index, k}, {}, TensorType{DType::I32, {}}, s.loc)->result;
  }
  indexRange_[index] = {0, hi - lo - 1};
  indexRange_[l] = {lo, hi - 1};
  b.scopes[0][s.names[0]] = EV::tensor(l);
  for (const auto& st : s.body) ok &= lowerLoopStmt(b, *st);
  auto setCarried = [&](const std::vector<Value*>& vals) {
    for (size_t k = 0; k < f.carried.size(); ++k) {
      EV v = vals.empty() ? EV{} : EV::tensor(vals[k]);
      // The innermost scope holding the name (the loop runs in that scope's code).
      bool set = false;
      for (auto it = c.scopes.rbegin(); it != c.scopes.rend() && !set; ++it)
        if (it->count(f.carried[k])) (*it)[f.carried[k]] = v, set = true;
      GSL_ASSERT(set, "internal error: carried name '" + f.carried[k] + "' is not in scope around its loop");
    }
  };
  if (!ok) {
    setCarried({});
    deadBodies_.push_back(std::move(body));
    return false;
  }
  if (f.carried.empty()) {  // nothing flows out: the loop has no effect
    deadBodies_.push_back(std::move(body));
    return true;
  }
  std::vector<Value*> yields, operands = f.carriedInit;
  std::vector<TensorType> types;
  for (size_t k = 0; k < f.carried.size(); ++k) {
    yields.push_back(b.scopes[0][f.carried[k]].v);
    types.push_back(f.carriedInit[k]->type);
  }
  body->results = yields;
  operands.insert(operands.end(), f.invariants.begin(), f.invariants.end());
  AttrMap at;
  at.set("trip", hi - lo);
  at.set("carried", (int64_t)f.carried.size());
  std::vector<TensorType> in, check;
  for (Value* v : operands) in.push_back(v->type);
  std::string why = inferLoopTypes(in, at, *body, check);
  GSL_ASSERT(why.empty(), "internal error: the front end built an ill-typed loop: " + why);
  Op* op = c.fn->appendMulti(OpKind::Loop, operands, at, types, std::move(body), s.loc);
  setCarried(op->results);
  return true;
}

// A statement of a loop body.
bool Sema::lowerLoopStmt(Ctx& c, const ast::Stmt& s) {
  switch (s.kind) {
    case ast::StmtKind::Let:
    case ast::StmtKind::LetTuple: return bindLet(c, s);
    case ast::StmtKind::Assign: return lowerAssign(c, s);
    case ast::StmtKind::For: return lowerLoop(c, s);
    case ast::StmtKind::Return:
      err(c, s.loc, "return is not allowed inside a loop (return after it; the loop's results are the names it assigns)");
      return false;
    case ast::StmtKind::If:
      err(c, s.loc, "'if' is only allowed in fn main (tensor functions have no branches; use where(...) to select)");
      return false;
    case ast::StmtKind::Expr: {
      reportExprStatement(c, s, "assign it");
      return false;
    }
  }
  return false;
}

// `x = e` in a loop body: x keeps its type (and sharding, if it has one).
bool Sema::lowerAssign(Ctx& c, const ast::Stmt& s) {
  const std::string& n = s.names[0];
  for (LoopFrame* f = c.loop; f; f = f->parent->loop && f->parent->loopRoot ? f->parent->loop : nullptr)
    if (f->var == n) {
      err(c, s.nameLocs[0], "cannot assign the loop index '" + n + "'");
      return false;
    }
  std::map<std::string, EV>* scope = nullptr;
  for (auto it = c.scopes.rbegin(); it != c.scopes.rend() && !scope; ++it)
    if (it->count(n)) scope = &*it;
  EV v = lower(c, *s.exprs[0]);
  if (!scope) {
    err(c, s.nameLocs[0], "assignment to undeclared name '" + n + "' (declare it with let before the loop)");
    return false;
  }
  EV& old = (*scope)[n];
  if (!v.ok() || !old.ok()) {
    old = EV{};
    return false;
  }
  if (v.kind == EV::Tuple) {
    err(c, startLoc(*s.exprs[0]), "this call returns " + std::to_string(v.tuple.size()) +
                                      " values; unpack them with let (a, b) = ... first");
    old = EV{};
    return false;
  }
  Value* was = materialize(c, old, defaultDType(old), s.loc);
  Value* x = materialize(c, v, was->type.dtype, startLoc(*s.exprs[0]));
  const bool carried = c.loop && std::find(c.loop->carried.begin(), c.loop->carried.end(), n) != c.loop->carried.end();
  const std::string what = carried ? "loop-carried value '" + n + "'" : "'" + n + "'";
  if (x->type != was->type) {
    err(c, startLoc(*s.exprs[0]), what + " must keep its type " + was->type.str() + " in the loop, but this value has type " +
                                      x->type.str());
    old = EV{};
    return false;
  }
  // The sharding the carried value has before the loop (a body argument has none of its own).
  std::optional<Sharding> before = was->sharding;
  if (carried) {
    size_t k = std::find(c.loop->carried.begin(), c.loop->carried.end(), n) - c.loop->carried.begin();
    before = c.loop->carriedInit[k]->sharding;
  }
  if (before && x->sharding && *before != *x->sharding) {
    err(c, startLoc(*s.exprs[0]), what + " must keep its sharding " + before->str() + " in the loop, but this value is " +
                                      x->sharding->str());
    old = EV{};
    return false;
  }
  nameValue(c, x, n);
  old = EV::tensor(x);
  return true;
}

}  // namespace gsl::frontend::sema
