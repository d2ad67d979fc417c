#include "passes/ShardingPropagation.h"

#include <algorithm>
#include <map>
#include <set>

#include "ir/Loop.h"
#include "ir/ShardRules.h"
#include "passes/ReshapeLayout.h"

namespace gsl::passes {

using namespace ir;

namespace {

int splitDims(const Sharding& s) {
  int n = 0;
  for (const auto& d : s.dims) n += !d.empty();
  return n;
}

struct Propagator {
  const Module& mod;
  Function& f;
  // What gave each value its sharding: this run's steps, and any a pass
  // before it recorded (weight-update sharding's gradients).
  ShardingProvenance& provenance;

  int64_t axesProduct(const Mesh& m, const Axes& axes) {
    int64_t p = 1;
    for (const auto& a : axes) p *= m.axisSize(a);
    return p;
  }

  // Builds a sharding for value `v` whose dims carry `labels`, from a
  // label -> axes map, applying rules 4 and 5.
  // Padding (docs/sharding.md, "Uneven dims"): dim `size` of a label may
  // take axes that do not divide it when every dim of `op` carrying the
  // label has that size and one of them already lies padded (split over
  // axes that do not divide it). Values split evenly never start padding.
  bool padsAlong(const Op& op, const DimLabels& L, int label, int64_t size) {
    bool padded = false;
    auto scan = [&](const Value* v, const std::vector<int>& labels) {
      for (size_t d = 0; d < labels.size() && d < v->type.shape.size(); ++d) {
        if (labels[d] != label) continue;
        if (v->type.shape[d] != size) return false;
        const auto& s = v->sharding;
        if (!s || s->dims.size() <= d || s->dims[d].empty()) continue;
        const Mesh* m = mod.findMesh(s->mesh);
        if (m && size % axesProduct(*m, s->dims[d]) != 0) padded = true;
      }
      return true;
    };
    for (size_t i = 0; i < op.operands.size() && i < L.operands.size(); ++i)
      if (!scan(op.operands[i], L.operands[i])) return false;
    if (!scan(op.result, L.result)) return false;
    return padded;
  }

  Sharding build(const std::string& mesh, const Value* v, const std::vector<int>& labels,
                 const std::map<int, Axes>& axes, const DimLabels& L, const Op& op) {
    const Mesh* m = mod.findMesh(mesh);
    Sharding s = Sharding::replicated(mesh, v->type.rank());
    std::set<std::string> used;
    for (int d = 0; d < v->type.rank(); ++d) {
      auto it = axes.find(labels[d]);
      if (it == axes.end() || L.unsplittable.count(labels[d]) || !m) continue;
      // Keep the longest prefix of the axes that fits (rule 5): no axis
      // used by an earlier dim, the dim divisible by the axes' product.
      Axes keep;
      int64_t n = 1;
      const bool pads = padsAlong(op, L, labels[d], v->type.shape[d]);
      for (const auto& a : it->second) {
        if (used.count(a) || (v->type.shape[d] % (n * m->axisSize(a)) != 0 && !pads)) break;
        keep.push_back(a);
        n *= m->axisSize(a);
      }
      for (const auto& a : keep) used.insert(a);
      s.dims[d] = keep;
    }
    return s;
  }

  // Collects label -> axes proposals from the given (value, labels) pairs
  // that have a sharding on `mesh`, most-split first (rule 2); a later
  // proposal that extends the kept one (same axes first, more after)
  // replaces it (rule 2b).
  void collect(std::vector<std::pair<const Sharding*, const std::vector<int>*>> srcs, const DimLabels& L,
               std::map<int, Axes>& out) {
    std::stable_sort(srcs.begin(), srcs.end(),
                     [](auto& a, auto& b) { return splitDims(*a.first) > splitDims(*b.first); });
    for (auto& [s, labels] : srcs)
      for (size_t d = 0; d < s->dims.size() && d < labels->size(); ++d) {
        if (s->dims[d].empty() || L.unsplittable.count((*labels)[d])) continue;
        auto it = out.find((*labels)[d]);
        if (it == out.end()) out[(*labels)[d]] = s->dims[d];
        else if (it->second.size() < s->dims[d].size() &&
                 std::equal(it->second.begin(), it->second.end(), s->dims[d].begin()))
          it->second = s->dims[d];  // rule 2b: `b` meeting `(b, c)` refines to `(b, c)`
      }
  }

  // Whether the proposal for `v` (a tensor with dim labels `labels`) from
  // `srcs` is vacuous: no source has a dim carrying one of v's labels, so
  // the sources say nothing about how v's dims lie (a scalar operand of
  // `g * coef`, the scalar result of `sum(g * g)`). Building from it would
  // decide v replicated for want of information. The fixed point takes
  // such proposals only once no informative one is left (takeVacuous), so
  // that a value also reached through its other operands or its users
  // takes their split: a gradient scaled by the clip_norm coefficient
  // stays split as its optimizer update wants it, instead of replicated by
  // the coefficient and all_gathered.
  static bool vacuous(const std::vector<std::pair<const Sharding*, const std::vector<int>*>>& srcs, const Value* v,
                      const std::vector<int>& labels) {
    if (v->type.rank() == 0) return false;
    for (auto& [s, ls] : srcs)
      for (size_t d = 0; d < s->dims.size() && d < ls->size(); ++d)
        if (std::find(labels.begin(), labels.end(), (*ls)[d]) != labels.end()) return false;
    return true;
  }
  bool takeVacuous = false;

  // ---- loops (docs/loops.md, "Sharding propagation")
  // Outside its body a loop relates only carried operand j and carried
  // result j (they have one sharding); its body is propagated once, by
  // propagateBody, after the enclosing function's own fixed point.
  std::set<const Op*> bodiesDone;

  bool forwardLoop(Op& op) {
    const LoopInfo info(op);
    bool changed = false;
    for (size_t j = 0; j < info.carried; ++j) {
      Value *in = op.operands[j], *out = op.results[j];
      if (out->sharding || !in->sharding) continue;
      out->sharding = in->sharding;
      provenance.record(out, &op, in);
      changed = true;
    }
    return changed;
  }

  bool backwardLoop(Op& op) {
    const LoopInfo info(op);
    bool changed = false;
    for (size_t j = 0; j < info.carried; ++j) {
      Value *in = op.operands[j], *out = op.results[j];
      if (in->sharding || !out->sharding) continue;
      in->sharding = out->sharding;
      provenance.record(in, &op, out);
      changed = true;
    }
    return changed;
  }

  // A fresh copy of `pristine` (the body before propagation) with its
  // arguments and results constrained, propagated (its steps recorded in
  // `steps`).
  std::unique_ptr<Function> trialBody(const Function& pristine, const Op& op, const LoopInfo& info,
                                      const std::vector<std::optional<Sharding>>& carried,
                                      ShardingProvenance& steps) {
    auto b = pristine.clone();
    b->resultShardings.assign(b->results.size(), std::nullopt);
    for (size_t k = 0; k < op.operands.size(); ++k) {
      Value* a = b->args[k + 1];
      if (a->sharding) continue;  // annotated in the body
      a->sharding = k < info.carried ? carried[k] : op.operands[k]->sharding;
      // A stacked weight split along its stacked dim (annotated so) enters
      // the body with that dim whole: gathered once before the loop, not in
      // every iteration (dynamic_index never reads a split dim 0).
      if (k >= info.carried && a->sharding && a->type.rank() > 0 && !a->sharding->dims[0].empty() &&
          readByIteration(pristine, pristine.args[k + 1])) {
        Sharding t = *a->sharding;
        t.dims[0].clear();
        a->sharding = t;
      }
    }
    for (size_t j = 0; j < info.carried; ++j) b->resultShardings[j] = carried[j];
    // A stacked output's users propose the row's sharding (dim 0 dropped).
    for (size_t m = 0; m < info.outputs; ++m) {
      const auto& s = op.results[info.carried + m]->sharding;
      if (!s) continue;
      Sharding row = *s;
      if (!row.dims.empty()) row.dims.erase(row.dims.begin());
      b->resultShardings[info.carried + m] = row;
    }
    propagateShardings(mod, *b, &steps);
    return b;
  }

  // The body's shardings are the same in every iteration: carried value j
  // enters and leaves the body with one sharding S_j (the operand's, else
  // the result's users', else what the body gives it from an unconstrained
  // entry: a fixed point over the carried values); invariants enter as
  // their operands lie. Stacked outputs are their rows' shardings with the
  // stacked dim 0 unsplit (it is never split unless annotated).
  // A carried value that starts as a constant (zeros broadcast to its
  // shape: a pipeline's state, a running sum) and that nothing before the
  // loop gave more than the vacuous "replicated" takes the body's sharding
  // instead: its first value has no layout of its own.
  static bool vacuousStart(const Value* v) {
    if (!v->sharding || !v->sharding->isReplicated() || !v->def || !ir::isFloat(v->type.dtype)) return false;
    const Op* d = v->def;
    if (d->kind == OpKind::Broadcast) d = d->operands[0]->def;
    return d && d->kind == OpKind::Constant;
  }

  void propagateBody(Op& op) {
    const LoopInfo info(op);
    std::vector<std::optional<Sharding>> carried(info.carried);
    std::vector<bool> restart(info.carried, false);
    for (size_t j = 0; j < info.carried; ++j) {
      if (vacuousStart(op.operands[j]) && (!op.results[j]->sharding || op.results[j]->sharding->isReplicated()))
        restart[j] = true;
      else if (op.operands[j]->sharding) carried[j] = op.operands[j]->sharding;
      else if (op.results[j]->sharding) carried[j] = op.results[j]->sharding;
      else if (op.body->args[j + 1]->sharding) carried[j] = op.body->args[j + 1]->sharding;
    }
    std::unique_ptr<Function> pristine = op.body->clone();
    std::unique_ptr<Function> b;
    ShardingProvenance bodySteps;  // of the last trial, the body kept
    for (size_t round = 0; round <= info.carried; ++round) {
      bodySteps = ShardingProvenance();
      b = trialBody(*pristine, op, info, carried, bodySteps);
      bool changed = false;
      for (size_t j = 0; j < info.carried; ++j)
        if (!carried[j] && b->results[j]->sharding) {
          carried[j] = b->results[j]->sharding;
          changed = true;
        }
      if (!changed) break;
    }
    // Carried values nothing reached stay replicated, as a fixed point.
    for (size_t j = 0; j < info.carried; ++j) {
      if (!carried[j]) continue;
      b->args[j + 1]->sharding = carried[j];
      b->resultShardings[j] = carried[j];
    }
    op.body = std::move(b);
    provenance.merge(bodySteps);
    for (size_t j = 0; j < info.carried; ++j)
      for (Value* v : {op.operands[j], op.results[j]})
        if ((!v->sharding || restart[j]) && carried[j]) {
          v->sharding = carried[j];
          provenance.record(v, &op, nullptr);
        }
    for (size_t m = 0; m < info.outputs; ++m) {
      Value* out = op.results[info.carried + m];
      const auto& row = op.body->results[info.carried + m]->sharding;
      if (out->sharding || !row || row->mesh.empty()) continue;
      Sharding s = *row;
      s.partial.clear();
      s.dims.insert(s.dims.begin(), Axes{});
      out->sharding = s;
      provenance.record(out, &op, op.body->results[info.carried + m]);
    }
  }

  // Rule 6: a reshape's `to` takes the sharding that keeps `from`'s blocks
  // where they are (passes/ReshapeLayout) when it splits over more axes
  // than the one the dimension labels gave.
  void keepLayout(const Value* from, Value* to) {
    if (!from->sharding || from->sharding->mesh.empty() || !to->sharding) return;
    auto alt = sameLayoutSharding(mod, from->type.shape, *from->sharding, to->type.shape);
    auto count = [](const Sharding& x) {
      size_t n = 0;
      for (const auto& d : x.dims) n += d.size();
      return n;
    };
    if (alt && count(*alt) > count(*to->sharding)) to->sharding = *alt;
  }

  bool forward(Op& op) {
    if (op.kind == OpKind::Loop) return forwardLoop(op);
    if (op.result->sharding) return false;
    DimLabels L = dimLabels(op);
    std::string mesh;
    std::vector<std::pair<const Sharding*, const std::vector<int>*>> srcs;
    for (size_t i = 0; i < op.operands.size(); ++i) {
      const auto& s = op.operands[i]->sharding;
      if (!s || s->mesh.empty()) continue;  // mesh "": fixed as replicated
      if (mesh.empty()) mesh = s->mesh;
      if (s->mesh == mesh) srcs.push_back({&*s, &L.operands[i]});
    }
    if (mesh.empty() || (!takeVacuous && vacuous(srcs, op.result, L.result))) return false;
    std::map<int, Axes> axes;
    collect(srcs, L, axes);
    op.result->sharding = build(mesh, op.result, L.result, axes, L, op);
    if (op.kind == OpKind::Reshape) keepLayout(op.operands[0], op.result);
    // The source: the operand with the most split dims (rule 2); among
    // those, the one whose splits the result took most often (after a
    // refinement, rule 2b, the refined operand).
    const Sharding& rs = *op.result->sharding;
    auto taken = [&](const Value* v) {
      int n = 0;
      for (size_t d = 0; d < v->sharding->dims.size(); ++d)
        for (size_t e = 0; e < rs.dims.size(); ++e)
          n += !v->sharding->dims[d].empty() && v->sharding->dims[d] == rs.dims[e];
      return n;
    };
    const Value* best = nullptr;
    for (Value* v : op.operands)
      if (v->sharding && v->sharding->mesh == mesh &&
          (!best || splitDims(*v->sharding) > splitDims(*best->sharding) ||
           (splitDims(*v->sharding) == splitDims(*best->sharding) && taken(v) > taken(best))))
        best = v;
    provenance.record(op.result, &op, best);
    return true;
  }

  // A training step's update views (passes/UpdateSharding.h) constrain
  // the update, not the forward pass: they propose nothing backward (the
  // param keeps the sharding its uses give it; the pass itself gives the
  // gradient's producer the update's split).
  static bool updateView(const Op& op) { return op.kind == OpKind::Copy && op.attrs.get("update"); }

  bool backward(Op& op) {
    if (op.kind == OpKind::Loop) return backwardLoop(op);
    if (!op.result->sharding || op.result->sharding->mesh.empty()) return false;
    if (updateView(op)) return false;
    bool changed = false;
    DimLabels L = dimLabels(op);
    const std::string& mesh = op.result->sharding->mesh;
    for (size_t i = 0; i < op.operands.size(); ++i) {
      Value* v = op.operands[i];
      if (v->sharding) continue;
      std::vector<std::pair<const Sharding*, const std::vector<int>*>> srcs{{&*op.result->sharding, &L.result}};
      for (size_t j = 0; j < op.operands.size(); ++j)
        if (j != i && op.operands[j]->sharding && op.operands[j]->sharding->mesh == mesh)
          srcs.push_back({&*op.operands[j]->sharding, &L.operands[j]});
      if (!takeVacuous && vacuous(srcs, v, L.operands[i])) continue;
      std::map<int, Axes> axes;
      collect(srcs, L, axes);
      v->sharding = build(mesh, v, L.operands[i], axes, L, op);
      if (op.kind == OpKind::Reshape) keepLayout(op.result, v);
      provenance.record(v, &op, op.result);
      changed = true;
    }
    return changed;
  }

  // Rule 7: sharded preferred over replicated. After the fixed point, an op
  // result whose sharding propagation gave it (not a user annotation, not
  // returned by the function) and that leaves dim d unsplit takes the split
  // of d that every one of its uses asks for (each user's backward
  // proposal, rules 2-5), when the axes are free in the value and its
  // producer can compute the smaller block without moving data: every
  // operand dim carrying d's label is unsplit or split the same way, and no
  // operand uses the axes on another dim. The uses then read the value as
  // they want it (their reshard was a free local slice before) and the
  // producer does 1/n of the work, with no collective added. Refined values
  // cite their first user (backward) in the REPL's :sharding.
  bool refineReplicated() {
    std::map<const Value*, std::vector<Op*>> users;
    std::set<const Value*> returned(f.results.begin(), f.results.end());
    for (auto& op : f.ops)
      for (Value* v : op->operands) users[v].push_back(op.get());
    bool any = false;
    for (auto it = f.ops.rbegin(); it != f.ops.rend(); ++it) {
      Op& prod = **it;
      if (prod.kind == OpKind::Loop || !prod.result) continue;
      Value* v = prod.result;
      if (!v->sharding || v->sharding->mesh.empty() || !provenance.propagated(v) || returned.count(v)) continue;
      const std::string mesh = v->sharding->mesh;
      const auto& us = users[v];
      if (us.empty()) continue;
      // What each use asks of v (one proposal per operand slot).
      std::vector<Sharding> asks;
      bool ok = true;
      for (Op* u : us) {
        if (u->kind == OpKind::Loop || updateView(*u) || !u->result->sharding || u->result->sharding->mesh != mesh) {
          ok = false;
          break;
        }
        DimLabels L = dimLabels(*u);
        for (size_t k = 0; k < u->operands.size(); ++k) {
          if (u->operands[k] != v) continue;
          std::vector<std::pair<const Sharding*, const std::vector<int>*>> srcs{{&*u->result->sharding, &L.result}};
          for (size_t j = 0; j < u->operands.size(); ++j)
            if (u->operands[j] != v && u->operands[j]->sharding && u->operands[j]->sharding->mesh == mesh)
              srcs.push_back({&*u->operands[j]->sharding, &L.operands[j]});
          std::map<int, Axes> axes;
          collect(srcs, L, axes);
          asks.push_back(build(mesh, v, L.operands[k], axes, L, *u));
        }
      }
      if (!ok || asks.empty()) continue;
      Sharding s = *v->sharding;
      std::set<std::string> used;
      for (const auto& d : s.dims) used.insert(d.begin(), d.end());
      DimLabels P = dimLabels(prod);
      bool changed = false;
      for (int d = 0; d < v->type.rank(); ++d) {
        if (!s.dims[d].empty()) continue;
        const auto& want = asks[0].dims[d];
        if (want.empty()) continue;
        bool agree = true;
        for (const auto& a : asks) agree &= a.dims[d] == want;
        for (const auto& a : want) agree &= !used.count(a);
        if (!agree) continue;
        // The producer computes the block without moving data.
        const int label = P.result[d];
        for (size_t i = 0; i < prod.operands.size() && agree; ++i) {
          const auto& os = prod.operands[i]->sharding;
          if (!os || os->mesh.empty()) continue;
          if (os->mesh != mesh) {
            agree = false;
            break;
          }
          for (size_t e = 0; e < os->dims.size() && agree; ++e) {
            if (P.operands[i][e] == label) agree &= os->dims[e].empty() || os->dims[e] == want;
            else
              for (const auto& a : want) agree &= std::find(os->dims[e].begin(), os->dims[e].end(), a) == os->dims[e].end();
          }
        }
        if (!agree) continue;
        s.dims[d] = want;
        used.insert(want.begin(), want.end());
        changed = true;
      }
      if (!changed) continue;
      v->sharding = s;
      provenance.record(v, us[0], us[0]->result);
      any = true;
    }
    return any;
  }

  void run() {
    // Function results annotated by the user constrain the returned values.
    for (size_t i = 0; i < f.results.size(); ++i)
      if (i < f.resultShardings.size() && f.resultShardings[i] && !f.results[i]->sharding &&
          f.results[i]->def)
        f.results[i]->sharding = f.resultShardings[i];
    fixedPoint();
    // Loop bodies, one at a time in program order, each after the fixed
    // point has given its operands and users all it can; what a body gives
    // its loop's results flows on in the next fixed point.
    for (auto& op : f.ops)
      if (op->kind == OpKind::Loop && !bodiesDone.count(op.get())) {
        bodiesDone.insert(op.get());
        propagateBody(*op);
        fixedPoint();
      }
    for (size_t round = 0; round <= f.ops.size() && refineReplicated(); ++round) {
    }
  }

  // Sweeps forward and backward until nothing changes, first taking only
  // informative proposals; then one sweep that also takes the vacuous ones
  // (what nothing else reached is decided as before: replicated), and again.
  void fixedPoint() {
    auto sweep = [&] {
      bool changed = false;
      for (auto& op : f.ops) changed |= forward(*op);
      for (auto it = f.ops.rbegin(); it != f.ops.rend(); ++it) changed |= backward(**it);
      return changed;
    };
    for (size_t outer = 0; outer <= f.ops.size() + 1; ++outer) {
      for (size_t round = 0; round <= f.ops.size() + 1 && sweep(); ++round) {
      }
      takeVacuous = true;
      bool changed = sweep();
      takeVacuous = false;
      if (!changed) break;
    }
  }
};

}  // namespace

void propagateShardings(const Module& m, Function& f, ShardingProvenance* provenance) {
  ShardingProvenance own;  // the run's own, when the caller keeps none
  Propagator p{m, f, provenance ? *provenance : own};
  p.run();
}

void propagateShardings(Module& m) {
  for (auto& f : m.functions) propagateShardings(m, *f);
}

}  // namespace gsl::passes
