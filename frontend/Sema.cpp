// Semantic analysis: the entry point, and names and declarations (what
// each global of the program denotes). See frontend/SemaImpl.h for how the
// rest of Sema is split.
#include "frontend/Sema.h"

#include "frontend/SemaImpl.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <sstream>

namespace gsl::frontend::sema {

namespace {

size_t editDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

std::string suggest(const std::string& name, const std::vector<std::string>& candidates) {
  // At most one edit per three characters (as clang's typo correction), so
  // a one-letter name is not "corrected" to an unrelated two-letter one.
  std::string best;
  size_t bestD = std::max<size_t>(1, (name.size() + 2) / 3) + 1;
  for (const auto& c : candidates) {
    size_t d = editDistance(name, c);
    if (d < bestD) {
      bestD = d;
      best = c;
    }
  }
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

std::string formatNum(Num n) {
  if (n.isInt) return std::to_string(n.i);
  std::ostringstream v;
  v << n.f;
  return v.str();
}

SourceLoc startLoc(const ast::Expr& e) {
  if ((e.kind == ast::ExprKind::Binary || e.kind == ast::ExprKind::Annot) && !e.elems.empty())
    return startLoc(*e.elems[0]);
  return e.loc;
}

// Host builtins, in HostBuiltin order (alphabetical).
const std::array<const char*, (size_t)HostBuiltin::Count> kHostBuiltins = {"batch", "evaluate", "exists", "grad", "load", "load_checkpoint", "log_metric", "log_moe", "print", "print_text", "save", "save_checkpoint", "start_step"};
const std::set<std::string> kInitializers = {"zeros", "ones", "normal", "uniform", "glorot"};

std::optional<HostBuiltin> hostBuiltin(const std::string& name) {
  for (size_t i = 0; i < kHostBuiltins.size(); ++i)
    if (name == kHostBuiltins[i]) return (HostBuiltin)i;
  return std::nullopt;
}

const char* hostBuiltinName(HostBuiltin b) { return kHostBuiltins.at((size_t)b); }

std::vector<std::string> hostBuiltinNames() { return {kHostBuiltins.begin(), kHostBuiltins.end()}; }

Sema::Sema(const Options& o, Diagnostics& d, CheckedProgram& out) : opts_(o), diags_(d), out_(out) {
  out_.module = std::make_unique<Module>();
  mod_ = out_.module.get();
  mod_->np = o.np;
}

bool Sema::run(const std::vector<const ast::Decl*>& decls) {
  for (const ast::Decl* d : decls)  // the root file is loaded (added) first
    if (d->loc.file >= 0 && (rootFile_ < 0 || d->loc.file < rootFile_)) rootFile_ = d->loc.file;
  registerNames(decls);
  checkDefines();
  for (const ast::Decl* d : decls) {
    switch (d->kind) {
      case ast::DeclKind::Const: declConst(*d); break;
      case ast::DeclKind::Mesh: declMesh(*d); break;
      case ast::DeclKind::Param: declParam(*d); break;
      case ast::DeclKind::ParamGroup: declParamGroup(*d); break;
      case ast::DeclKind::Optimizer: declOptimizer(*d); break;
      case ast::DeclKind::Dataset: declDataset(*d); break;
      default: break;
    }
  }
  for (const ast::Decl* d : decls)
    if (d->kind == ast::DeclKind::Fn && d->name != "main" && fns_[d->name].decl == d) lowerFnStandalone(d->name);
  for (const ast::Decl* d : decls)
    if (d->kind == ast::DeclKind::Fn && d->name == "main" && fns_[d->name].decl == d) lowerMain(*d);
  // Functions in declaration order, then the host thunks.
  for (const ast::Decl* d : decls)
    if (d->kind == ast::DeclKind::Fn && d->name != "main" && fns_[d->name].fn && fns_[d->name].decl == d) {
      out_.userFunctions.push_back(d->name);
      mod_->functions.push_back(std::move(fns_[d->name].owned));
    }
  for (auto& t : thunks_) mod_->functions.push_back(std::move(t));
  return !diags_.hasErrors();
}

bool Sema::opLimitReached(const Ctx& c, SourceLoc l) {
  size_t total = builtOps_ + c.fn->ops.size();
  for (const auto& t : thunks_) total += t->ops.size();
  if (!tooLarge_ && (int64_t)total >= opts_.maxOps)
    diags_.error(l, "the program is too large: GSL inlines calls, and inlining this one into '" +
                        c.callStack.front() + "' takes it past " + std::to_string(opts_.maxOps) + " operations");
  return tooLarge_ = tooLarge_ || (int64_t)total >= opts_.maxOps;
}

void Sema::err(Ctx& c, SourceLoc l, const std::string& m) {
  if (!c.mute) diags_.error(l, m);
}

void Sema::err(SourceLoc l, const std::string& m) { diags_.error(l, m); }

void Sema::registerNames(const std::vector<const ast::Decl*>& decls) {
  for (const ast::Decl* d : decls) {
    if (d->kind == ast::DeclKind::Import) continue;
    const char* kind = ast::declKindName(d->kind);
    if (d->name == "NP") {
      err(d->loc, "'NP' is predefined (the number of ranks, set with -np)");
      continue;
    }
    if (lookupBuiltin(d->name) || hostBuiltin(d->name)) {
      err(d->loc, std::string("cannot declare ") + kind + " '" + d->name + "': it is a builtin");
      continue;
    }
    auto it = globals_.find(d->name);
    if (it != globals_.end()) {
      err(d->loc, "redefinition of '" + d->name + "'");
      diags_.note(it->second.loc, "'" + d->name + "' was first declared here as a " + ast::declKindName(it->second.kind));
      continue;
    }
    globals_[d->name] = {d->kind, d->loc};
    if (d->kind == ast::DeclKind::Fn) fns_[d->name].decl = d;
  }
}

void Sema::checkDefines() {
  std::map<std::string, std::string> all;  // integer and float values, by name
  for (const auto& [k, v] : opts_.defines) all[k] = std::to_string(v);
  for (const auto& [k, v] : opts_.floatDefines) all[k] = formatNum(Num{false, 0, v});
  for (const auto& [k, v] : all) {
    if (k == "NP") {
      err({}, "-D NP=" + v + ": NP is the number of ranks; set it with -np");
      continue;
    }
    auto it = globals_.find(k);
    if ((it == globals_.end() || it->second.kind != ast::DeclKind::Const) && !opts_.definesMayNameNoConst)
      err({}, "-D " + k + "=" + v + ": the program declares no const '" + k + "'");
  }
}

// False for a declaration that lost to an earlier one of the same name
// (already reported by registerNames): only the first one counts.
bool Sema::isRegistered(const ast::Decl& d) {
  auto it = globals_.find(d.name);
  if (it == globals_.end()) return false;
  const SourceLoc& l = it->second.loc;
  return l.file == d.loc.file && l.line == d.loc.line && l.col == d.loc.col;
}

void Sema::declConst(const ast::Decl& d) {
  if (!isRegistered(d)) return;
  if (auto it = opts_.defines.find(d.name); it != opts_.defines.end()) {
    consts_[d.name] = Num{true, it->second, 0};
    return;
  }
  if (auto it = opts_.floatDefines.find(d.name); it != opts_.floatDefines.end()) {
    consts_[d.name] = Num{false, 0, it->second};
    return;
  }
  if (d.override) {  // `import "f.gsl" with (NAME = value)`
    const ast::Expr& e = *d.override->value;
    auto v = constEval(e);
    auto declared = constEval(*d.value);  // its kind: integer or float
    if (!v || !declared) return;
    if (declared->isInt && !v->isInt) {
      err(startLoc(e), "'" + d.name + "' is an integer const of \"" + d.overrideImport + "\" (" + formatNum(*declared) +
                           "), but with sets it to " + formatNum(*v));
      return;
    }
    consts_[d.name] = declared->isInt ? *v : Num{false, 0, v->d()};
    if (dependsOnNP(e)) npConsts_.insert(d.name);
    return;
  }
  // Integer or float (`const LR = 0.001`); a float const used where an
  // integer is needed (a dimension, a loop bound) is refused there.
  if (auto v = constEval(*d.value)) {
    consts_[d.name] = *v;
    if (dependsOnNP(*d.value)) npConsts_.insert(d.name);
  }
}

void Sema::declMesh(const ast::Decl& d) {
  if (!isRegistered(d)) return;
  Mesh m;
  m.name = d.name;
  bool ok = true;
  std::set<std::string> names;
  for (const auto& a : d.axes) {
    auto size = evalInt(*a.size, "mesh axis size");
    if (!size) {
      ok = false;
      continue;
    }
    if (*size < 1) {
      err(startLoc(*a.size), "mesh axis '" + a.name + "' has size " + std::to_string(*size) + "; sizes must be at least 1");
      ok = false;
    }
    if (!names.insert(a.name).second) {
      err(a.loc, "mesh '" + d.name + "' has two axes named '" + a.name + "'");
      ok = false;
    }
    m.axes.push_back({a.name, *size});
  }
  if (!ok) return;
  int64_t prod = 1;
  std::string expr;
  for (const auto& a : m.axes) {
    if (prod > (int64_t)1 << 40) break;
    prod *= a.size;
    expr += (expr.empty() ? "" : " x ") + std::to_string(a.size);
  }
  if (prod != opts_.np) {
    // "2 x 3 = 6 devices"; one axis: "2 devices".
    err(d.loc, "mesh '" + d.name + "' has " + (m.axes.size() > 1 ? expr + " = " : "") + std::to_string(prod) +
                   (prod == 1 ? " device" : " devices") + ", but the program runs on NP = " +
                   std::to_string(opts_.np) + (opts_.np == 1 ? " rank" : " ranks") + " (-np)");
    return;
  }
  mod_->meshes.push_back(m);
}

void Sema::declParam(const ast::Decl& d) {
  if (!isRegistered(d)) return;
  auto t = lowerType(*d.type);
  if (!t) return;
  Param p;
  p.name = d.name;
  p.type = *t;
  p.loc = d.loc;
  if (d.annot) {
    auto s = checkSharding(*d.annot, *t);
    if (!s) return;
    p.sharding = s;
  }
  if (!lowerInit(*d.value, p.init)) return;
  if (p.type.dtype != DType::F32) {
    err(d.type->loc, "params must be f32 (trainable), got " + p.type.str());
    return;
  }
  mod_->params.push_back(p);
}

// `param blocks[L] { wq: f32[D, H] @shard(m, [_, model]) = glorot ... }`:
// one stacked param per member, `blocks.wq: f32[L, D, H]`, its layer dim
// never split; each layer's initial values are distinct (they are rows of
// one stacked tensor) and glorot's fans are one layer's.
void Sema::declParamGroup(const ast::Decl& d) {
  if (!isRegistered(d)) return;
  // Known as a group even if its declaration has errors (its uses are then
  // silent, as those of a param whose declaration had an error).
  Group& g = groups_[d.name];
  for (const auto& m : d.members)
    if (std::find(g.members.begin(), g.members.end(), m->name) == g.members.end()) g.members.push_back(m->name);
  auto layers = evalInt(*d.value, "the number of layers of param group '" + d.name + "'");
  if (!layers) return;
  if (*layers <= 0) {
    err(startLoc(*d.value), "param group '" + d.name + "' must have at least one layer, got " + std::to_string(*layers));
    return;
  }
  if (d.members.empty()) {
    err(d.loc, "param group '" + d.name + "' has no members");
    return;
  }
  g.layers = *layers;
  if (d.annot) {  // the layer dim split over a stage axis: a pipeline
    if (d.annot->replicate) {
      err(d.annot->loc, "@replicate on param group '" + d.name + "' says nothing: its layers are replicated unless "
                        "split, as @shard(" + d.annot->mesh + ", [stage])");
      return;
    }
    auto s = checkSharding(*d.annot, TensorType{DType::F32, {*layers}});
    if (!s) return;
    if (s->dims[0].empty()) {
      err(d.annot->loc, "@shard on param group '" + d.name + "' splits nothing: name the stage axis that splits its layers, "
                        "as @shard(" + s->mesh + ", [stage])");
      return;
    }
    const Mesh* mesh = mod_->findMesh(s->mesh);
    int64_t n = 1;
    std::string axes;
    for (const auto& a : s->dims[0]) {
      n *= mesh->axes[mesh->axisIndex(a)].size;
      axes += (axes.empty() ? "" : ", ") + a;
    }
    if (*layers % n != 0) {
      err(d.annot->dimLocs[0], "param group '" + d.name + "' has " + std::to_string(*layers) +
                                   " layers (L), not a multiple of the " + std::to_string(n) + " pipeline stages (S) of " +
                                   (s->dims[0].size() == 1 ? "axis '" + axes + "'" : "axes (" + axes + ")") +
                                   " of mesh '" + s->mesh + "'");
      return;
    }
    g.stageMesh = s->mesh;
    g.stageAxes = s->dims[0];
    g.stages = n;
    g.stageLoc = d.annot->loc;
  }
  std::map<std::string, SourceLoc> seen;
  for (const auto& mp : d.members) {
    const ast::Decl& m = *mp;
    if (auto it = seen.find(m.name); it != seen.end()) {
      err(m.loc, "param group '" + d.name + "' declares member '" + m.name + "' twice");
      diags_.note(it->second, "'" + m.name + "' was first declared here");
      continue;
    }
    seen[m.name] = m.loc;
    auto t = lowerType(*m.type);
    if (!t) continue;
    Param p;
    p.name = d.name + "." + m.name;
    p.type = *t;
    p.type.shape.insert(p.type.shape.begin(), *layers);
    p.loc = m.loc;
    if (!p.type.sizeFits()) {
      err(m.type->loc, "param " + p.name + " of type " + p.type.str() + " is too large: its size in bytes overflows 64 bits");
      continue;
    }
    if (m.annot) {
      auto s = checkSharding(*m.annot, *t);
      if (!s) continue;
      if (!g.stageMesh.empty() && s->mesh != g.stageMesh) {
        err(m.annot->loc, "member '" + m.name + "' is sharded over mesh '" + s->mesh + "' but param group '" + d.name +
                              "' splits its layers over mesh '" + g.stageMesh + "'");
        continue;
      }
      bool clash = false;
      for (size_t k = 0; k < s->dims.size() && !clash; ++k)
        for (const auto& a : s->dims[k])
          if (std::count(g.stageAxes.begin(), g.stageAxes.end(), a)) {
            err(m.annot->dimLocs[k], "mesh axis '" + a + "' splits the layers of param group '" + d.name +
                                         "' (its pipeline stages); it cannot also split a dim of member '" + m.name + "'");
            clash = true;
            break;
          }
      if (clash) continue;
      s->dims.insert(s->dims.begin(), g.stageAxes);  // the layer dim: the stages' axes, or unsplit
      p.sharding = s;
    } else if (!g.stageMesh.empty()) {
      Sharding s = Sharding::replicated(g.stageMesh, p.type.rank());
      s.dims[0] = g.stageAxes;
      p.sharding = s;
    }
    if (!lowerInit(*m.value, p.init)) continue;
    p.init.stacked = 1;
    if (p.type.dtype != DType::F32) {
      err(m.type->loc, "params must be f32 (trainable), got " + t->str());
      continue;
    }
    mod_->params.push_back(p);
  }
}

// Keyword arguments of a declaration's constructor call, as numbers.
bool Sema::numericKeywords(const ast::Expr& e, const std::map<std::string, double>& defaults,
                     std::map<std::string, double>& out, size_t positional, const std::string& skip) {
  out = defaults;
  std::string names;
  for (auto& [k, v] : defaults) names += (names.empty() ? "" : ", ") + k;
  for (size_t i = positional; i < e.args.size(); ++i) {
    const auto& a = e.args[i];
    if (!skip.empty() && a.keyword == skip) continue;
    if (a.keyword.empty()) {
      err(a.loc, e.text + " takes keyword arguments (" + names + ")");
      return false;
    }
    if (!defaults.count(a.keyword)) {
      std::vector<std::string> ks;
      for (auto& [k, v] : defaults) ks.push_back(k);
      err(a.loc, e.text + " has no argument '" + a.keyword + "' (it takes " + names + ")" + suggest(a.keyword, ks));
      return false;
    }
    auto n = constEval(*a.value);
    if (!n) return false;
    out[a.keyword] = n->d();
  }
  return true;
}

// A learning-rate schedule (ir::LrSchedule, docs/training.md):
// constant(peak, warmup=0), linear_decay / cosine_decay(peak, total,
// warmup=0, end=0), rsqrt_decay(peak, warmup).
bool Sema::lowerSchedule(const ast::Expr& e, LrSchedule& s) {
  static const std::map<std::string, LrSchedule::Kind> kinds = {{"constant", LrSchedule::Constant},
                                                                {"linear_decay", LrSchedule::Linear},
                                                                {"cosine_decay", LrSchedule::Cosine},
                                                                {"rsqrt_decay", LrSchedule::Rsqrt}};
  auto it = kinds.find(e.text);
  if (it == kinds.end()) {
    std::vector<std::string> names;
    for (auto& [k, v] : kinds) names.push_back(k);
    err(e.loc, "unknown learning-rate schedule '" + e.text +
                   "' (lr is a number or constant(...), linear_decay(...), cosine_decay(...) or rsqrt_decay(...))" +
                   suggest(e.text, names));
    return false;
  }
  s.kind = it->second;
  const double required = std::nan("");
  std::map<std::string, double> defaults = {{"peak", required}, {"warmup", 0}};
  if (s.kind == LrSchedule::Linear || s.kind == LrSchedule::Cosine) {
    defaults["total"] = required;
    defaults["end"] = 0;
  }
  if (s.kind == LrSchedule::Rsqrt) defaults["warmup"] = required;
  std::map<std::string, double> kw;
  if (!numericKeywords(e, defaults, kw)) return false;
  for (auto& [k, v] : kw)
    if (std::isnan(v)) {
      err(e.loc, e.text + " needs " + k + "=");
      return false;
    }
  // The location of argument `k` (the call's when it was not given).
  auto at = [&](const std::string& k) {
    for (const auto& a : e.args)
      if (a.keyword == k) return startLoc(*a.value);
    return e.loc;
  };
  for (const char* k : {"warmup", "total"}) {
    if (!kw.count(k)) continue;
    double v = kw[k];
    if (!(v >= 0) || v != std::floor(v) || v > 2147483647.0) {
      err(at(k), e.text + "'s " + k + " must be a whole number of steps, got " + formatNum(Num{false, 0, v}));
      return false;
    }
  }
  for (const char* k : {"peak", "end"}) {
    if (!kw.count(k)) continue;
    double v = kw[k];
    if (!std::isfinite(v) || v < 0 || (v == 0 && std::string(k) == "peak")) {
      err(at(k), e.text + "'s " + k + " must be " + (std::string(k) == "peak" ? "positive" : "non-negative") +
                     ", got " + formatNum(Num{false, 0, v}));
      return false;
    }
  }
  s.peak = kw["peak"];
  s.warmup = (int64_t)kw["warmup"];
  if (kw.count("end")) s.end = kw["end"];
  if (kw.count("total")) {
    s.total = (int64_t)kw["total"];
    if (s.total <= s.warmup) {
      err(at("total"), e.text + "'s total (" + std::to_string(s.total) + ") must be greater than its warmup (" +
                           std::to_string(s.warmup) + ")");
      return false;
    }
  }
  if (s.kind == LrSchedule::Rsqrt && s.warmup < 1) {
    err(at("warmup"), "rsqrt_decay's warmup must be at least 1 (the decay is peak * sqrt(warmup / step))");
    return false;
  }
  return true;
}

void Sema::declOptimizer(const ast::Decl& d) {
  // torch.optim's defaults (adafactor: GShard's). clip_norm = 0: no
  // gradient clipping.
  static const std::map<std::string, std::pair<Optimizer::Kind, std::map<std::string, double>>> kinds = {
      {"sgd", {Optimizer::SGD, {{"lr", 0.01}, {"momentum", 0.0}, {"weight_decay", 0.0}, {"clip_norm", 0.0}}}},
      {"adam",
       {Optimizer::Adam,
        {{"lr", 1e-3}, {"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0.0}, {"clip_norm", 0.0}}}},
      {"adamw",
       {Optimizer::AdamW,
        {{"lr", 1e-3}, {"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0.01}, {"clip_norm", 0.0}}}},
      {"adafactor",
       {Optimizer::Adafactor,
        {{"lr", 1e-2}, {"decay", 0.8}, {"eps", 1e-30}, {"clip", 1.0}, {"weight_decay", 0.0}, {"clip_norm", 0.0}}}},
  };
  const ast::Expr& e = *d.value;
  auto it = e.kind == ast::ExprKind::Call ? kinds.find(e.text) : kinds.end();
  if (it == kinds.end()) {
    err(e.loc, "an optimizer is sgd(...), adam(...), adamw(...) or adafactor(...)");
    return;
  }
  Optimizer o;
  o.name = d.name;
  o.kind = it->second.first;
  o.loc = d.loc;
  // lr: a number, or a schedule call (ceil/floor stay numbers).
  const ast::Expr* schedule = nullptr;
  for (const auto& a : e.args)
    if (a.keyword == "lr" && a.value->kind == ast::ExprKind::Call && a.value->text != "ceil" &&
        a.value->text != "floor")
      schedule = a.value.get();
  if (schedule && !lowerSchedule(*schedule, o.lr)) return;
  if (!numericKeywords(e, it->second.second, o.hp, 0, schedule ? "lr" : "")) return;
  if (schedule) o.hp["lr"] = o.lr.peak;
  else o.lr.peak = o.hp["lr"];
  for (auto& [k, v] : o.hp) {
    SourceLoc l = e.loc;
    for (const auto& a : e.args)
      if (a.keyword == k) l = startLoc(*a.value);
    bool unit = k == "beta1" || k == "beta2";  // in [0, 1)
    bool positive = k == "lr" || k == "clip";  // divisors
    if (!std::isfinite(v) || v < 0 || (positive && v == 0) || (unit && v >= 1)) {
      err(l, e.text + "'s " + k + " must be " + (positive ? "positive" : unit ? "in [0, 1)" : "non-negative") +
                 ", got " + formatNum(Num{false, 0, v}));
      return;
    }
  }
  mod_->optimizers.push_back(o);
}

void Sema::declDataset(const ast::Decl& d) {
  const ast::Expr& e = *d.value;
  Dataset ds;
  ds.name = d.name;
  ds.loc = d.loc;
  std::map<std::string, double> kw;
  if (e.kind == ast::ExprKind::Call && (e.text == "copy_task" || e.text == "reverse_task")) {
    ds.kind = e.text == "copy_task" ? "copy" : "reverse";
    if (!numericKeywords(e, {{"batch", 0}, {"seq", 0}, {"vocab", 0}}, kw)) return;
  } else if (e.kind == ast::ExprKind::Call && e.text == "npy_tokens") {
    ds.kind = "npy";
    if (e.args.empty() || !e.args[0].keyword.empty() || e.args[0].value->kind != ast::ExprKind::String) {
      err(e.loc, "npy_tokens takes the path of a 1-D integer .npy file first: npy_tokens(\"tokens.npy\", batch=B, seq=S)");
      return;
    }
    ds.path = e.args[0].value->text;
    // vocab= is optional: given, every token is checked to be below it.
    if (!numericKeywords(e, {{"batch", 0}, {"seq", 0}, {"vocab", -1}}, kw, 1)) return;
    if (kw["vocab"] == -1) kw.erase("vocab");
  } else if (e.kind == ast::ExprKind::Call && e.text == "npy_pairs") {
    ds.kind = "pairs";
    if (e.args.size() < 2 || !e.args[0].keyword.empty() || !e.args[1].keyword.empty() ||
        e.args[0].value->kind != ast::ExprKind::String || e.args[1].value->kind != ast::ExprKind::String) {
      err(e.loc, "npy_pairs takes the paths of the inputs and labels .npy files first: npy_pairs(\"x.npy\", \"y.npy\", batch=B, features=F)");
      return;
    }
    ds.path = e.args[0].value->text;
    ds.labelsPath = e.args[1].value->text;
    if (!numericKeywords(e, {{"batch", 0}, {"features", 0}}, kw, 2)) return;
  } else if (e.kind == ast::ExprKind::Call && e.text == "text_bytes") {
    ds.kind = "text";
    size_t n = 0;
    while (n < e.args.size() && e.args[n].keyword.empty() && e.args[n].value->kind == ast::ExprKind::String)
      ds.paths.push_back(e.args[n++].value->text);
    if (n == 0) {
      err(e.loc, "text_bytes takes the paths of one or more text files first: text_bytes(\"corpus.txt\", batch=B, seq=S, split=0.95)");
      return;
    }
    ds.path = ds.paths[0];
    // split= is optional: 1 (all of the text trains) when not given.
    if (!numericKeywords(e, {{"batch", 0}, {"seq", 0}, {"split", 1}}, kw, n)) return;
    ds.split = kw["split"];
    kw.erase("split");
    if (!(ds.split > 0 && ds.split <= 1)) {
      SourceLoc l = e.loc;
      for (const auto& a : e.args)
        if (a.keyword == "split") l = startLoc(*a.value);
      err(l, "text_bytes's split (the share of the text that trains; the rest validates) must be in (0, 1], got " +
                 formatNum(Num{false, 0, ds.split}));
      return;
    }
    ds.vocab = 256;  // a token per byte
  } else {
    err(e.loc, "a dataset is copy_task(batch=, seq=, vocab=), reverse_task(batch=, seq=, vocab=), npy_tokens(\"file.npy\", batch=, seq=), npy_pairs(\"x.npy\", \"y.npy\", batch=, features=) or text_bytes(\"corpus.txt\", batch=, seq=, split=)");
    return;
  }
  for (auto& [k, v] : kw)
    if (v < 1 || v != (double)(int64_t)v) {
      err(e.loc, e.text + " needs a positive integer '" + k + "'");
      return;
    }
  ds.batch = (int64_t)kw["batch"];
  ds.seq = (int64_t)kw["seq"];
  if (ds.kind != "text") ds.vocab = kw.count("vocab") ? (int64_t)kw["vocab"] : 0;  // npy_tokens: 0 when not given
  ds.features = kw.count("features") ? (int64_t)kw["features"] : 0;
  if ((ds.kind == "copy" || ds.kind == "reverse") && (ds.seq < 4 || ds.vocab < 3)) {
    err(e.loc, e.text + " needs seq >= 4 and vocab >= 3");
    return;
  }
  out_.host.datasets.push_back(ds);
}

const Dataset* Sema::findDataset(const std::string& n) const {
  for (const auto& d : out_.host.datasets)
    if (d.name == n) return &d;
  return nullptr;
}

bool Sema::lowerInit(const ast::Expr& e, ParamInit& init) {
  const std::string hint = "(use zeros, ones, normal(std), uniform(lo, hi) or glorot)";
  std::string name = e.kind == ast::ExprKind::Name || e.kind == ast::ExprKind::Call ? e.text : "";
  std::map<std::string, std::pair<ParamInit::Kind, size_t>> known = {
      {"zeros", {ParamInit::Zeros, 0}}, {"ones", {ParamInit::Ones, 0}},
      {"glorot", {ParamInit::Glorot, 0}}, {"normal", {ParamInit::Normal, 1}},
      {"uniform", {ParamInit::Uniform, 2}}};
  auto it = known.find(name);
  if (it == known.end()) {
    err(e.loc, (name.empty() ? std::string("invalid initializer ") : "unknown initializer '" + name + "' ") + hint);
    return false;
  }
  init.kind = it->second.first;
  size_t nargs = e.kind == ast::ExprKind::Call ? e.args.size() : 0;
  if (nargs != it->second.second || (e.kind == ast::ExprKind::Call && it->second.second == 0)) {
    err(e.loc, "initializer '" + name + "' takes " + std::to_string(it->second.second) + " argument" +
                   (it->second.second == 1 ? "" : "s") + " " + hint);
    return false;
  }
  std::vector<double> vals;
  for (const auto& a : e.args) {
    auto n = constEval(*a.value);
    if (!n) return false;
    vals.push_back(n->d());
  }
  if (init.kind == ParamInit::Normal) {
    init.a = vals[0];
    if (init.a < 0) {
      err(startLoc(*e.args[0].value), "normal's standard deviation must be >= 0");
      return false;
    }
  }
  if (init.kind == ParamInit::Uniform) {
    init.a = vals[0];
    init.b = vals[1];
    if (!(init.a < init.b)) {
      err(e.loc, "uniform(lo, hi) needs lo < hi");
      return false;
    }
  }
  return true;
}

}  // namespace gsl::frontend::sema

namespace gsl::frontend {

bool analyze(const std::vector<const ast::Decl*>& decls, const Options& opts, Diagnostics& diags,
             CheckedProgram& out) {
  sema::Sema s(opts, diags, out);
  return s.run(decls);
}

}  // namespace gsl::frontend
