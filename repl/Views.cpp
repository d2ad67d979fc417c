// How the values of the session lie on the devices: :sharding (a value's
// sharding and the chain of reasons for it), :show (the picture of its
// blocks), :plans (the candidate plans of the op that makes it), for a
// param, a host variable, FN.VALUE or a call path.
#include "repl/Session.h"

#include <sstream>

#include "frontend/AST.h"
#include "passes/ShardingPropagation.h"
#include "repl/CallPaths.h"
#include "repl/Explain.h"
#include "repl/Lookup.h"

namespace gsl::repl {

using ir::Sharding;

namespace {

// The declaration of param `name`: a `param` decl, or for a param-group
// member GROUP.MEMBER, the member's decl in its group.
const ast::Decl* paramDecl(const Build& b, const std::string& name) {
  size_t dot = name.find('.');
  for (const auto& a : b.prog->asts)
    for (const auto& d : a->decls) {
      if (d->kind == ast::DeclKind::Param && d->name == name) return d.get();
      if (d->kind == ast::DeclKind::ParamGroup && dot != std::string::npos && d->name == name.substr(0, dot))
        for (const auto& m : d->members)
          if (m->name == name.substr(dot + 1)) return m.get();
    }
  return nullptr;
}

// What a param-group member is ("" for another param).
std::string groupMemberNote(const ir::Param& p) {
  if (p.init.stacked <= 0 || p.type.rank() < 1) return "";
  std::string group = p.name.substr(0, p.name.find('.'));
  ir::TensorType layer = p.type;
  layer.shape.erase(layer.shape.begin());
  return "  (a member of param group " + group + ": " + std::to_string(p.type.shape[0]) + " layers of " +
         layer.str() + " stacked as " + p.type.str() + "; dim 0, the layer, is never split: every device holds all " +
         std::to_string(p.type.shape[0]) + " layers of what it stores, and a loop reads layer l as " + p.name + "[l])\n";
}

// The note printed under a loop body's value.
std::string insideLoopNote(const Build& b, const ir::Op& loop) {
  return "  (inside " + loopText(b, loop) +
         ": one sharding for every iteration, as a loop body is partitioned once)\n";
}

}  // namespace

void Session::sharding(const std::string& name) {
  Build* b = currentFor(name);
  if (!b) return;
  const ir::Module& mod = *b->prog->module;
  // FN.VALUE, or a let / argument name of some function.
  // Values of f's loop bodies are found too, each with a note that says
  // which loop it is in.
  auto explainIn = [&](ir::Function& f, const std::string& v, const std::string& label) {
    passes::ShardingProvenance why;
    auto c = propagated(mod, f, &why);
    auto vals = valuesNamed(*c, v);
    auto inLoops = loopValuesNamed(*c, v);
    const size_t n = vals.size() + inLoops.size();
    size_t k = 0;
    auto tagged = [&]() { return label + (n > 1 ? "#" + std::to_string(k++) : ""); };
    const ir::ValueNames names = c->namesWithBodies();
    ValueContext ctx{*b, mod, why, names, f.name};
    for (auto* x : vals) out_ << explainSharding(ctx, *x, tagged());
    for (const auto& lv : inLoops) {
      if (lv.value == lv.loop->body->args[0]) {  // the loop index
        out_ << tagged() << ": replicated (the index of " << loopText(*b, *lv.loop)
             << ": an i32 scalar, the same on every device)\n";
        continue;
      }
      ValueContext lc = ctx;
      lc.loop = lv.loop;
      lc.enclosing = lv.enclosing;
      out_ << explainSharding(lc, *lv.value, tagged()) << insideLoopNote(*b, *lv.loop);
    }
    return n > 0;
  };
  size_t dot = name.find('.');
  if (dot != std::string::npos && !mod.findParam(name)) {
    // FN.VALUE of a function with IR of its own (not replaced by the
    // training step), else a call path.
    ir::Function* f = userFunction(*b, name.substr(0, dot), false);
    const Step* st = step(nullptr);
    if (f && !(st && st->loss == f->name) && explainIn(*f, name.substr(dot + 1), name)) return;
    if (byCallPath(*b, name, true)) return;
    if (f) error("fn " + f->name + " has no argument or let named '" + name.substr(dot + 1) + "'");
    else if (isFunctionDecl(*b, name.substr(0, dot)))
      error("no call of fn " + name.substr(0, dot) + " has an argument or let named '" + name.substr(dot + 1) + "'");
    else
      error("unknown name '" + name + "' (:sharding takes a param, a host variable, FN.VALUE or a call path as " +
            "loss.logits.h, grad(w), opt.m(w))");
    return;
  }
  if (const ir::Param* p = mod.findParam(name)) {
    std::string origin;
    if (const ast::Decl* d = paramDecl(*b, name); d && d->annot) origin = " annotated at " + b->where(d->annot->loc);
    out_ << name << ": " << shardingText(p->sharding) << origin << "\n";
    out_ << (p->sharding && !p->sharding->isReplicated()
                 ? "  (a param lies as declared: each device stores its block; :show " + name + " draws them)\n"
                 : "  (a param without @shard is stored whole on every device)\n");
    out_ << groupMemberNote(*p);
    // Where a function uses it otherwise, the partitioner reshards it there.
    for (const auto& fname : b->prog->userFunctions) {
      ir::Function* f = mod.findFunction(fname);
      if (!f) continue;
      passes::ShardingProvenance why;
      auto c = propagated(mod, *f, &why);
      for (auto& op : c->ops)
        if (op->kind == ir::OpKind::Param && op->attrs.getString("name") == name && why.propagated(op->result) &&
            !sameLayout(op->result->sharding, p->sharding)) {
          const ir::ValueNames names = c->namesWithBodies();
          ValueContext fc{*b, mod, why, names, fname};
          out_ << "  in fn " << fname << " it is used as:\n";
          std::istringstream lines(explainSharding(fc, *op->result, name));
          for (std::string l; std::getline(lines, l);) out_ << "    " << l << "\n";
        }
    }
    return;
  }
  auto vars = simulateHost(*b);
  if (auto it = vars.find(name); it != vars.end()) {
    const HostVar& v = it->second;
    if (!v.thunk) {
      out_ << name << ": replicated (a loop variable)\n";
      return;
    }
    auto f = v.thunk->fn->clone();
    copyNames(*v.thunk->fn, *f);
    for (size_t i = 0; i < v.inputs.size(); ++i)
      f->args[i]->sharding = v.inputs[i] ? v.inputs[i] : Sharding::replicated("", f->args[i]->type.rank());
    passes::ShardingProvenance why;
    passes::propagateShardings(mod, *f, &why);
    f->renumber();
    const ir::ValueNames names = f->namesWithBodies();
    ValueContext ctx{*b, mod, why, names, "", &v.thunk->leaves, name};
    out_ << explainSharding(ctx, *f->results[v.result], name);
    return;
  }
  bool any = false;
  for (const auto& fname : b->prog->userFunctions)
    if (ir::Function* f = mod.findFunction(fname)) any |= explainIn(*f, name, fname + "." + name);
  if (any) return;
  if (mod.findFunction(name)) {
    ir::Function* f = mod.findFunction(name);
    passes::ShardingProvenance why;
    auto c = propagated(mod, *f, &why);
    const ir::ValueNames names = c->namesWithBodies();
    ValueContext ctx{*b, mod, why, names, f->name};
    for (auto* a : c->args) out_ << explainSharding(ctx, *a, name + "." + valueName(ctx, *a));
    for (size_t i = 0; i < c->results.size(); ++i)
      out_ << explainSharding(ctx, *c->results[i], name + ".return" + (c->results.size() > 1 ? "#" + std::to_string(i) : ""));
    return;
  }
  if (byCallPath(*b, name, true)) return;
  error("unknown name '" + name + "' (:sharding takes a param, a host variable, or FN.VALUE: a let or argument of fn FN)");
}

bool Session::byCallPath(Build& b, const std::string& name, bool explain) {
  std::vector<PathRoot> rs = roots(b);
  Resolved r = resolvePath(rs, name);
  if (!r.candidates.empty()) {
    error(ambiguousMessage(name, r.candidates));
    return true;
  }
  size_t k = 0;
  const PathRoot* last = nullptr;
  for (const auto& [root, pv] : r.values) {
    const Build& rb = *root->build;
    const ir::Module& m = *rb.prog->module;
    std::string label = pv->name + (r.values.size() > 1 ? "#" + std::to_string(k++) : "");
    if (root != last && root->fn.empty())
      out_ << "(in the training step, opt.minimize at " << rb.where(step(nullptr)->thunk->loc) << ")\n";
    last = root;
    if (!explain) out_ << showBlocks(label, pv->value->type, pv->value->sharding, m, color_);
    else if (pv->loop && pv->value == pv->loop->body->args[0])
      out_ << label << ": replicated (the index of " << loopText(rb, *pv->loop)
           << ": an i32 scalar, the same on every device)\n";
    else {
      ValueContext ctx{rb, m, root->provenance, root->names, root->fn, root->leaves};
      ctx.loop = pv->loop;
      ctx.enclosing = pv->enclosing;
      out_ << explainSharding(ctx, *pv->value, label);
    }
    if (pv->loop) out_ << insideLoopNote(rb, *pv->loop);
  }
  return !r.values.empty();
}

void Session::show(const std::string& name) {
  Build* b = currentFor(name);
  if (!b) return;
  const ir::Module& mod = *b->prog->module;
  if (const ir::Param* p = mod.findParam(name)) {
    if (p->init.stacked > 0 && p->type.rank() >= 1) {  // a param-group member: one layer's picture
      ir::TensorType layer = p->type;
      layer.shape.erase(layer.shape.begin());
      std::optional<Sharding> ls = p->sharding;
      if (ls && (int)ls->dims.size() == p->type.rank()) ls->dims.erase(ls->dims.begin());
      out_ << name << ": " << p->type.str() << " " << shardingText(p->sharding) << " stacks " << p->type.shape[0]
           << (p->type.shape[0] == 1 ? " layer" : " layers") << " on dim 0, which is never split: every layer lies the same, as " << name << "[l]\n"
           << showBlocks(name + "[l]", layer, ls, mod, color_);
      return;
    }
    out_ << showBlocks(name, p->type, p->sharding, mod, color_);
    return;
  }
  auto vars = simulateHost(*b);
  if (auto it = vars.find(name); it != vars.end()) {
    out_ << showBlocks(name, it->second.type, it->second.sharding, mod, color_);
    return;
  }
  std::vector<std::pair<std::string, std::pair<ir::Function*, std::string>>> found;
  size_t dot = name.find('.');
  if (dot != std::string::npos) {
    // FN.VALUE of a function with IR of its own (not replaced by the
    // training step), else a call path.
    ir::Function* f = userFunction(*b, name.substr(0, dot), false);
    const Step* st = step(nullptr);
    if (f && !(st && st->loss == f->name) &&
        (!valuesNamed(*f, name.substr(dot + 1)).empty() || !loopValuesNamed(*f, name.substr(dot + 1)).empty()))
      found.push_back({name, {f, name.substr(dot + 1)}});
    else if (byCallPath(*b, name, false))
      return;
  } else {
    for (const auto& fname : b->prog->userFunctions)
      if (ir::Function* f = mod.findFunction(fname))
        if (!valuesNamed(*f, name).empty() || !loopValuesNamed(*f, name).empty())
          found.push_back({fname + "." + name, {f, name}});
  }
  bool any = false;
  for (auto& [label, fv] : found) {
    auto c = propagated(mod, *fv.first);
    for (auto* v : valuesNamed(*c, fv.second)) {
      out_ << showBlocks(label, v->type, v->sharding, mod, color_);
      any = true;
    }
    for (const auto& lv : loopValuesNamed(*c, fv.second)) {
      out_ << showBlocks(label, lv.value->type, lv.value->sharding, mod, color_) << insideLoopNote(*b, *lv.loop);
      any = true;
    }
  }
  if (!any && !byCallPath(*b, name, false))
    error("unknown name '" + name + "' (:show takes a param, a host variable, FN.VALUE or a call path)");
}

void Session::plans(const std::string& name) {
  size_t dot = name.find('.');
  if (dot == std::string::npos) {
    error("usage: :plans FN.VALUE  (VALUE: a let of tensor function FN)");
    return;
  }
  Build* b = current();
  if (!b) return;
  ir::Function* f = userFunction(*b, name.substr(0, dot), true);
  if (!f) return;
  const ir::Module& mod = *b->prog->module;
  passes::ShardingProvenance why;
  auto c = propagated(mod, *f, &why);
  const ir::ValueNames names = c->namesWithBodies();
  std::string vname = name.substr(dot + 1);
  // Values of the function, then of its loop bodies (whose plans are
  // chosen once for every iteration, in the body on its own).
  std::vector<std::pair<ir::Value*, const ir::Op*>> vals;
  for (ir::Value* v : valuesNamed(*c, vname)) vals.push_back({v, nullptr});
  std::vector<std::vector<const ir::Op*>> around = {};
  for (size_t i = 0; i < vals.size(); ++i) around.push_back({});
  for (const auto& lv : loopValuesNamed(*c, vname)) {
    vals.push_back({lv.value, lv.loop});
    around.push_back(lv.enclosing);
  }
  if (vals.empty()) {
    error("fn " + f->name + " has no value named '" + vname + "'");
    return;
  }
  for (size_t k = 0; k < vals.size(); ++k) {
    auto [v, loop] = vals[k];
    ValueContext ctx{*b, mod, why, names, f->name};
    ctx.loop = loop;
    ctx.enclosing = around[k];
    if (!v->def) {
      out_ << name << " is an argument: no op makes it, so there is no plan to choose\n";
      continue;
    }
    std::string what = std::string(v->def->info().mnemonic) + "(";
    for (size_t i = 0; i < v->def->operands.size(); ++i)
      what += (i ? ", " : "") + valueName(ctx, *v->def->operands[i]);
    what += ")";
    passes::OpPlans p = passes::explainPlans(mod, loop ? *loop->body : *c, v);
    if (!p.found) {
      out_ << name << " = " << what
           << ": no plan to choose (only matmul, einsum, sum and mean choose among plans; other ops split as "
              "their result's sharding says)\n";
      continue;
    }
    out_ << name << " = " << what << ", wanted " << (v->sharding ? v->sharding->str() : "replicated")
         << "; candidate plans, per rank (np = " << mod.np << "):\n"
         << planTable(p);
    if (loop) out_ << insideLoopNote(*b, *loop);
  }
}

}  // namespace gsl::repl
