#include "runtime/AutoSharding.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "frontend/AST.h"
#include "passes/CostModel.h"
#include "passes/Pipeline.h"
#include "runtime/Host.h"
#include "runtime/Memory.h"
#include "support/Diagnostics.h"
#include "support/Text.h"

namespace gsl::runtime {

namespace {

using Clock = std::chrono::steady_clock;

// An annotation left open in the main file: where ` @shard(...)` goes.
struct Site {
  std::string label;  // "param w1", "x of fn mlp"
  std::unique_ptr<ast::ShardAnnot>* slot = nullptr;  // the declaration's annotation, in the parsed AST
  SourceLoc loc;      // its type's
  size_t insertAt = 0;  // in the text: just past the type
  int rank = 0;
  bool isArg = false;
  std::string group;  // the param group or function whose sites move together too ("": none)
  std::vector<std::string> dimNames;  // each dim's size as written when a name or number ("" otherwise)
};

// One choice of a site: the mesh axes on each dim, or none at all.
struct Choice {
  bool none = true;
  std::vector<std::vector<std::string>> dims;
  // " @shard(MESH, [...])" as written after the site's type ("" for none).
  std::string text(const std::string& mesh) const {
    return none ? "" : " " + ir::Sharding::fromNames(mesh, dims).str();
  }
};

// The first mesh of the main file: its axes and the span of `[...]`.
struct MeshSite {
  std::string name;
  std::vector<std::string> axes;
  std::vector<ast::MeshAxisDecl>* decl = nullptr;  // in the parsed AST
  size_t begin = 0, end = 0;                        // `[...]` in the text
};

struct Edit {
  size_t at, length;
  std::string text;
};

std::string applyEdits(std::string text, std::vector<Edit> edits) {
  std::sort(edits.begin(), edits.end(), [](const Edit& a, const Edit& b) { return a.at > b.at; });
  for (const Edit& e : edits) text.replace(e.at, e.length, e.text);
  return text;
}

// The choices of one site on a mesh whose split axes are `axes`: none,
// one dim over one axis, two dims over two axes.
std::vector<Choice> choicesFor(const Site& s, const std::vector<std::string>& axes) {
  std::vector<Choice> out{Choice{}};
  auto split = [&](std::vector<std::pair<int, std::string>> on) {
    Choice c{false, std::vector<std::vector<std::string>>(s.rank)};
    for (auto& [d, a] : on) c.dims[d] = {a};
    out.push_back(c);
  };
  for (int d = 0; d < s.rank; ++d)
    for (const auto& a : axes) split({{d, a}});
  for (int d1 = 0; d1 < s.rank; ++d1)
    for (int d2 = d1 + 1; d2 < s.rank; ++d2)
      for (size_t a1 = 0; a1 < axes.size(); ++a1)
        for (size_t a2 = 0; a2 < axes.size(); ++a2)
          if (a1 != a2) split({{d1, axes[a1]}, {d2, axes[a2]}});
  return out;
}

// Every ordered factorisation of n into k factors.
void factorisations(int64_t n, size_t k, std::vector<int64_t>& cur, std::vector<std::vector<int64_t>>& out) {
  if (cur.size() + 1 == k) {
    cur.push_back(n);
    out.push_back(cur);
    cur.pop_back();
    return;
  }
  for (int64_t f = n; f >= 1; --f)  // the first axis largest first: ties keep it
    if (n % f == 0) {
      cur.push_back(f);
      factorisations(n / f, k, cur, out);
      cur.pop_back();
    }
}

// One parse of the program whose AST the candidates are written into: a
// mesh factorisation's search has its own, so that the factorisations run
// on threads of their own.
class Workspace {
 public:
  Workspace(const PlanSearchOptions& o, const std::string& text) : o_(o), text_(text), diags_(sm_) {
    parsed_ = frontend::compileSource(o_.file, text_, o_.frontend, sm_, diags_);
    if (parsed_) collectSites(*parsed_->asts[0]);
  }

  const frontend::CheckedProgram* parsed() const { return parsed_.get(); }
  std::string diagnostics() const {
    std::ostringstream d;
    diags_.print(d);
    return d.str();
  }
  const std::vector<Site>& sites() const { return sites_; }
  const std::optional<MeshSite>& mesh() const { return mesh_; }

  std::string meshText(const std::vector<int64_t>& sizes) const {
    std::string s = "[";
    for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + mesh_->axes[i] + ": " + std::to_string(sizes[i]);
    return s + "]";
  }

  // The mesh's axis sizes in the AST: literals.
  void setMesh(const std::vector<int64_t>& sizes) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      auto e = std::make_unique<ast::Expr>();
      e->kind = ast::ExprKind::Int;
      e->loc = (*mesh_->decl)[i].loc;
      e->ival = sizes[i];
      (*mesh_->decl)[i].size = std::move(e);
    }
  }

  void setAnnotation(size_t site, const Choice& c) {
    const Site& s = sites_[site];
    if (c.none) {
      s.slot->reset();
      return;
    }
    auto a = std::make_unique<ast::ShardAnnot>();
    a->loc = s.loc;
    a->mesh = mesh_->name;
    a->dims = c.dims;
    a->dimLocs.assign(c.dims.size(), s.loc);
    *s.slot = std::move(a);
  }

  // The program with the AST's current annotations and mesh: checked again
  // (no parsing), then scored.
  PlanScore check() {
    Diagnostics diags(sm_);
    auto prog = frontend::recheck(*parsed_, o_.frontend, diags);
    if (!prog) return PlanScore{false, "does not compile"};
    return score(*prog);
  }

  // The program as parsed.
  PlanScore checkWritten() { return score(*parsed_); }

 private:
  const PlanSearchOptions& o_;
  const std::string& text_;
  SourceManager sm_;
  Diagnostics diags_;
  std::unique_ptr<frontend::CheckedProgram> parsed_;  // owns the AST the candidates edit
  std::vector<Site> sites_;
  std::optional<MeshSite> mesh_;
  std::set<std::string> entries_;  // the functions fn main names (or PlanSearchOptions::only)

  void collectSites(ast::Program& p) {
    auto site = [&](const std::string& label, std::unique_ptr<ast::ShardAnnot>& slot, const ast::TypeExpr& t,
                    bool isArg, const std::string& group = "") {
      size_t at = offsetOf(text_, t.loc.line, t.loc.col);
      if (at == std::string::npos || t.dims.empty()) return;
      size_t end = endOfType(text_, at);
      if (end == std::string::npos) return;
      std::vector<std::string> dimNames;
      for (const auto& e : t.dims)
        dimNames.push_back(e->kind == ast::ExprKind::Name ? e->text
                           : e->kind == ast::ExprKind::Int ? std::to_string(e->ival)
                                                           : "");
      sites_.push_back({label, &slot, t.loc, end, (int)t.dims.size(), isArg, group, dimNames});
    };
    // The functions fn main names (calls it, passes to opt.minimize): the
    // arguments of these are the program's inputs; a helper's argument is
    // an intermediate value propagation decides.
    std::set<std::string>& entries = entries_;
    std::function<void(const ast::Expr&)> names = [&](const ast::Expr& e) {
      if (e.kind == ast::ExprKind::Name || e.kind == ast::ExprKind::Call) entries.insert(e.text);
      for (const auto& x : e.elems) names(*x);
      for (const auto& a : e.args) names(*a.value);
    };
    std::function<void(const ast::Block&)> walk = [&](const ast::Block& b) {
      for (const auto& st : b) {
        for (const auto& e : st->exprs) names(*e);
        walk(st->body);
        walk(st->elseBody);
      }
    };
    for (const auto& d : p.decls)
      if (d->kind == ast::DeclKind::Fn && d->name == "main") walk(d->body);
    if (!o_.only.empty()) entries = {o_.only};
    for (auto& d : p.decls) {
      if (d->kind == ast::DeclKind::Mesh && !mesh_) {
        size_t at = offsetOf(text_, d->loc.line, d->loc.col);
        size_t open = at == std::string::npos ? at : text_.find('[', at);
        size_t close = open == std::string::npos ? open : matchingClose(text_, open, '[');
        if (close == std::string::npos) continue;
        MeshSite m;
        m.name = d->name;
        for (const auto& a : d->axes) m.axes.push_back(a.name);
        m.decl = &d->axes;
        m.begin = open;
        m.end = close;
        mesh_ = std::move(m);
      } else if (d->kind == ast::DeclKind::Param && !d->annot && d->type) {
        site("param " + d->name, d->annot, *d->type, false);
      } else if (d->kind == ast::DeclKind::ParamGroup) {
        for (auto& m : d->members)
          if (!m->annot && m->type)
            site("param-group member " + d->name + "." + m->name, m->annot, *m->type, false, "group " + d->name);
      } else if (d->kind == ast::DeclKind::Fn && d->name != "main" && entries.count(d->name)) {
        for (auto& a : d->args)
          if (!a.annot && a.type) site(a.name + " of fn " + d->name, a.annot, *a.type, true, "fn " + d->name);
      }
    }
  }

  // Runs the pass pipeline and the run's memory estimate on `prog` and
  // predicts its step.
  PlanScore score(frontend::CheckedProgram& prog) {
    PlanScore s;
    ir::Module& mod = *prog.module;
    if (o_.autocast) mod.autocast = ir::DType::BF16;
    mod.remat = o_.remat;
    mod.updateSharding = o_.updateSharding;
    try {
      passes::runGlobalPipeline(mod);
      RunOptions ro;
      ro.mpi = o_.mpi;
      ro.machine = o_.machine;
      const MemoryEstimate est = estimateMemory(prog, ro);
      s.memoryBytes = est.total();
      passes::Cost cost;
      if (est.training && o_.only.empty()) {
        cost = est.training->cost;
      } else {
        // No training step (or one function asked for): the tensor
        // functions fn main names, each once.
        for (const auto& name : prog.userFunctions) {
          ir::Function* f = mod.findFunction(name);
          if (!f || !entries_.count(name)) continue;
          auto copy = f->clone();
          auto local = passes::buildPerRankProgram(mod, *copy, false);
          const passes::Cost c = passes::estimateCost(mod, *local, o_.machine);
          cost.addTimes(c, 1);
          cost.callSeconds += c.callSeconds;
        }
      }
      s.seconds = cost.seconds();
      s.computeSeconds = cost.computeSeconds();
      s.collectiveSeconds = cost.collectiveSeconds;
      for (const auto& [k, v] : cost.collectives) s.bytesSent += v.bytes;
      if (o_.maxMemory && s.memoryBytes > o_.maxMemory) {
        s.why = "needs " + formatBytes(s.memoryBytes) + " per rank, more than the limit " + formatBytes(o_.maxMemory);
        return s;
      }
      s.ok = true;
    } catch (const std::exception& e) {
      s.why = e.what();
    }
    return s;
  }
};

bool better(const PlanScore& a, const PlanScore& b) {
  if (a.ok != b.ok) return a.ok;
  if (!a.ok) return false;
  // Within 0.1%: the same time; fewer bytes sent, then less memory.
  if (std::abs(a.seconds - b.seconds) > 1e-3 * std::max(a.seconds, b.seconds)) return a.seconds < b.seconds;
  if (a.bytesSent != b.bytesSent) return a.bytesSent < b.bytesSent;
  return a.memoryBytes < b.memoryBytes;
}

// Whether the program as written has any sharding annotation (a param's,
// an argument's, a value's): then its mesh axes are not interchangeable.
bool annotated(const ir::Module& m) {
  for (const auto& p : m.params)
    if (p.sharding) return true;
  std::function<bool(const ir::Function&)> any = [&](const ir::Function& f) {
    for (const ir::Value* a : f.args)
      if (a->sharding) return true;
    for (const auto& op : f.ops) {
      for (const ir::Value* r : op->results)
        if (r->sharding) return true;
      if (op->body && any(*op->body)) return true;
    }
    return false;
  };
  for (const auto& f : m.functions)
    if (any(*f)) return true;
  return false;
}

// The best plan on one mesh factorisation (`sizes`; empty: as written).
struct MeshResult {
  PlanScore best;
  std::vector<Choice> choices;
  std::vector<std::pair<std::vector<Choice>, PlanScore>> candidates;  // every plan evaluated, with keepCandidates
  int64_t evaluated = 0;
  bool exhaustive = false;
  std::string error;
};

MeshResult searchMesh(const PlanSearchOptions& o, const std::string& text, const std::vector<int64_t>& sizes,
                      const std::vector<std::string>& writtenAxes) {
  MeshResult r;
  Workspace w(o, text);
  if (!w.parsed()) {
    r.error = w.diagnostics();
    return r;
  }
  const auto& sites = w.sites();
  std::vector<std::string> axes = writtenAxes;  // the axes that split (size > 1)
  if (!sizes.empty()) {
    axes.clear();
    for (size_t i = 0; i < sizes.size(); ++i)
      if (sizes[i] > 1) axes.push_back(w.mesh()->axes[i]);
    w.setMesh(sizes);
  }
  std::vector<std::vector<Choice>> options;
  int64_t space = 1;
  for (const Site& s : sites) {
    options.push_back(choicesFor(s, axes));
    space = std::min<int64_t>(space * (int64_t)options.back().size(), INT64_MAX / 64);
  }
  auto eval = [&](const std::vector<int>& c) {
    ++r.evaluated;
    std::vector<Choice> chosen;
    for (size_t i = 0; i < sites.size(); ++i) {
      w.setAnnotation(i, options[i][c[i]]);
      chosen.push_back(options[i][c[i]]);
    }
    PlanScore s = w.check();
    if (o.keepCandidates) r.candidates.push_back({std::move(chosen), s});
    return s;
  };
  std::vector<int> choice(sites.size(), 0);
  PlanScore& here = r.best;
  r.exhaustive = space <= o.exhaustive;
  if (r.exhaustive) {
    // Every combination, in odometer order.
    std::vector<int> c(sites.size(), 0);
    for (;;) {
      PlanScore s = eval(c);
      if (better(s, here)) here = s, choice = c;
      size_t i = 0;
      while (i < c.size() && ++c[i] == (int)options[i].size()) c[i++] = 0;
      if (i == c.size()) break;
    }
  } else {
    // Seeds: nothing annotated; every argument's first dim over the first axis.
    here = eval(choice);
    if (!axes.empty()) {
      std::vector<int> dp(sites.size(), 0);
      for (size_t i = 0; i < sites.size(); ++i)
        if (sites[i].isArg) dp[i] = 1;  // dim 0 over axes[0]
      PlanScore s = eval(dp);
      if (better(s, here)) here = s, choice = dp;
    }
    // A site whose first other choice changes nothing at all (time, bytes
    // sent, memory) is not read by what is measured (a function the
    // training step does not call): it keeps its choice.
    std::vector<bool> dead(sites.size(), false);
    // Group moves: the sites of one param group (or the arguments of one
    // function) whose dim d has the same written size, split over the
    // same axis at once: the splits that pay only together (GShard's
    // experts, wi and wo on their E dim; the batch dim of a function's
    // inputs). Megatron's pairs span several params and are not found. A
    // dead site alone may pay together with its group.
    std::map<std::tuple<std::string, int, std::string>, std::vector<size_t>> groups;
    for (size_t i = 0; i < sites.size(); ++i)
      if (!sites[i].group.empty())
        for (int d = 0; d < sites[i].rank; ++d)
          if (!sites[i].dimNames[d].empty()) groups[{sites[i].group, d, sites[i].dimNames[d]}].push_back(i);
    for (int sweep = 0; sweep < 4; ++sweep) {
      bool changed = false;
      for (size_t i = 0; i < sites.size(); ++i)
        for (int k = 0; k < (int)options[i].size() && !dead[i]; ++k) {
          if (k == choice[i]) continue;
          std::vector<int> c = choice;
          c[i] = k;
          PlanScore s = eval(c);
          if (sweep == 0 && s.ok && here.ok && s.seconds == here.seconds && s.bytesSent == here.bytesSent &&
              s.memoryBytes == here.memoryBytes) {
            dead[i] = true;
            break;
          }
          if (better(s, here)) here = s, choice = c, changed = true;
        }
      for (const auto& [key, members] : groups) {
        if (members.size() < 2) continue;
        const int d = std::get<1>(key);
        for (size_t a = 0; a < axes.size(); ++a) {
          std::vector<int> c = choice;
          for (size_t i : members) c[i] = 1 + d * (int)axes.size() + (int)a;  // choicesFor's order
          if (c == choice) continue;
          PlanScore s = eval(c);
          if (better(s, here)) here = s, choice = c, changed = true;
        }
      }
      if (!changed) break;
    }
  }
  for (size_t i = 0; i < sites.size(); ++i) r.choices.push_back(options[i][choice[i]]);
  return r;
}

}  // namespace

PlanResult searchPlan(const PlanSearchOptions& o) {
  const auto t0 = Clock::now();
  PlanResult r;
  std::string text = o.text;
  if (text.empty()) {
    std::ifstream in(o.file);
    if (!in) {
      r.error = o.file + ": cannot read it";
      return r;
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  // The program as written: its diagnostics, if any, are the answer.
  Workspace written(o, text);
  if (!written.parsed()) {
    r.error = written.diagnostics();
    return r;
  }
  r.written = written.checkWritten();
  if (!r.written.ok && r.written.why.rfind("needs", 0) != 0) {
    r.error = "the program as written: " + r.written.why;
    return r;
  }
  std::vector<std::string> writtenAxes;
  if (const ir::Module& m = *written.parsed()->module; !m.meshes.empty())
    for (const auto& a : m.meshes[0].axes)
      if (a.size > 1) writtenAxes.push_back(a.name);
  const auto& mesh = written.mesh();
  // The mesh factorisations to search ({} = as written). When no annotation
  // the user wrote names the mesh, its axes are interchangeable: of 4 x 2
  // and 2 x 4 only the first (the first axis largest) is searched.
  std::vector<std::vector<int64_t>> meshes;
  if (mesh && !o.keepMesh) {
    std::vector<std::vector<int64_t>> all;
    std::vector<int64_t> cur;
    factorisations(o.frontend.np, mesh->axes.size(), cur, all);
    const bool axesNamed = annotated(*written.parsed()->module);
    std::set<std::vector<int64_t>> seen;
    for (const auto& f : all) {
      std::vector<int64_t> key = f;
      std::sort(key.rbegin(), key.rend());
      if (axesNamed || seen.insert(key).second) meshes.push_back(f);
    }
  } else {
    meshes.push_back({});
  }
  r.sites = (int64_t)written.sites().size();
  for (const auto& sizes : meshes) r.meshes.push_back(sizes.empty() ? "as written" : written.meshText(sizes));
  // Each factorisation on a thread of its own, as many at once as there are cores.
  std::vector<MeshResult> results(meshes.size());
  const size_t width = std::max(1u, std::thread::hardware_concurrency());
  for (size_t from = 0; from < meshes.size(); from += width) {
    std::vector<std::thread> ts;
    for (size_t i = from; i < std::min(meshes.size(), from + width); ++i)
      ts.emplace_back([&, i] { results[i] = searchMesh(o, text, meshes[i], writtenAxes); });
    for (auto& t : ts) t.join();
  }
  size_t bestAt = 0;
  bool anyExhaustive = false, anyDescent = false;
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].error.empty()) {
      r.error = results[i].error;
      return r;
    }
    r.evaluated += results[i].evaluated;
    (results[i].exhaustive ? anyExhaustive : anyDescent) = true;
    if (better(results[i].best, results[bestAt].best)) bestAt = i;
  }
  r.method = anyExhaustive && anyDescent ? "exhaustive and coordinate descent" : anyExhaustive ? "exhaustive" : "coordinate descent";
  r.searchSeconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const MeshResult& best = results[bestAt];
  if (!best.best.ok) {
    r.error = "no plan fits: " + (best.best.why.empty() ? r.written.why : best.best.why);
    return r;
  }
  r.ok = true;
  r.chosen = best.best;
  // A plan as text: the user's file with the edits.
  const std::string meshName = mesh ? mesh->name : "";
  auto planText = [&](const std::vector<int64_t>& sizes, const std::vector<Choice>& choices,
                      std::vector<std::string>* lines) {
    std::vector<Edit> edits;
    if (mesh && !sizes.empty()) {
      edits.push_back({mesh->begin, mesh->end - mesh->begin, written.meshText(sizes)});
      if (lines) lines->push_back("mesh " + mesh->name + " = " + written.meshText(sizes));
    }
    for (size_t i = 0; i < written.sites().size(); ++i) {
      const std::string a = choices[i].text(meshName);
      edits.push_back({written.sites()[i].insertAt, 0, a});
      if (lines)
        lines->push_back(written.sites()[i].label + ": " + (a.empty() ? std::string("(no annotation)") : a.substr(1)));
    }
    return applyEdits(text, edits);
  };
  r.text = planText(meshes[bestAt], best.choices, &r.choices);
  if (o.keepCandidates) {
    std::set<std::string> seen;
    for (size_t m = 0; m < results.size(); ++m)
      for (const auto& [choices, score] : results[m].candidates) {
        std::string t = planText(meshes[m], choices, nullptr);
        if (!seen.insert(t).second) continue;
        r.candidates.push_back({t, score, t == r.text});
      }
  }
  return r;
}

namespace {

std::string ms(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, s < 1e-3 ? "%.1f us" : "%.3f ms", s < 1e-3 ? s * 1e6 : s * 1e3);
  return buf;
}

}  // namespace

void printPlan(const PlanResult& r, const PlanSearchOptions& o, std::ostream& out, bool showTime) {
  const char* per = o.only.empty() ? " a step (compute " : " a call (compute ";
  auto line = [&](const char* head, const PlanScore& s) {
    out << head << ms(s.seconds) << per << ms(s.computeSeconds) << ", collectives "
        << ms(s.collectiveSeconds) << "), " << formatBytes(s.bytesSent) << " sent and " << formatBytes(s.memoryBytes)
        << " per rank\n";
  };
  out << "gsl plan " << o.file << " -np " << o.frontend.np << ": " << r.evaluated << " plans of " << r.sites
      << (r.sites == 1 ? " open annotation" : " open annotations") << " x " << std::max<size_t>(1, r.meshes.size())
      << (r.meshes.size() == 1 ? " mesh" : " meshes") << " evaluated";
  char buf[32];
  std::snprintf(buf, sizeof buf, " in %.2f s", r.searchSeconds);
  out << (showTime ? buf : "") << " (" << r.method << ")\n";
  out << o.machine.describe();
  out << "chosen:\n";
  for (const auto& c : r.choices) out << "  " << c << "\n";
  line("predicted: ", r.chosen);
  if (r.written.ok) line("as written: ", r.written);
  else out << "as written: " << r.written.why << "\n";
}

}  // namespace gsl::runtime
