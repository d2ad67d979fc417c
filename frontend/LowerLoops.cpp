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
  // Carried: the names the body assigns that live outside it, and their
  // values before the loop.
  std::vector<std::string> assigned, carried;
  std::vector<Value*> carriedInit;
  freeAssigns(s.body, {s.names[0]}, assigned);
  bool initsOk = true;
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
    carried.push_back(n);
    if (!v.ok() || v.kind == EV::Tuple) {  // its declaration had an error
      carriedInit.push_back(nullptr);
      initsOk = false;
      continue;
    }
    carriedInit.push_back(materialize(c, v, defaultDType(v), s.loc));
  }
  auto setCarried = [&](const std::vector<Value*>& vals) {
    for (size_t k = 0; k < carried.size(); ++k) {
      EV v = vals.empty() ? EV{} : EV::tensor(vals[k]);
      // The innermost scope holding the name (the loop runs in that scope's code).
      bool set = false;
      for (auto it = c.scopes.rbegin(); it != c.scopes.rend() && !set; ++it)
        if (it->count(carried[k])) (*it)[carried[k]] = v, set = true;
      GSL_ASSERT(set, "internal error: carried name '" + carried[k] + "' is not in scope around its loop");
    }
  };
  // The body, lowered with the carried values typed `types` (the whole
  // batch, or a pipeline's microbatch); its frame and context are kept in
  // `f` and `b`.
  LoopFrame f;
  Ctx b;
  std::unique_ptr<Function> body;
  auto lowerBody = [&](const std::vector<TensorType>& types) {
    f = LoopFrame{};
    f.parent = &c;
    f.var = s.names[0];
    body = std::make_unique<Function>();
    body->name = c.fn->name + ".loop";
    f.body = body.get();
    Value* index = body->addArg(TensorType{DType::I32, {}});
    body->names.setName(index, s.names[0]);
    b = Ctx{};
    b.fn = body.get();
    b.loop = &f;
    b.loopRoot = true;
    b.callStack = c.callStack;
    b.mute = c.mute;
    b.scopes.emplace_back();
    addCallPath(b, index, s.names[0]);
    bool ok = initsOk;
    for (size_t k = 0; k < carried.size(); ++k) {
      const std::string& n = carried[k];
      if (!carriedInit[k]) {
        b.scopes[0][n] = EV{};
        continue;
      }
      f.carried.push_back(n);
      f.carriedInit.push_back(carriedInit[k]);
      Value* a = body->addArg(types[k]);
      body->names.setName(a, n);
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
    return ok;
  };
  std::vector<TensorType> wholeTypes;
  for (Value* v : carriedInit) wholeTypes.push_back(v ? v->type : TensorType{});
  bool ok = lowerBody(wholeTypes);
  if (!ok) {
    setCarried({});
    deadBodies_.push_back(std::move(body));
    return false;
  }
  if (f.carried.empty()) {  // nothing flows out: the loop has no effect
    deadBodies_.push_back(std::move(body));
    return true;
  }
  int64_t rounds = 1;
  auto microbatches = checkPipeline(c, s, f, *body, lo, hi, rounds);
  if (!microbatches) {
    setCarried({});
    deadBodies_.push_back(std::move(body));
    return false;
  }
  // A pipeline runs the layers on one microbatch at a time: the body again,
  // on microbatch-sized carried values (the functions it calls bind their
  // batch shape to it).
  const int64_t M = std::max<int64_t>(*microbatches, 1);
  if (M > 1) {
    std::vector<TensorType> micro = wholeTypes;
    for (auto& t : micro) t.shape[0] /= M;
    deadBodies_.push_back(std::move(body));
    int errors = diags_.errorCount();
    if (!lowerBody(micro)) {
      if (diags_.errorCount() > errors)
        diags_.note(s.pipelineLoc, "the pipelined loop's body runs on microbatches of " +
                                       std::to_string(micro[0].shape[0]) + " rows (the batch of " +
                                       std::to_string(wholeTypes[0].shape[0]) + " in " + std::to_string(M) +
                                       " microbatches): its shapes must follow the batch");
      setCarried({});
      deadBodies_.push_back(std::move(body));
      return false;
    }
  }
  std::vector<Value*> yields;
  std::vector<TensorType> types;
  for (size_t k = 0; k < f.carried.size(); ++k) {
    yields.push_back(b.scopes[0][f.carried[k]].v);
    types.push_back(body->args[1 + k]->type);
  }
  body->results = yields;
  AttrMap at;
  at.set("trip", hi - lo);
  at.set("carried", (int64_t)f.carried.size());
  auto buildLoop = [&](Function& into, std::vector<Value*> operands) {
    std::vector<TensorType> in, check;
    for (Value* v : operands) in.push_back(v->type);
    std::string why = inferLoopTypes(in, at, *body, check);
    GSL_ASSERT(why.empty(), "internal error: the front end built an ill-typed loop: " + why);
    return into.appendMulti(OpKind::Loop, std::move(operands), at, types, std::move(body), s.loc);
  };
  if (!*microbatches) {
    std::vector<Value*> operands = f.carriedInit;
    operands.insert(operands.end(), f.invariants.begin(), f.invariants.end());
    setCarried(buildLoop(*c.fn, operands)->results);
    return true;
  }
  setCarried(lowerMicrobatchLoop(c, s.loc, M, rounds, f.carriedInit, f.invariants, buildLoop));
  return true;
}

// A pipelined loop, as the front end writes it (passes/Pipelining turns it
// into the pipeline's schedule): the carried values' batch (dim 0) in M
// microbatches, and a loop over them, marked `microbatches = M`, that runs
// the layer loop on each microbatch:
//   x  = transpose(reshape(h, [B/M, M, ...]), [1, 0, ...])   // [M, B/M, ...]
//   _, ys = loop 0, x, invariants... {trip = M, carried = 1, microbatches = M}
//     body(m, _, x, invariants...): yield _, layers(x[m], invariants...)
//   h' = reshape(transpose(ys, [1, 0, ...]), [B, ...])
// Microbatch m holds rows m, m + M, m + 2M, ... of the batch, so a batch
// split over data-parallel axes stays split the same way in every
// microbatch.
std::vector<Value*> Sema::lowerMicrobatchLoop(
    Ctx& c, SourceLoc loc, int64_t M, int64_t R, const std::vector<Value*>& carriedInit, const std::vector<Value*>& invariants,
    const std::function<Op*(Function&, std::vector<Value*>)>& buildLayers) {
  auto append = [&](Function& fn, OpKind k, std::vector<Value*> ops, AttrMap at) {
    std::vector<TensorType> in;
    for (Value* v : ops) in.push_back(v->type);
    TensorType t;
    std::string why = inferType(k, in, at, t);
    GSL_ASSERT(why.empty(), "internal error: the front end built an ill-typed microbatch loop: " + why);
    return fn.append(k, std::move(ops), std::move(at), t, loc)->result;
  };
  auto swap01 = [](int rank) {
    std::vector<int64_t> perm{1, 0};
    for (int d = 2; d < rank; ++d) perm.push_back(d);
    return perm;
  };
  auto body = std::make_unique<Function>();
  body->name = c.fn->name + ".microbatches";
  Value* m = body->addArg(TensorType{DType::I32, {}});
  Value* token = body->addArg(TensorType{DType::I32, {}});
  std::vector<Value*> operands;
  AttrMap zero;
  zero.set("value", 0.0);
  operands.push_back(c.fn->append(OpKind::Constant, {}, zero, TensorType{DType::I32, {}}, loc)->result);
  std::vector<Value*> rows;
  for (Value* h : carriedInit) {
    Shape s = h->type.shape;
    Shape split{s[0] / M, M};
    split.insert(split.end(), s.begin() + 1, s.end());
    AttrMap rs, tr;
    rs.set("shape", split);
    tr.set("perm", swap01(h->type.rank() + 1));
    operands.push_back(append(*c.fn, OpKind::Transpose, {append(*c.fn, OpKind::Reshape, {h}, rs)}, tr));
    Value* xs = body->addArg(operands.back()->type);
    rows.push_back(append(*body, OpKind::DynamicIndex, {xs, m}, {}));
  }
  std::vector<Value*> layerOperands = rows;
  for (Value* v : invariants) {
    operands.push_back(v);
    layerOperands.push_back(body->addArg(v->type));
  }
  Op* layers = buildLayers(*body, layerOperands);
  body->results.push_back(token);
  for (size_t k = 0; k < carriedInit.size(); ++k) body->results.push_back(layers->results[k]);
  AttrMap at;
  at.set("trip", M);
  at.set("carried", (int64_t)1);
  at.set("microbatches", M);
  if (R > 1) at.set("rounds", R);
  std::vector<TensorType> in, types;
  for (Value* v : operands) in.push_back(v->type);
  std::string why = inferLoopTypes(in, at, *body, types);
  GSL_ASSERT(why.empty(), "internal error: the front end built an ill-typed microbatch loop: " + why);
  Op* loop = c.fn->appendMulti(OpKind::Loop, operands, at, types, std::move(body), loc);
  std::vector<Value*> out;
  for (size_t k = 0; k < carriedInit.size(); ++k) {
    Value* ys = loop->results[1 + k];
    AttrMap tr, rs;
    tr.set("perm", swap01(ys->type.rank()));
    rs.set("shape", carriedInit[k]->type.shape);
    out.push_back(append(*c.fn, OpKind::Reshape, {append(*c.fn, OpKind::Transpose, {ys}, tr)}, rs));
  }
  return out;
}

std::optional<int64_t> Sema::checkPipeline(Ctx& c, const ast::Stmt& s, const LoopFrame& f, const Function& body,
                                            int64_t lo, int64_t hi, int64_t& rounds) {
  // The param groups split over a stage axis that the body reads.
  const Group* staged = nullptr;
  std::string stagedName;
  std::set<const Value*> stagedArgs;  // the body arguments holding their members
  for (size_t k = 0; k < f.invariants.size(); ++k) {
    const Value* v = f.invariants[k];
    if (!v->def || v->def->kind != OpKind::Param) continue;
    const std::string name = v->def->attrs.getString("name");
    auto dot = name.find('.');
    if (dot == std::string::npos) continue;
    auto g = groups_.find(name.substr(0, dot));
    if (g == groups_.end() || g->second.stageMesh.empty()) continue;
    if (staged && (staged->stageMesh != g->second.stageMesh || staged->stageAxes != g->second.stageAxes)) {
      err(c, s.loc, "this loop reads param groups '" + stagedName + "' and '" + g->first +
                        "', whose layers are split over different stage axes; a pipelined loop has one stage axis");
      return std::nullopt;
    }
    if (staged && staged->layers != g->second.layers) {
      err(c, s.loc, "this loop reads param groups '" + stagedName + "' (" + std::to_string(staged->layers) +
                        " layers) and '" + g->first + "' (" + std::to_string(g->second.layers) +
                        " layers), both split over stages; a pipelined loop runs one group's layers");
      return std::nullopt;
    }
    staged = &g->second;
    stagedName = g->first;
    stagedArgs.insert(body.args[1 + f.carried.size() + k]);
  }
  if (!staged) {
    if (s.pipelined)
      err(c, s.pipelineLoc, "@pipeline on a loop that reads no param group split over a stage axis (split a group's "
                            "layers: param blocks[L] @shard(m, [stage]))");
    return s.pipelined ? std::nullopt : std::optional<int64_t>(0);
  }
  int64_t m = 1;
  rounds = 1;
  SourceLoc roundsLoc = s.pipelineLoc;
  std::set<std::string> given;
  for (const auto& a : s.pipelineArgs) {
    if (!a.keyword.empty() && !given.insert(a.keyword).second) {
      err(c, a.loc, "@pipeline argument '" + a.keyword + "' is given twice");
      return std::nullopt;
    }
    if (a.keyword != "microbatches" && a.keyword != "rounds") {
      err(c, a.loc, a.keyword.empty() ? "@pipeline takes keyword arguments: @pipeline(microbatches = M, rounds = R)"
                                      : "@pipeline has no argument '" + a.keyword + "' (it takes microbatches, rounds)");
      return std::nullopt;
    }
    const bool isRounds = a.keyword == "rounds";
    auto v = evalInt(*a.value, isRounds ? "the number of rounds" : "the number of microbatches");
    if (!v) return std::nullopt;
    if (*v < 1) {
      err(c, startLoc(*a.value), std::string("the number of ") + (isRounds ? "rounds" : "microbatches") +
                                     " must be at least 1, got " + std::to_string(*v));
      return std::nullopt;
    }
    (isRounds ? rounds : m) = *v;
    if (isRounds) roundsLoc = startLoc(*a.value);
  }
  // Circular: R rounds through the S stages, k = L / (S R) layers a visit.
  if (rounds > 1 && (rounds > staged->layers || staged->layers % (staged->stages * rounds) != 0)) {
    err(c, roundsLoc, "param group '" + stagedName + "' has " + std::to_string(staged->layers) +
                          " layers (L), not a multiple of its " + std::to_string(staged->stages) + " stages (S) times " +
                          std::to_string(rounds) + " rounds (R): a circular pipeline gives each stage L / (S R) "
                          "layers a round");
    return std::nullopt;
  }
  if (rounds > 1 && staged->stages > 1 && m < staged->stages) {
    err(c, roundsLoc, "a circular pipeline (" + std::to_string(rounds) + " rounds) needs at least as many microbatches as stages: " +
                          std::to_string(m) + " microbatches, " + std::to_string(staged->stages) +
                          " stages (a microbatch is back at stage 0 M iterations after it left it)");
    return std::nullopt;
  }
  if (c.loop) {
    err(c, s.loc, "a pipelined loop (over the stages of '" + stagedName + "') cannot be inside another loop");
    return std::nullopt;
  }
  if (lo != 0 || hi != staged->layers) {
    err(c, s.loc, "a loop over the pipeline stages of '" + stagedName + "' must run over all its layers, 0.." +
                      std::to_string(staged->layers) + ", not " + rangeStr({lo, hi}));
    return std::nullopt;
  }
  // Each stage runs its own layers with its own count: the index may only
  // pick the stage's layer of the group.
  const Value* index = body.args[0];
  std::function<bool(const Function&)> indexOk = [&](const Function& fn) {
    for (const auto& op : fn.ops) {
      for (size_t k = 0; k < op->operands.size(); ++k)
        if (op->operands[k] == index &&
            !(op->kind == OpKind::DynamicIndex && k == 1 && stagedArgs.count(op->operands[0])))
          return false;
      if (op->body && !indexOk(*op->body)) return false;
    }
    return true;
  };
  if (!indexOk(body) || std::count(body.results.begin(), body.results.end(), index)) {
    err(c, s.loc, "in a pipelined loop the index '" + s.names[0] + "' may only pick a layer of '" + stagedName +
                      "' (as " + stagedName + ".w[" + s.names[0] + "]): each stage counts its own layers");
    return std::nullopt;
  }
  for (size_t k = 0; k < f.carried.size(); ++k) {
    const TensorType& t = f.carriedInit[k]->type;
    if (t.rank() == 0 || t.dtype != DType::F32) {
      err(c, s.loc, "a pipelined loop's carried values are split into microbatches along dim 0, but '" + f.carried[k] +
                        "' is " + t.str());
      return std::nullopt;
    }
    if (t.shape[0] % m != 0) {
      err(c, s.pipelineLoc.line ? s.pipelineLoc : s.loc,
          std::to_string(m) + " microbatches do not divide the batch: carried '" + f.carried[k] + "' is " + t.str() +
              " (dim 0 has " + std::to_string(t.shape[0]) + " rows)");
      return std::nullopt;
    }
    if (t.shape[0] != f.carriedInit[0]->type.shape[0]) {
      err(c, s.loc, "a pipelined loop's carried values share the batch (dim 0), but '" + f.carried[0] + "' is " +
                        f.carriedInit[0]->type.str() + " and '" + f.carried[k] + "' is " + t.str());
      return std::nullopt;
    }
  }
  // The stage axes split the layers; the batch flowing through the
  // stages must not be split over them too (no annotation of the function
  // may use them).
  std::vector<const Value*> annotated(c.fn->args.begin(), c.fn->args.end());
  for (const auto& op : c.fn->ops)
    if (op->kind != OpKind::Param && op->result) annotated.push_back(op->result);
  for (const Value* v : annotated) {
    if (!v->sharding || v->sharding->mesh != staged->stageMesh) continue;
    for (const auto& dim : v->sharding->dims)
      for (const auto& ax : dim)
        if (std::count(staged->stageAxes.begin(), staged->stageAxes.end(), ax)) {
          err(c, v->shardingLoc.line ? v->shardingLoc : s.loc,
              "mesh axis '" + ax + "' splits the pipeline stages of '" + stagedName +
                  "'; it cannot also split a value of the pipelined loop's function");
          if (!c.mute) diags_.note(staged->stageLoc, "the stage axis is declared here");
          return std::nullopt;
        }
  }
  // One stage and one microbatch: an ordinary loop.
  return staged->stages == 1 && m == 1 ? 0 : m;
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
