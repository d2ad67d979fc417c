#include "repl/CallPaths.h"

#include <algorithm>
#include <set>

#include "passes/ShardingPropagation.h"
#include "repl/Session.h"

namespace gsl::repl {

namespace {

bool endsWith(const std::string& s, const std::string& t) {
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

// Adds the named values of `f` (and of its loop bodies) to `r`.
void collect(PathRoot& r, ir::Function& f, const ir::Op* loop, const std::vector<const ir::Op*>& enclosing) {
  auto add = [&](ir::Value* v) {
    std::vector<std::string> names = f.names.callPaths(v);
    // A user function's own arguments have a name and no call path.
    if (!loop && v->argIndex >= 0 && !f.names.name(v).empty() && !r.fn.empty()) names.push_back(f.names.name(v));
    for (const auto& n : names) r.values.push_back({r.prefix + n, v, loop, enclosing});
  };
  for (ir::Value* a : f.args) add(a);
  for (auto& op : f.ops) {
    for (ir::Value* v : op->results) add(v);
    if (op->body) {
      std::vector<const ir::Op*> inside = enclosing;
      if (loop) inside.push_back(loop);
      collect(r, *op->body, op.get(), inside);
    }
  }
}

}  // namespace

void copyNames(const ir::Function& f, ir::Function& c) {
  for (size_t i = 0; i < f.args.size(); ++i) c.names.assign(c.args[i], f.names, f.args[i]);
  for (size_t i = 0; i < f.ops.size(); ++i) {
    for (size_t r = 0; r < f.ops[i]->results.size(); ++r)
      c.names.assign(c.ops[i]->results[r], f.names, f.ops[i]->results[r]);
    if (f.ops[i]->body && c.ops[i]->body) copyNames(*f.ops[i]->body, *c.ops[i]->body);  // a loop's body
  }
}

void collectLoops(const ir::Function& f, std::vector<const ir::Op*>& out) {
  for (const auto& op : f.ops)
    if (op->body) {
      out.push_back(op.get());
      collectLoops(*op->body, out);
    }
}

void copyBodyNames(const ir::Function& from, ir::Function& to) {
  std::vector<const ir::Op*> a, b;
  collectLoops(from, a);
  collectLoops(to, b);
  if (a.size() != b.size()) return;
  for (size_t i = 0; i < a.size(); ++i) {
    const ir::Function& s = *a[i]->body;
    ir::Function& d = *b[i]->body;
    if (s.args.size() != d.args.size() || s.ops.size() != d.ops.size()) continue;
    for (size_t k = 0; k < s.args.size(); ++k) d.names.assign(d.args[k], s.names, s.args[k]);
    for (size_t k = 0; k < s.ops.size(); ++k)
      for (size_t r = 0; r < s.ops[k]->results.size() && r < d.ops[k]->results.size(); ++r)
        d.names.assign(d.ops[k]->results[r], s.names, s.ops[k]->results[r]);
  }
}

std::unique_ptr<ir::Function> propagated(const ir::Module& m, const ir::Function& f,
                                         passes::ShardingProvenance* provenance) {
  auto c = f.clone();
  copyNames(f, *c);
  passes::propagateShardings(m, *c, provenance);
  copyBodyNames(f, *c);
  c->renumber();
  return c;
}

std::unique_ptr<Step> findStep(const Build& b) {
  struct Finder : runtime::ShardingWalk {
    Step& step;
    Finder(runtime::PerRankPrograms& p, Step& s) : ShardingWalk(p), step(s) {}
    void visit(const frontend::Thunk& th, const ir::Function& perRank, bool isStep,
               const std::vector<std::optional<ir::Sharding>>& in) override {
      if (!isStep || step.thunk) return;
      step.thunk = &th;
      step.inputs = in;
      step.perRank = &perRank;
    }
  };
  auto s = std::make_unique<Step>();
  s->programs = std::make_unique<runtime::PerRankPrograms>(*b.prog->module);
  Finder f(*s->programs, *s);
  f.walk(b.prog->host.body);
  if (!s->thunk) return nullptr;
  s->loss = s->thunk->fn->train ? s->thunk->fn->train->loss : "";
  return s;
}

std::vector<PathRoot> pathRoots(const Build& b, const Build* stepBuild, const Step* step) {
  std::vector<PathRoot> roots;
  const ir::Module& mod = *b.prog->module;
  for (const auto& name : b.prog->userFunctions) {
    const ir::Function* f = mod.findFunction(name);
    if (!f || (step && name == step->loss)) continue;  // the step replaces its loss function
    PathRoot r;
    r.build = &b;
    r.fn = name;
    r.prefix = name + ".";
    r.ir = propagated(mod, *f, &r.provenance);
    roots.push_back(std::move(r));
  }
  if (step && stepBuild) {
    PathRoot r;
    r.build = stepBuild;
    r.leaves = &step->thunk->leaves;
    r.ir = runtime::thunkForInputs(*step->thunk, step->inputs);
    copyNames(*step->thunk->fn, *r.ir);
    passes::propagateShardings(*stepBuild->prog->module, *r.ir, &r.provenance);
    copyBodyNames(*step->thunk->fn, *r.ir);
    r.ir->renumber();
    roots.push_back(std::move(r));
  }
  for (auto& r : roots) {
    r.names = r.ir->namesWithBodies();
    collect(r, *r.ir, nullptr, {});
  }
  return roots;
}

Resolved resolvePath(const std::vector<PathRoot>& roots, const std::string& query) {
  std::vector<std::string> comps;
  for (size_t s = 0;;) {
    size_t d = query.find('.', s);
    comps.push_back(query.substr(s, d == std::string::npos ? std::string::npos : d - s));
    if (d == std::string::npos) break;
    s = d + 1;
  }
  // The three rules, in order (CallPaths.h).
  auto rule = [&](int k, const std::string& n) {
    if (k == 0) return n == query;
    if (k == 1) return endsWith(n, "." + query);
    for (size_t split = 1; split < comps.size(); ++split) {
      std::string head, tail;
      for (size_t i = 0; i < comps.size(); ++i) (i < split ? head : tail) += comps[i] + ".";
      tail.pop_back();
      if (n.size() > head.size() + tail.size() && n.compare(0, head.size(), head) == 0 && endsWith(n, "." + tail))
        return true;
    }
    return false;
  };
  Resolved out;
  for (int k = 0; k < 3; ++k) {
    std::set<std::string> names;
    for (const auto& r : roots)
      for (const auto& v : r.values)
        if (rule(k, v.name)) {
          names.insert(v.name);
          out.values.push_back({&r, &v});
        }
    if (names.size() > 1) {
      out.values.clear();
      out.candidates.assign(names.begin(), names.end());
    }
    if (!names.empty()) return out;
  }
  return out;
}

std::string ambiguousMessage(const std::string& query, const std::vector<std::string>& candidates) {
  std::string l;
  const size_t shown = std::min<size_t>(candidates.size(), 8);
  for (size_t i = 0; i < shown; ++i) l += (i ? ", " : "") + candidates[i];
  if (candidates.size() > shown) l += ", and " + std::to_string(candidates.size() - shown) + " more";
  return "'" + query + "' is ambiguous: it could be " + l + " (give more of the call path)";
}

}  // namespace gsl::repl
