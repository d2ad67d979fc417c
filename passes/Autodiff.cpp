#include "passes/Autodiff.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "ir/GradRules.h"
#include "ir/Loop.h"
#include "support/Diagnostics.h"

namespace gsl::passes {

using ir::DType;
using ir::Op;
using ir::OpKind;
using ir::TensorType;
using ir::Value;

namespace {

using ValueSet = std::unordered_set<const Value*>;
using AdjointMap = std::unordered_map<const Value*, Value*>;

// Marks the results of `ops` that depend on an active value (in place):
// an op with a gradient rule and a float (f32, bf16) result is active when an operand
// is; a loop's f32 results are all active when an operand is (any carried
// or stacked value may depend on any input); a param op is active when it
// names a param in `wrt`.
void propagateActive(const std::vector<Op*>& ops, ValueSet& active, const std::set<std::string>& wrt) {
  for (Op* op : ops) {
    if (op->kind == OpKind::Param) {
      if (op->result->type.dtype == DType::F32 && wrt.count(op->attrs.getString("name")))
        active.insert(op->result);
      continue;
    }
    if (op->kind != OpKind::Loop && !op->info().grad) continue;
    bool any = false;
    for (Value* v : op->operands) any |= active.count(v) > 0;
    if (!any) continue;
    for (Value* r : op->results)
      if (ir::isFloat(r->type.dtype)) active.insert(r);
  }
}

void accumulate(ir::GradBuilder& b, Value*& slot, Value* g) { slot = slot ? b.add(slot, g) : g; }

void loopVjp(ir::GradBuilder& b, Op& loop, const std::vector<Value*>& resultAdj,
             const std::vector<bool>& wanted, std::vector<Value*>& og, bool remat);

// The reverse sweep over `fwd` (ops of b's function, in program order):
// turns the adjoints in `adj` (seeded by the caller, active values only)
// into adjoints of every active value; param ops add theirs to `paramAdj`.
void sweep(ir::GradBuilder& b, const std::vector<Op*>& fwd, const ValueSet& active, AdjointMap& adj,
           std::map<std::string, Value*>* paramAdj, bool remat) {
  for (auto it = fwd.rbegin(); it != fwd.rend(); ++it) {
    Op* op = *it;
    std::vector<Value*> resultAdj;
    bool any = false;
    for (Value* r : op->results) {
      auto a = adj.find(r);
      resultAdj.push_back(a == adj.end() ? nullptr : a->second);
      any |= resultAdj.back() != nullptr;
    }
    if (!any) continue;
    b.setLoc(op->loc);
    if (op->kind == OpKind::Param) {
      GSL_ASSERT(paramAdj, "autodiff: a param op inside a loop body");
      accumulate(b, (*paramAdj)[op->attrs.getString("name")], resultAdj[0]);
      continue;
    }
    std::vector<bool> wanted;
    for (Value* v : op->operands) wanted.push_back(active.count(v) > 0);
    std::vector<Value*> og(op->operands.size(), nullptr);
    if (op->kind == OpKind::Loop) {
      loopVjp(b, *op, resultAdj, wanted, og, remat);
    } else {
      b.setWanted(wanted);
      b.setFloatDType(resultAdj[0] ? resultAdj[0]->type.dtype : DType::F32);  // bf16 regions: bf16 scalars
      op->info().grad(b, *op, resultAdj[0], og);
      b.setFloatDType(DType::F32);
      b.setWanted({});
    }
    GSL_ASSERT(og.size() == op->operands.size(),
               std::string("gradient rule of ") + op->info().mnemonic + " returned the wrong number of adjoints");
    for (size_t i = 0; i < og.size(); ++i) {
      if (!og[i] || !wanted[i]) continue;
      Value* v = op->operands[i];
      GSL_ASSERT(og[i]->type == v->type, std::string("gradient rule of ") + op->info().mnemonic +
                                             " gave operand " + std::to_string(i) + " an adjoint of type " +
                                             og[i]->type.str() + ", expected " + v->type.str());
      accumulate(b, adj[v], og[i]);
    }
  }
}

TensorType stackedType(const TensorType& t, int64_t trip) {
  TensorType s = t;
  s.shape.insert(s.shape.begin(), trip);
  return s;
}

// True when the body reads its argument `v` only as dynamic_index(v, i),
// i the iteration index, and v has one row per iteration: then row i of
// v's gradient comes from iteration i alone (see docs/loops.md).
bool readPerIteration(const ir::Function& body, const Value* v, int64_t trip) {
  if (v->type.rank() == 0 || v->type.shape[0] != trip) return false;
  if (std::find(body.results.begin(), body.results.end(), v) != body.results.end()) return false;
  for (const auto& op : body.ops)
    for (size_t k = 0; k < op->operands.size(); ++k)
      if (op->operands[k] == v &&
          !(op->kind == OpKind::DynamicIndex && k == 0 && op->operands[1] == body.args[0]))
        return false;
  return true;
}

// Step 4b of loopVjp: `recomputed` are the clones in g's function (the
// backward body) of `body`'s ops, in order. Every contraction clone whose
// result a live op of the backward body reads is replaced: its forward
// value is appended to `residuals`, the backward body gets an argument
// (the T stacked values) and, right after the clone, a dynamic_index of it
// at iteration `i`, which every reader then reads instead. The dead
// recomputation is then removed.
// A nested loop is saved the same way, all its results its backward loop
// reads (its own saved values included): the forward body's loop is
// replaced by the clone's twin, which outputs them too. So a loop inside a
// loop (a pipeline's stages) runs forward once, not again in the backward
// body (and again inside its own backward body).
void saveContractions(ir::GradBuilder& g, ir::Function& body, const std::vector<Op*>& recomputed, Value* i,
                      int64_t T, std::vector<Value*>& residuals) {
  ir::Function& bb = g.function();
  // Live values of the backward body (what its results need).
  auto live = [&] {
    ValueSet l(bb.results.begin(), bb.results.end());
    for (size_t n = bb.ops.size(); n-- > 0;) {
      bool used = false;
      for (const Value* r : bb.ops[n]->results) used |= l.count(r) > 0;
      if (used)
        for (const Value* v : bb.ops[n]->operands) l.insert(v);
    }
    return l;
  };
  const ValueSet needed = live();
  const size_t before = bb.ops.size();
  std::vector<const Op*> replaced;  // the clones replaced, in order; their dynamic_index ops follow `before`
  std::vector<size_t> reads;        // how many dynamic_index ops each has
  std::unordered_map<const Value*, Value*> replace;
  std::vector<std::unique_ptr<Op>> first;  // reads of saved values that go before every op
  for (size_t n = 0; n < recomputed.size(); ++n) {
    Op* c = recomputed[n];
    if (c->kind == OpKind::Loop) {
      bool any = false;
      for (const Value* r : c->results) any |= needed.count(r) > 0;
      if (!any) continue;
      // The forward body's loop becomes the clone's twin (with the results
      // the clone's backward loop reads); its readers read the twin.
      Op* twin = body.appendClone(*c, body.ops[n]->operands);
      std::unique_ptr<Op> old = std::move(body.ops[n]);
      body.ops[n] = std::move(body.ops.back());
      body.ops.pop_back();
      auto redirect = [&](Value*& v) {
        for (size_t r = 0; r < old->results.size(); ++r)
          if (v == old->results[r]) v = twin->results[r];
      };
      for (auto& op : body.ops)
        for (Value*& v : op->operands) redirect(v);
      for (Value*& v : body.results) redirect(v);
      for (Value*& v : residuals) redirect(v);
      // A stage loop (passes/Pipelining) also saves the rows it starts
      // from: recomputing them would run the pipeline's shift (a
      // collective_permute once partitioned) again in every backward
      // iteration. Their reads go first in the backward body.
      if (c->attrs.has("stage_mesh"))
        for (size_t k = 0; k < c->operands.size(); ++k) {
          Value* v = c->operands[k];
          if (!ir::isFloat(v->type.dtype) || !v->def || v->def->kind == OpKind::Constant || replace.count(v))
            continue;
          residuals.push_back(twin->operands[k]);
          replace[v] = g.op(OpKind::DynamicIndex, {bb.addArg(stackedType(v->type, T)), i});
          first.push_back(std::move(bb.ops.back()));
          bb.ops.pop_back();
        }
      size_t count = 0;
      for (size_t r = 0; r < c->results.size(); ++r) {
        if (!needed.count(c->results[r])) continue;
        residuals.push_back(twin->results[r]);
        replace[c->results[r]] = g.op(OpKind::DynamicIndex, {bb.addArg(stackedType(c->results[r]->type, T)), i});
        ++count;
      }
      replaced.push_back(c);
      reads.push_back(count);
      continue;
    }
    if (c->info().cls != ir::OpClass::Contraction || !needed.count(c->result)) continue;
    residuals.push_back(body.ops[n]->result);
    replace[c->result] = g.op(OpKind::DynamicIndex, {bb.addArg(stackedType(c->result->type, T)), i});
    replaced.push_back(c);
    reads.push_back(1);
  }
  if (replaced.empty()) return;
  // Each dynamic_index (appended last, in the clones' order) goes right
  // after its clone; readers read it.
  std::vector<std::unique_ptr<Op>> ops = std::move(bb.ops);
  bb.ops = std::move(first);
  size_t next = 0, read = before;
  for (size_t n = 0; n < before; ++n) {
    const bool isReplaced = next < replaced.size() && ops[n].get() == replaced[next];
    bb.ops.push_back(std::move(ops[n]));
    if (isReplaced)
      for (size_t k = 0; k < reads[next]; ++k) bb.ops.push_back(std::move(ops[read++]));
    next += isReplaced;
  }
  for (auto& op : bb.ops)
    for (Value*& v : op->operands)
      if (auto it = replace.find(v); it != replace.end()) v = it->second;
  for (Value*& r : bb.results)
    if (auto it = replace.find(r); it != replace.end()) r = it->second;
  // The recomputation no longer needed (the replaced clones, and what only
  // they read) goes.
  const ValueSet now = live();
  std::erase_if(bb.ops, [&](const std::unique_ptr<Op>& op) {
    for (const Value* r : op->results)
      if (now.count(r)) return false;
    return true;
  });
}

// Which carried values of a loop (body `body`, `nc` carried) may have a
// nonzero adjoint in some iteration: those whose final value has one
// (resultAdj), and, back through the iterations, every carried value the
// body's result for such a value, or an output with an adjoint (`gys`),
// depends on. The others (a carried sum the loss never reads: a layer
// loop's telemetry, returned beside the loss) have a zero adjoint all the
// way: the backward loop neither carries it nor sweeps the ops that only
// it would differentiate.
std::vector<bool> carriedAdjoints(const ir::Function& body, size_t nc, const std::vector<Value*>& resultAdj,
                                  const std::vector<size_t>& gys) {
  // deps[r]: the carried arguments body result r depends on.
  std::unordered_map<const Value*, std::vector<bool>> from;  // value -> the carried args it depends on
  for (size_t j = 0; j < nc; ++j) {
    std::vector<bool> d(nc, false);
    d[j] = true;
    from[body.args[1 + j]] = d;
  }
  for (const auto& op : body.ops) {
    std::vector<bool> d(nc, false);
    bool any = false;
    for (const Value* v : op->operands)
      if (auto it = from.find(v); it != from.end())
        for (size_t j = 0; j < nc; ++j)
          if (it->second[j]) d[j] = any = true;
    if (any)
      for (const Value* r : op->results) from[r] = d;
  }
  auto depsOf = [&](const Value* r) {
    auto it = from.find(r);
    return it == from.end() ? std::vector<bool>(nc, false) : it->second;
  };
  std::vector<bool> need(nc, false);
  for (size_t j = 0; j < nc; ++j) need[j] = resultAdj[j] != nullptr;
  for (size_t m : gys) {
    const std::vector<bool> d = depsOf(body.results[nc + m]);
    for (size_t j = 0; j < nc; ++j) need[j] = need[j] || d[j];
  }
  for (bool grew = true; grew;) {
    grew = false;
    for (size_t r = 0; r < nc; ++r) {
      if (!need[r]) continue;
      const std::vector<bool> d = depsOf(body.results[r]);
      for (size_t j = 0; j < nc; ++j)
        if (d[j] && !need[j]) need[j] = grew = true;
    }
  }
  return need;
}

// The VJP of a loop: given the adjoints of its results (nullptr: none),
// sets og[k] to the adjoint of operand k where wanted[k].
//
// The forward loop is extended to also output its carried inputs of every
// iteration, stacked (saved[j][i] = carried value j entering iteration i),
// and the results of its contractions (unless `remat`). The backward loop
// runs the other way; iteration i reads the saved carry and contractions,
// recomputes the rest of the body from them (rematerialisation; all of it
// with `remat`) and applies the body's VJP: carried adjoints flow to
// iteration i-1, gradients of invariants are summed into carried
// accumulators, or, for an invariant read only as dynamic_index(v, i),
// emitted as row i of a stacked output.
void loopVjp(ir::GradBuilder& b, Op& loop, const std::vector<Value*>& resultAdj,
             const std::vector<bool>& wanted, std::vector<Value*>& og, bool remat) {
  ir::Function& f = b.function();
  const ir::LoopInfo L(loop);
  ir::Function& body = *loop.body;
  const size_t nc = L.carried, ni = L.invariants, no = L.outputs;
  const int64_t T = L.trip;
  auto isF32 = [](const Value* v) { return ir::isFloat(v->type.dtype); };  // f32 or bf16

  // 1. The forward loop saves the carried values entering each iteration.
  std::vector<Value*> saved;
  for (size_t j = 0; j < nc; ++j) {
    body.results.push_back(body.args[1 + j]);
    saved.push_back(f.addResult(&loop, stackedType(loop.operands[j]->type, T)));
  }

  // 2. What the backward loop carries and reads.
  std::vector<size_t> gys;  // outputs with an adjoint
  for (size_t m = 0; m < no; ++m)
    if (resultAdj[nc + m]) gys.push_back(m);
  std::vector<size_t> dc;  // f32 carried values whose adjoint may be nonzero: their adjoints are carried
  const std::vector<bool> need = carriedAdjoints(body, nc, resultAdj, gys);
  for (size_t j = 0; j < nc; ++j)
    if (isF32(loop.operands[j]) && need[j]) dc.push_back(j);
  std::vector<size_t> dense, perIter;  // wanted f32 invariants, by how their gradient is formed
  for (size_t k = 0; k < ni; ++k) {
    if (!wanted[nc + k] || !isF32(loop.operands[nc + k])) continue;
    (readPerIteration(body, body.args[1 + nc + k], T) ? perIter : dense).push_back(k);
  }

  std::vector<Value*> operands;
  for (size_t j : dc) operands.push_back(resultAdj[j] ? resultAdj[j] : b.zerosLike(loop.results[j]));
  for (size_t k : dense) operands.push_back(b.zerosLike(loop.operands[nc + k]));
  const size_t nbc = operands.size();
  for (Value* s : saved) operands.push_back(s);
  for (size_t m : gys) operands.push_back(resultAdj[nc + m]);
  for (size_t k = 0; k < ni; ++k) operands.push_back(loop.operands[nc + k]);

  // 3. The backward body: (i, carried adjoints.., accumulators.., saved..,
  //    output adjoints.., invariants..).
  auto bb = std::make_unique<ir::Function>();
  bb->name = body.name;
  Value* i = bb->addArg(TensorType{DType::I32, {}});
  std::vector<Value*> gcArg, accArg, savedArg, gyArg, invArg;
  for (size_t j : dc) gcArg.push_back(bb->addArg(loop.operands[j]->type));
  for (size_t k : dense) accArg.push_back(bb->addArg(loop.operands[nc + k]->type));
  for (Value* s : saved) savedArg.push_back(bb->addArg(s->type));
  for (size_t m : gys) gyArg.push_back(bb->addArg(resultAdj[nc + m]->type));
  for (size_t k = 0; k < ni; ++k) invArg.push_back(bb->addArg(loop.operands[nc + k]->type));

  ir::GradBuilder g(*bb);
  g.setLoc(loop.loc);
  std::unordered_map<const Value*, Value*> map;  // forward body value -> its recomputation
  map[body.args[0]] = i;
  std::vector<Value*> carry;
  for (size_t j = 0; j < nc; ++j) {
    carry.push_back(g.op(OpKind::DynamicIndex, {savedArg[j], i}));
    map[body.args[1 + j]] = carry.back();
  }
  for (size_t k = 0; k < ni; ++k) map[body.args[1 + nc + k]] = invArg[k];
  std::vector<Op*> recomputed;
  std::map<size_t, std::vector<Value*>> rows;  // per-iteration invariant k -> its dynamic_index results
  for (const auto& op : body.ops) {
    std::vector<Value*> in;
    for (Value* v : op->operands) in.push_back(map.at(v));
    Op* c = bb->appendClone(*op, in);
    recomputed.push_back(c);
    for (size_t r = 0; r < op->results.size(); ++r) map[op->results[r]] = c->results[r];
    if (op->kind == OpKind::DynamicIndex)
      for (size_t k : perIter)
        if (op->operands[0] == body.args[1 + nc + k]) rows[k].push_back(c->result);
  }

  // 4. The body's VJP on the recomputation.
  ValueSet active;
  for (size_t j : dc) active.insert(carry[j]);
  for (size_t k : dense) active.insert(invArg[k]);
  for (auto& [k, vs] : rows)
    for (Value* v : vs) active.insert(v);
  propagateActive(recomputed, active, {});
  AdjointMap adj;
  for (size_t a = 0; a < dc.size(); ++a) {
    Value* y = map.at(body.results[dc[a]]);
    if (active.count(y)) accumulate(g, adj[y], gcArg[a]);
  }
  for (size_t a = 0; a < gys.size(); ++a) {
    Value* y = map.at(body.results[nc + gys[a]]);
    if (active.count(y)) accumulate(g, adj[y], g.op(OpKind::DynamicIndex, {gyArg[a], i}));
  }
  sweep(g, recomputed, active, adj, nullptr, remat);
  g.setLoc(loop.loc);
  auto adjointOr0 = [&](const Value* v, const Value* like) {
    auto it = adj.find(v);
    return it != adj.end() ? it->second : g.zerosLike(like);
  };
  for (size_t j : dc) bb->results.push_back(adjointOr0(carry[j], carry[j]));
  for (size_t a = 0; a < dense.size(); ++a) {
    auto it = adj.find(invArg[dense[a]]);
    bb->results.push_back(it != adj.end() ? g.add(accArg[a], it->second) : accArg[a]);
  }
  for (size_t k : perIter) {
    Value* row = nullptr;
    for (Value* v : rows[k])
      if (auto it = adj.find(v); it != adj.end()) accumulate(g, row, it->second);
    if (!row) {
      TensorType t = loop.operands[nc + k]->type;
      t.shape.erase(t.shape.begin());
      row = g.constant(0.0, t.dtype, t.shape);
    }
    bb->results.push_back(row);
  }

  // 4b. Saved contractions (JAX's checkpoint_dots policy): the result of
  //     every matmul or einsum of the body that the backward body still
  //     needs is an extra per-iteration output of the forward loop, and
  //     the backward body reads its row instead of recomputing it; only the
  //     cheap ops between them (elementwise, reductions, softmax) are
  //     recomputed. With --remat (Module::remat) all of the body is
  //     recomputed.
  std::vector<Value*> residuals;  // forward body values, saved stacked
  if (!remat) saveContractions(g, body, recomputed, i, T, residuals);
  for (Value* r : residuals) {
    body.results.push_back(r);
    operands.push_back(f.addResult(&loop, stackedType(r->type, T)));
  }

  // 5. The backward loop, and the operands' adjoints from its results.
  ir::AttrMap at;
  at.set("trip", T);
  at.set("carried", (int64_t)nbc);
  if (!L.reverse) at.set("reverse", true);
  // A loop over pipeline stages (passes/Pipelining): its backward loop runs
  // over the same stages. A pipeline's time loop: its backward loop is the
  // backward pipeline, of the same microbatches and rounds (for the tools:
  // the REPL's :cost and :spmd find both by these attributes).
  for (const char* k :
       {"stage_mesh", "stage_axes", "pipeline_mesh", "pipeline_axes", "pipeline_microbatches", "pipeline_rounds"})
    if (loop.attrs.has(k)) at.set(k, *loop.attrs.get(k));
  std::vector<TensorType> in, types;
  for (Value* v : operands) in.push_back(v->type);
  std::string e = ir::inferLoopTypes(in, at, *bb, types);
  GSL_ASSERT(e.empty(), "autodiff built an ill-typed backward loop: " + e);
  Op* back = f.appendMulti(OpKind::Loop, operands, std::move(at), types, std::move(bb), loop.loc);
  for (size_t a = 0; a < dc.size(); ++a)
    if (wanted[dc[a]]) og[dc[a]] = back->results[a];
  for (size_t a = 0; a < dense.size(); ++a) og[nc + dense[a]] = back->results[dc.size() + a];
  for (size_t a = 0; a < perIter.size(); ++a) og[nc + perIter[a]] = back->results[nbc + a];
}

}  // namespace

Gradients appendGradient(const ir::Module& m, ir::Function& f, Value* loss,
                         const std::vector<std::string>& params, bool wrtArgs) {
  GSL_ASSERT(loss, "appendGradient: no loss");
  GSL_ASSERT(loss->type == (ir::TensorType{DType::F32, {}}),
             "appendGradient: the loss must be an f32 scalar, got " + loss->type.str());
  // The forward ops, fixed before anything is appended.
  std::vector<Op*> fwd;
  for (auto& op : f.ops) fwd.push_back(op.get());
  bool inF = loss->def ? std::find(fwd.begin(), fwd.end(), loss->def) != fwd.end()
                       : std::find(f.args.begin(), f.args.end(), loss) != f.args.end();
  GSL_ASSERT(inF, "appendGradient: the loss is not a value of function '" + f.name + "'");
  std::set<std::string> wrt(params.begin(), params.end());
  for (const auto& n : params)
    GSL_ASSERT(m.findParam(n), "appendGradient: no param named '" + n + "'");

  // Active values: those that depend on a differentiated input.
  ValueSet active;
  if (wrtArgs)
    for (Value* a : f.args)
      if (ir::isFloat(a->type.dtype)) active.insert(a);
  propagateActive(fwd, active, wrt);

  // The reverse sweep. Only active values receive adjoints, so only ops on
  // a path from a differentiated input to the loss are visited.
  ir::GradBuilder b(f);
  AdjointMap adj;
  std::map<std::string, Value*> paramAdj;
  if (active.count(loss)) {
    b.setLoc(loss->def ? loss->def->loc : f.loc);
    adj[loss] = b.scalar(1.0);
  }
  sweep(b, fwd, active, adj, &paramAdj, m.remat);
  b.setLoc(f.loc);

  Gradients out;
  for (const auto& n : params) {
    auto p = paramAdj.find(n);
    const ir::TensorType& t = m.findParam(n)->type;
    out.params.push_back(p != paramAdj.end() ? p->second : b.constant(0.0, t.dtype, t.shape));
  }
  if (wrtArgs)
    for (Value* a : f.args) {
      if (!ir::isFloat(a->type.dtype)) {
        out.args.push_back(nullptr);
        continue;
      }
      auto g = adj.find(a);
      out.args.push_back(g != adj.end() ? g->second : b.zerosLike(a));
    }
  return out;
}

}  // namespace gsl::passes
