// Tensor expressions -> IR ops: names, literals (weakly typed), unary and
// binary operators, and calls (dispatched to user functions, op-table
// builtins or host builtins; builtin arguments bound by the op table's
// signature).
#include "frontend/SemaImpl.h"

#include <limits>

namespace gsl::frontend::sema {

Value* Sema::materialize(Ctx& c, const EV& e, DType dt, SourceLoc l) {
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

DType Sema::defaultDType(const EV& e) { return e.lit.isInt ? DType::I32 : DType::F32; }

// `attrLocs`: where a builtin call gave its static arguments. A type
// rule's message that starts with such an argument's name ("axis 2 is out
// of range ...") is about that argument, so it points there.
EV Sema::emit(Ctx& c, OpKind k, std::vector<Value*> operands, AttrMap at, SourceLoc l,
        const std::map<std::string, SourceLoc>& attrLocs) {
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
Value* Sema::constrain(Ctx& c, Value* v, const Sharding& s, SourceLoc l) {
  if (v->sharding && *v->sharding == s) return v;
  if (!v->def && v->argIndex >= 0) c.fn->wantSharding((size_t)v->argIndex, s);
  if (!v->def || v->sharding || v->def->kind == OpKind::Param)
    v = c.fn->append(OpKind::Copy, {v}, {}, v->type, l)->result;
  v->sharding = s;
  v->shardingLoc = l;
  return v;
}

std::vector<std::string> Sema::visibleNames(Ctx& c) {
  std::vector<std::string> r;
  for (auto& s : c.scopes)
    for (auto& [k, v] : s) r.push_back(k);
  for (auto& s : hostScopes_)
    for (auto& [k, v] : s) r.push_back(k);
  for (auto& [k, g] : globals_) r.push_back(k);
  return r;
}

// The value of param `p` in context `c`: its `param` op, read once per
// function; in a loop body, the param read outside the loop and passed in.
EV Sema::paramRef(Ctx& c, const Param& p, SourceLoc l) {
  auto pv = c.paramVals.find(p.name);
  if (pv != c.paramVals.end()) return EV::tensor(pv->second);
  if (c.loop) {
    EV outer = paramRef(*c.loop->parent, p, l);
    if (!outer.ok()) return outer;
    Value* a = capture(*c.loop, outer.v);
    c.paramVals[p.name] = a;
    return EV::tensor(a);
  }
  AttrMap at;
  at.set("name", p.name);
  Op* op = c.fn->append(OpKind::Param, {}, at, p.type, l);
  op->result->sharding = p.sharding;
  c.paramVals[p.name] = op->result;
  return EV::tensor(op->result);
}

EV Sema::lowerName(Ctx& c, const ast::Expr& e) {
  for (auto it = c.scopes.rbegin(); it != c.scopes.rend(); ++it) {
    auto f = it->find(e.text);
    if (f != it->end()) return f->second;
  }
  // A loop body sees the names of the code around the loop; the values it
  // reads become arguments of the body.
  if (c.loop && c.loopRoot) {
    EV r = lowerName(*c.loop->parent, e);
    if (r.kind == EV::Tensor) return EV::tensor(capture(*c.loop, r.v));
    return r;
  }
  if (c.host) {
    for (auto it = hostScopes_.rbegin(); it != hostScopes_.rend(); ++it) {
      auto f = it->find(e.text);
      if (f == it->end()) continue;
      auto a = c.hostArgs.find(e.text);
      if (a != c.hostArgs.end()) return EV::tensor(a->second);
      Value* arg = c.fn->addArg(f->second);
      c.fn->names.setName(arg, e.text);
      c.leaves->push_back({HostLeaf::Var, e.text, f->second, std::nullopt, e.loc});
      c.hostArgs[e.text] = arg;
      return EV::tensor(arg);
    }
  }
  if (auto sv = shapeVars_.back().find(e.text); sv != shapeVars_.back().end())
    return EV::literal(Num{true, sv->second, 0});
  if (e.text == "NP") return EV::literal(Num{true, opts_.np, 0});
  if (auto it = consts_.find(e.text); it != consts_.end()) return EV::literal(it->second);
  if (const Param* p = mod_->findParam(e.text)) return paramRef(c, *p, e.loc);
  if (groups_.count(e.text) && !groups_.at(e.text).members.empty()) {
    err(c, e.loc, "'" + e.text + "' is a param group; use its members one layer at a time, as " + e.text + "." +
                      groups_.at(e.text).members.front() + "[l]");
    return {};
  }
  auto g = globals_.find(e.text);
  if (g != globals_.end()) {
    if (g->second.kind == ast::DeclKind::Fn) err(c, e.loc, "'" + e.text + "' is a function; call it as " + e.text + "(...)");
    else if (g->second.kind == ast::DeclKind::Mesh) err(c, e.loc, "'" + e.text + "' is a mesh, not a value");
    return {};  // a const or param whose declaration had an error
  }
  if (lookupBuiltin(e.text) || hostBuiltin(e.text))
    err(c, e.loc, "'" + e.text + "' is a builtin function; call it as " + e.text + "(...)");
  else
    err(c, e.loc, "unknown name '" + e.text + "'" + suggest(e.text, visibleNames(c)));
  return {};
}

// The IR op of a binary operator.
OpKind Sema::binaryKind(ast::BinaryOp op) {
  using B = ast::BinaryOp;
  switch (op) {
    case B::Add: return OpKind::Add;
    case B::Sub: return OpKind::Sub;
    case B::Mul: return OpKind::Mul;
    case B::Div: return OpKind::Div;
    case B::Mod: return OpKind::Mod;
    case B::FloorDiv: return OpKind::FloorDiv;
    case B::Pow: return OpKind::Pow;
    case B::MatMul: return OpKind::MatMul;
    case B::Eq: return OpKind::Eq;
    case B::Ne: return OpKind::Ne;
    case B::Lt: return OpKind::Lt;
    case B::Le: return OpKind::Le;
    case B::Gt: return OpKind::Gt;
    case B::Ge: return OpKind::Ge;
    case B::And: return OpKind::And;
    case B::Or: return OpKind::Or;
  }
  GSL_ASSERT(false, "binaryKind: not a binary operator");
}

// Brings two operands to a common dtype: a weakly typed literal adopts the
// other operand's dtype (as JAX's weak types / Python scalars in PyTorch).
// `la`, `lb`: where each operand is (a literal's errors point at it).
bool Sema::unify(Ctx& c, EV& a, EV& b, SourceLoc la, SourceLoc lb, std::vector<Value*>& out) {
  DType dt;
  if (a.kind == EV::Tensor) dt = a.v->type.dtype;
  else if (b.kind == EV::Tensor) dt = b.v->type.dtype;
  else dt = (a.lit.isInt && b.lit.isInt) ? DType::I32 : DType::F32;
  out = {materialize(c, a, dt, la), materialize(c, b, dt, lb)};
  return true;
}

EV Sema::lowerBinary(Ctx& c, const ast::Expr& e) {
  EV a = lower(c, *e.elems[0]);
  EV b = lower(c, *e.elems[1]);
  if (!a.ok() || !b.ok()) return {};
  for (EV* x : {&a, &b})
    if (x->kind == EV::Tuple) {
      err(c, e.loc, "a function with several results cannot be used as an operand");
      return {};
    }
  ast::BinaryOp op = e.binaryOp;
  if (a.kind == EV::Literal && b.kind == EV::Literal && ast::info(op).arithmetic) {
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
  EV r = emit(c, k, ops, {}, e.loc);
  // A loop index plus or minus a constant is still a known range.
  if (r.ok() && (k == OpKind::Add || k == OpKind::Sub)) {
    auto ra = a.kind == EV::Tensor ? indexRange_.find(a.v) : indexRange_.end();
    auto rb = b.kind == EV::Tensor ? indexRange_.find(b.v) : indexRange_.end();
    if ((ra != indexRange_.end() && ra->second == kUnknownRange) || (rb != indexRange_.end() && rb->second == kUnknownRange)) {
      indexRange_[r.v] = kUnknownRange;
    } else if (ra != indexRange_.end() && b.kind == EV::Literal && b.lit.isInt) {
      int64_t d = k == OpKind::Add ? b.lit.i : -b.lit.i;
      indexRange_[r.v] = {ra->second.first + d, ra->second.second + d};
    } else if (rb != indexRange_.end() && a.kind == EV::Literal && a.lit.isInt && k == OpKind::Add) {
      indexRange_[r.v] = {rb->second.first + a.lit.i, rb->second.second + a.lit.i};
    }
  }
  return r;
}

EV Sema::lowerUnary(Ctx& c, const ast::Expr& e) {
  EV a = lower(c, *e.elems[0]);
  if (!a.ok()) return {};
  if (a.kind == EV::Tuple) {
    err(c, e.loc, "a function with several results cannot be used as an operand");
    return {};
  }
  switch (e.unaryOp) {
    case ast::UnaryOp::Plus: return a;
    case ast::UnaryOp::Neg:
      if (a.kind == EV::Literal) {
        Num n = a.lit;
        if (n.isInt) n.i = -n.i;
        else n.f = -n.f;
        return EV::literal(n);
      }
      return emit(c, OpKind::Neg, {a.v}, {}, e.loc);
    case ast::UnaryOp::Not:
      if (a.kind == EV::Literal) {
        err(c, e.loc, "not needs a bool operand, got a number");
        return {};
      }
      return emit(c, OpKind::Not, {a.v}, {}, e.loc);
  }
  GSL_ASSERT(false, "lowerUnary: not a unary operator");
}

EV Sema::lower(Ctx& c, const ast::Expr& e) {
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
    case ast::ExprKind::Index: return lowerIndex(c, e);
    case ast::ExprKind::Member: return lowerMember(c, e, false);
  }
  return {};
}

EV Sema::lowerCall(Ctx& c, const ast::Expr& e) {
  const std::string& name = e.text;
  // Host builtins other than load (which is its own expression form, so a
  // call named load is an unknown function).
  if (auto hb = hostBuiltin(name); hb && *hb != HostBuiltin::Load) return lowerHostBuiltinCall(c, e, *hb);
  if (fns_.count(name)) return lowerUserCall(c, e);
  if (const OpInfo* op = lookupBuiltin(name)) return lowerBuiltin(c, e, *op);
  if (kInitializers.count(name)) {
    err(c, e.loc, "'" + name + "' is a param initializer; it can only be used in a param declaration");
    return {};
  }
  auto g = globals_.find(name);
  if (g != globals_.end()) {
    err(c, e.loc, "'" + name + "' is a " + ast::declKindName(g->second.kind) + ", not a function");
    return {};
  }
  err(c, e.loc, unknownFunctionMessage(name));
  return {};
}

// A call whose name is no function, builtin, initializer or declaration:
// lowerCall reports it, and so do the statement positions (where it would
// otherwise be "the value of this expression is unused").
bool Sema::isUnknownCallee(const ast::Expr& e) const {
  if (e.kind != ast::ExprKind::Call) return false;
  const std::string& name = e.text;
  if (auto hb = hostBuiltin(name); hb && *hb != HostBuiltin::Load) return false;
  return !fns_.count(name) && !lookupBuiltin(name) && !kInitializers.count(name) && !globals_.count(name);
}

std::string Sema::unknownFunctionMessage(const std::string& name) const {
  std::vector<std::string> cands;
  for (auto& [k, f] : fns_) cands.push_back(k);
  for (auto& o : allOps())
    if (o.builtin) cands.push_back(o.builtin);
  for (const auto& h : hostBuiltinNames()) cands.push_back(h);
  return "unknown function '" + name + "'" + suggest(name, cands);
}

void Sema::reportExprStatement(Ctx& c, const ast::Stmt& s, const char* use) {
  const ast::Expr& x = *s.exprs[0];
  auto hb = x.kind == ast::ExprKind::Call ? hostBuiltin(x.text) : std::nullopt;
  if (hb == HostBuiltin::Print || hb == HostBuiltin::PrintText || hb == HostBuiltin::Save)
    err(c, s.loc, x.text + "(...) is only allowed in fn main");
  else if (isUnknownCallee(x))
    err(c, x.loc, unknownFunctionMessage(x.text));
  else
    err(c, s.loc, std::string("the value of this expression is unused (bind it with let or ") + use + ")");
}

std::string Sema::argList(const OpInfo& op) {
  std::string r;
  for (auto& a : op.args) r += std::string(r.empty() ? "" : ", ") + a.name;
  return r;
}

// Maps positional and keyword arguments onto a signature. Returns false
// after reporting an error.
bool Sema::bindArgs(Ctx& c, const ast::Expr& call, size_t nparams, const std::function<std::string(size_t)>& nameOf,
              bool variadicLast,
              const std::string& sig, std::vector<const ast::Expr*>& slots,
              std::vector<const ast::Expr*>& rest, size_t firstArg, const std::string* calleeName) {
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

EV Sema::lowerBuiltin(Ctx& c, const ast::Expr& e, const OpInfo& op) {
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
        if (x->kind == ast::ExprKind::Name) {
          bool local = false;
          for (const auto& sc : c.scopes) local |= sc.count(x->text) > 0;
          if (local) {
            err(c, startLoc(*x), std::string(op.builtin) + "'s '" + spec.name +
                                     "' must be a constant (a number or a const), not the value '" + x->text + "'");
            ok = false;
            break;
          }
        }
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
      case ArgKind::Einsum:  // parsed below, once the operands are known
        if (x->kind != ast::ExprKind::String) {
          err(c, startLoc(*x), std::string(op.builtin) + "'s '" + spec.name + "' must be a string literal");
          ok = false;
        } else {
          at.set(spec.name, x->text);
        }
        break;
      case ArgKind::DTypeArg:
        if (x->kind != ast::ExprKind::DType) {
          err(c, startLoc(*x), std::string(op.builtin) + "'s '" + spec.name + "' must be a dtype (f32, i32, bool or bf16)");
          ok = false;
        } else {
          at.set(spec.name, x->dtype);
        }
        break;
      case ArgKind::Variadic:
      case ArgKind::Reduce: break;  // IR only (all_reduce has no builtin)
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
  if (op.kind == OpKind::Dropout && c.loop) {
    // Its key would need the iteration number: every layer of the loop would
    // drop the same elements. An error of the call's context (a function
    // checked on its own may be inlined into a loop): reported like an index
    // error, with a note at the call.
    indexErr(c, e.loc, "dropout inside a for loop is not supported (every iteration would drop the same elements); call it outside the loop");
    return {};
  }
  std::vector<Value*> vals;
  if (op.cls == OpClass::Binary) {
    unify(c, operands[0], operands[1], operandLocs[0], operandLocs[1], vals);
  } else if (op.kind == OpKind::Where) {
    std::vector<Value*> ab;
    unify(c, operands[1], operands[2], operandLocs[1], operandLocs[2], ab);
    vals = {materialize(c, operands[0], DType::Bool, operandLocs[0]), ab[0], ab[1]};
  } else {
    // A literal operand takes the dtype the op table's `literal` column
    // says: its natural one (int -> i32, float -> f32), or f32 for ops
    // defined on f32 only (exp(1) works).
    for (size_t i = 0; i < operands.size(); ++i) {
      DType dt = op.literal == LiteralDType::F32 ? DType::F32 : defaultDType(operands[i]);
      vals.push_back(materialize(c, operands[i], dt, operandLocs[i]));
    }
  }
  // An einsum spec, parsed where the type rule parsed it when it was a
  // string: its errors come after the operands' and point at the call.
  for (const ArgSpec& a : op.args) {
    if (a.kind != ArgKind::Einsum) continue;
    Attr parsed;
    if (auto m = parseStringAttr(op, a, at.getString(a.name), vals.size(), parsed); !m.empty()) {
      err(c, e.loc, m);
      return {};
    }
    at.set(a.name, std::move(parsed));
  }
  return emit(c, op.kind, vals, at, e.loc, attrLocs);
}

}  // namespace gsl::frontend::sema
