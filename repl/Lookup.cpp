// Name lookups for the commands (Lookup.h says what each answers).
#include "repl/Lookup.h"

#include "frontend/AST.h"
#include "ir/Loop.h"
#include "passes/Pipeline.h"
#include "repl/CallPaths.h"

namespace gsl::repl {

std::unique_ptr<ir::Function> perRank(const ir::Module& m, const ir::Function& f) {
  auto c = f.clone();
  return passes::buildPerRankProgram(m, *c, false);
}

std::vector<ir::Value*> valuesNamed(ir::Function& f, const std::string& name) {
  std::vector<ir::Value*> r;
  if (name.empty()) return r;  // unnamed values are not found by name
  if (name == "return") return f.results;
  for (auto* a : f.args)
    if (f.names.name(a) == name) r.push_back(a);
  for (auto& op : f.ops)
    if (f.names.name(op->result) == name) r.push_back(op->result);
  return r;
}

std::vector<LoopValue> loopValuesNamed(ir::Function& f, const std::string& name,
                                       const std::vector<const ir::Op*>& enclosing) {
  std::vector<LoopValue> r;
  if (name.empty()) return r;
  for (auto& op : f.ops) {
    if (!op->body) continue;
    ir::Function& body = *op->body;
    size_t before = r.size();
    for (auto& bop : body.ops)
      if (body.names.name(bop->result) == name) r.push_back({bop->result, op.get(), enclosing});
    if (r.size() == before)
      for (auto* a : body.args)
        if (body.names.name(a) == name) r.push_back({a, op.get(), enclosing});
    std::vector<const ir::Op*> inside = enclosing;
    inside.push_back(op.get());
    for (auto& inner : loopValuesNamed(body, name, inside)) r.push_back(inner);
  }
  return r;
}

bool isFunctionDecl(const Build& b, const std::string& name) {
  for (const auto& a : b.prog->asts)
    for (const auto& d : a->decls)
      if (d->kind == ast::DeclKind::Fn && d->name == name && name != "main") return true;
  return false;
}

std::string groupHint(const Build& b, const std::string& name) {
  size_t dot = name.find('.');
  std::string group = name.substr(0, dot);
  for (const auto& a : b.prog->asts)
    for (const auto& d : a->decls) {
      if (d->kind != ast::DeclKind::ParamGroup || d->name != group) continue;
      std::string list;
      bool has = false;
      for (const auto& m : d->members) {
        list += (list.empty() ? "" : ", ") + group + "." + m->name;
        has |= dot != std::string::npos && m->name == name.substr(dot + 1);
      }
      if (dot == std::string::npos) return "'" + group + "' is a param group: name one of its members (" + list + ")";
      if (!has) return "param group " + group + " has no member '" + name.substr(dot + 1) + "' (its members: " + list + ")";
      return "";
    }
  return "";
}

std::string stepTitle(const Build& b, const Step& st) {
  const std::string& o = st.thunk->fn->train->optimizer;
  return "the training step " + o + ".minimize(" + st.loss + ", ...) at " + b.where(st.thunk->loc) +
         " (forward, backward and " + o + "'s update)";
}

std::string loopText(const Build& b, const ir::Op& loop) {
  const ir::LoopInfo info(loop);
  std::string var = loop.body && !loop.body->args.empty() && !loop.body->names.name(loop.body->args[0]).empty()
                        ? loop.body->names.name(loop.body->args[0])
                        : "i";
  std::string at = b.where(loop.loc);
  const std::string where = at.empty() ? std::string(")") : ", at " + at + ")";
  auto iterations = [](int64_t n) { return std::to_string(n) + (n == 1 ? " iteration" : " iterations"); };
  // A pipeline's loops (passes/Pipelining): the time loop, and the loop
  // over the stages, of which each rank runs its own stages' iterations.
  if (loop.attrs.has("pipeline_microbatches"))
    return "the pipeline's time loop (" + iterations(info.trip) + where;
  if (loop.attrs.has("stage_mesh") && b.prog) {
    int64_t n = 1;
    if (const ir::Mesh* m = b.prog->module->findMesh(loop.attrs.getString("stage_mesh")))
      for (int64_t a : loop.attrs.getInts("stage_axes")) n *= m->axes[a].size;
    return "the loop over the " + std::to_string(info.trip) + " stages (" + iterations(info.trip / n) +
           " on each rank" + where;
  }
  return "the loop over " + var + " (" + iterations(info.trip) + where;
}

}  // namespace gsl::repl
