#include "repl/Session.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "frontend/AST.h"
#include "ir/Loop.h"
#include "ir/OpTable.h"
#include "ir/Printer.h"
#include "passes/CostModel.h"
#include "passes/Pipeline.h"
#include "passes/ShardingPropagation.h"
#include "repl/CallPaths.h"
#include "repl/Explain.h"
#include "repl/Text.h"
#include "runtime/Host.h"

#if defined(GSL_REPL_HAVE_JIT) && __has_include("backend/jit/JitEngine.h")
#include "backend/jit/JitEngine.h"
#define GSL_REPL_JIT 1
#endif

namespace gsl::repl {

namespace fs = std::filesystem;
using frontend::HostStmt;
using ir::Sharding;

namespace {

const char* kMarker = "@@gsl-repl-output@@";
const char* kValueName = "__repl_value";
const std::string kLetValue = std::string("let ") + "__repl_value" + " = ";

const std::set<std::string> kDeclKeywords = {"import", "const", "mesh", "param", "fn", "optimizer", "dataset"};

bool startsWith(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

// :load's argument: the .gsl files and the folders that `word` begins
// (hidden ones only when it names them).
std::vector<std::string> completeFiles(const std::string& word) {
  std::set<std::string> out;
  size_t slash = word.rfind('/');
  std::string dir = slash == std::string::npos ? "" : word.substr(0, slash + 1);
  std::string base = slash == std::string::npos ? word : word.substr(slash + 1);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir.empty() ? "." : dir, ec)) {
    std::string f = e.path().filename().string();
    if (!startsWith(f, base) || (base.empty() && f[0] == '.')) continue;
    bool isDir = e.is_directory(ec);
    if (!isDir && e.path().extension() != ".gsl") continue;
    out.insert(dir + f + (isDir ? "/" : ""));
  }
  return {out.begin(), out.end()};
}

std::unique_ptr<ir::Function> perRank(const ir::Module& m, const ir::Function& f) {
  auto c = f.clone();
  return passes::buildPerRankProgram(m, *c, false);
}

// Values of `f` named `name` (args first, then lets in order).
std::vector<ir::Value*> valuesNamed(ir::Function& f, const std::string& name) {
  std::vector<ir::Value*> r;
  if (name.empty()) return r;  // unnamed values are not found by name
  if (name == "return") return f.results;
  for (auto* a : f.args)
    if (a->name == name) r.push_back(a);
  for (auto& op : f.ops)
    if (op->result->name == name) r.push_back(op->result);
  return r;
}

// A value of a loop body named as the user wrote it (a let inside the
// `for`, a carried name reassigned there), with the loop it is in.
struct LoopValue {
  ir::Value* value;
  const ir::Op* loop;                    // the innermost loop op holding it
  std::vector<const ir::Op*> enclosing;  // the loops around that one, outermost first
};

// Values named `name` in the bodies of `f`'s loops (recursively, outer
// loops first). In a body, the values its statements define; only when
// none has the name, its arguments (the loop index, a carried value as it
// enters an iteration).
std::vector<LoopValue> loopValuesNamed(ir::Function& f, const std::string& name,
                                       const std::vector<const ir::Op*>& enclosing = {}) {
  std::vector<LoopValue> r;
  if (name.empty()) return r;
  for (auto& op : f.ops) {
    if (!op->body) continue;
    ir::Function& body = *op->body;
    size_t before = r.size();
    for (auto& bop : body.ops)
      if (bop->result->name == name) r.push_back({bop->result, op.get(), enclosing});
    if (r.size() == before)
      for (auto* a : body.args)
        if (a->name == name) r.push_back({a, op.get(), enclosing});
    std::vector<const ir::Op*> inside = enclosing;
    inside.push_back(op.get());
    for (auto& inner : loopValuesNamed(body, name, inside)) r.push_back(inner);
  }
  return r;
}

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

// How :cost, :spmd and :try title the training step.
std::string stepTitle(const Build& b, const Step& st) {
  const std::string& o = st.thunk->fn->train->optimizer;
  return "the training step " + o + ".minimize(" + st.loss + ", ...) at " + b.where(st.thunk->loc) +
         " (forward, backward and " + o + "'s update)";
}

// Whether the program declares a tensor function `name` (generic or not).
bool isFunctionDecl(const Build& b, const std::string& name) {
  for (const auto& a : b.prog->asts)
    for (const auto& d : a->decls)
      if (d->kind == ast::DeclKind::Fn && d->name == name && name != "main") return true;
  return false;
}

// For a name of a param group itself (GROUP) or of a member it does not
// have (GROUP.NOPE): what to say instead; "" for every other name.
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

// "the loop `for l in 0..3` at FILE:L:C": how the REPL names a loop.
std::string loopText(const Build& b, const ir::Op& loop) {
  const ir::LoopInfo info(loop);
  std::string var = loop.body && !loop.body->args.empty() && !loop.body->args[0]->name.empty()
                        ? loop.body->args[0]->name
                        : "i";
  std::string at = b.where(loop.loc);
  return "the loop over " + var + " (" + std::to_string(info.trip) + " iterations" +
         (at.empty() ? std::string(")") : ", at " + at + ")");
}

// The note printed under a loop body's value.
std::string insideLoopNote(const Build& b, const ir::Op& loop) {
  return "  (inside " + loopText(b, loop) +
         ": one sharding for every iteration, as a loop body is partitioned once)\n";
}

}  // namespace

// ------------------------------------------------------------------ Assembled, Build

void Assembled::add(const std::string& piece, const std::string& display, int firstColShift) {
  int line = 1;
  size_t start = 0;
  while (true) {
    size_t nl = piece.find('\n', start);
    lines.push_back({display, display == "<repl>" ? 0 : line, line == 1 ? firstColShift : 0});
    if (nl == std::string::npos) break;
    start = nl + 1;
    ++line;
  }
  text += piece + "\n";
}

std::string Build::where(SourceLoc l) const {
  if (!l.valid()) return "";
  int col = l.col;
  std::string name = sm->name(l.file);
  int line = l.line;
  if (l.file == mainFile && l.line >= 1 && l.line <= (int)src.lines.size()) {
    const LineOrigin& o = src.lines[l.line - 1];
    if (o.line == 0) return "<repl>";
    name = o.display;
    line = o.line;
    col = std::max(1, col - o.colShift);
  }
  return name + ":" + std::to_string(line) + ":" + std::to_string(col);
}

std::string Build::render(const Diagnostic& d) const {
  const char* sev = d.severity == Severity::Error ? "error" : "note";
  if (!d.loc.valid()) return std::string("gsl: ") + sev + ": " + d.message + "\n";
  std::string line = sm->lineText(d.loc.file, d.loc.line);
  int col = d.loc.col;
  if (d.loc.file == mainFile && d.loc.line >= 1 && d.loc.line <= (int)src.lines.size()) {
    int shift = src.lines[d.loc.line - 1].colShift;
    if (shift > 0 && (int)line.size() >= shift) {
      line = line.substr(shift);
      col = std::max(1, col - shift);
    }
  }
  std::string out = where(d.loc) + ": " + sev + ": " + d.message + "\n    " + line + "\n    ";
  for (int i = 1; i < col && i - 1 < (int)line.size(); ++i) out += line[i - 1] == '\t' ? '\t' : ' ';
  return out + "^\n";
}

void Build::printDiagnostics(std::ostream& os) const {
  for (const auto& d : diags->all()) os << render(d);
}

// ------------------------------------------------------------------ Session

Session::Session(std::ostream& out, bool color, int64_t np, std::map<std::string, int64_t> defines)
    : out_(out), color_(color), np_(np), defines_(std::move(defines)) {
  refreshNames();
}

Session::~Session() = default;

const std::vector<std::string>& Session::commandNames() {
  static std::vector<std::string> n = [] {
    std::vector<std::string> r;
    for (const auto& c : commands()) r.push_back(std::string(":") + c.name);
    return r;
  }();
  return n;
}

std::string Session::paint(const std::string& s, const char* code) const {
  return color_ ? std::string("\033[") + code + "m" + s + "\033[0m" : s;
}

void Session::error(const std::string& msg) const { out_ << paint("error:", "1;31") << " " << msg << "\n"; }

Assembled Session::assemble(const Entry* extra, Extra kind, bool withMain, bool fileMain) const {
  Assembled a;
  auto input = [](const Entry& e) { return "<input " + std::to_string(e.number) + ">"; };
  if (!file_.empty()) {
    std::string t = fileMain ? fileSource_ : fileText_;
    if (!t.empty() && t.back() == '\n') t.pop_back();
    a.add(t, file_);
  }
  for (const auto& e : decls_) a.add(e.text, input(e));
  if (kind == Extra::Decl) a.add(extra->text, input(*extra));
  if (!withMain || fileMain) return a;
  a.add("fn main() {", "<repl>");
  for (const auto& e : host_) a.add(e.text, input(e));
  std::string marker = std::string("print(\"") + kMarker + "\")";
  switch (kind) {
    case Extra::Stmt:
      a.add(marker, "<repl>");
      a.add(extra->text, input(*extra));
      break;
    case Extra::Expr:
      a.add(marker, "<repl>");
      a.add(kLetValue + extra->text, input(*extra), (int)kLetValue.size());
      a.add(std::string("print(") + kValueName + ")", "<repl>");
      break;
    case Extra::ExprNoRun: a.add(kLetValue + extra->text, input(*extra), (int)kLetValue.size()); break;
    default: break;
  }
  a.add("}", "<repl>");
  return a;
}

std::unique_ptr<Build> Session::compile(const Assembled& a, const std::map<std::string, std::string>& importTexts) const {
  auto b = std::make_unique<Build>();
  b->src = a;
  b->mainDisplay = file_.empty() ? "<repl>" : file_;
  // -D applies to consts as they get declared: a define naming no const
  // (yet) is left out rather than being an error.
  b->sm = std::make_unique<SourceManager>();
  b->diags = std::make_unique<Diagnostics>(*b->sm);
  frontend::Options o;
  o.np = np_;
  o.importPath = frontend::defaultImportPath();
  o.defines = defines_;
  o.definesMayNameNoConst = true;
  o.importTexts = importTexts;
  b->prog = frontend::compileSource(b->mainDisplay, a.text, o, *b->sm, *b->diags);
  if (b->prog) {
    // The pipeline rebuilds loop bodies without their let names: keep them.
    std::vector<std::unique_ptr<ir::Function>> named;
    for (const auto& f : b->prog->module->functions) {
      named.push_back(f->clone());
      copyNames(*f, *named.back());
    }
    passes::runGlobalPipeline(*b->prog->module);
    for (size_t i = 0; i < named.size(); ++i)
      if (ir::Function* f = b->prog->module->findFunction(named[i]->name)) copyBodyNames(*named[i], *f);
  }
  return b;
}

bool Session::run(const Build& b, std::string& shown) const {
  std::ostringstream os;
  runtime::RunOptions ro;
  ro.engine = runtime::Engine::Interp;
  ro.out = &os;
  Diagnostics rd(*b.sm);
  bool ok = runtime::runMain(*b.prog, ro, rd);
  if (!ok) {
    for (const auto& d : rd.all()) out_ << b.render(d);
    return false;
  }
  std::string s = os.str(), m = std::string(kMarker) + "\n";
  size_t p = s.find(m);
  shown = p == std::string::npos ? "" : s.substr(p + m.size());
  return true;
}

Build* Session::current() {
  if (!current_) current_ = compile(assemble(nullptr, Extra::None));
  if (!current_->ok()) {
    current_->printDiagnostics(out_);
    current_.reset();
    return nullptr;
  }
  return current_.get();
}

void Session::commit() {
  current_.reset();
  forgetStep();
  refreshNames();
}

void Session::forgetStep() {
  stepSought_ = false;
  step_.reset();
  stepBuild_.reset();
}

const Step* Session::step(const Build** where) {
  if (!stepSought_) {
    Build* b = current();
    if (!b) return nullptr;
    stepSought_ = true;
    step_ = findStep(*b);
    if (!step_ && fileHadMain_) {
      stepBuild_ = compile(assemble(nullptr, Extra::None, false, true));
      if (stepBuild_->ok()) step_ = findStep(*stepBuild_);
      if (!step_) stepBuild_.reset();
    }
  }
  if (where) *where = !step_ ? nullptr : stepBuild_ ? stepBuild_.get() : current_.get();
  return step_.get();
}

std::vector<PathRoot> Session::roots(Build& b) {
  const Build* sb = nullptr;
  const Step* st = step(&sb);
  return pathRoots(b, sb, st);
}

void Session::refreshNames() {
  std::set<std::string> n = {"NP"};
  Build* b = nullptr;
  if (!file_.empty() || !decls_.empty() || !host_.empty()) {
    if (!current_) current_ = compile(assemble(nullptr, Extra::None));
    if (current_->ok()) b = current_.get();
  }
  if (b) {
    for (const auto& p : b->prog->asts)
      for (const auto& d : p->decls) {
        if (d->kind == ast::DeclKind::Import || d->name == "main") continue;
        n.insert(d->name);
        for (const auto& a : d->axes) n.insert(a.name);
        for (const auto& m : d->members) n.insert(d->name + "." + m->name);  // a param group's
        if (d->kind != ast::DeclKind::Fn) continue;
        n.insert(d->name + ".return");
        for (const auto& a : d->args) {
          n.insert(a.name);
          n.insert(d->name + "." + a.name);
        }
        // Lets, also those in loop bodies (and the loop index).
        std::function<void(const ast::Block&)> lets = [&](const ast::Block& blk) {
          for (const auto& s : blk) {
            if (s->kind == ast::StmtKind::Let || s->kind == ast::StmtKind::LetTuple ||
                (s->kind == ast::StmtKind::For && !s->names.empty()))
              for (const auto& x : s->kind == ast::StmtKind::For ? std::vector<std::string>{s->names[0]} : s->names) {
                n.insert(x);
                n.insert(d->name + "." + x);
              }
            lets(s->body);
            lets(s->elseBody);
          }
        };
        lets(d->body);
      }
    std::function<void(const std::vector<HostStmt>&)> walk = [&](const std::vector<HostStmt>& body) {
      for (const auto& s : body) {
        if (s.kind == HostStmt::Let) n.insert(s.names.begin(), s.names.end());
        walk(s.body);
        walk(s.elseBody);
      }
    };
    walk(b->prog->host.body);
  }
  names_.assign(n.begin(), n.end());
}

std::vector<std::string> Session::complete(const std::string& before, size_t& wordStart) const {
  std::set<std::string> out;
  size_t first = before.find_first_not_of(" \t");
  // An argument its command completes in its own way (:load FILE).
  if (first != std::string::npos)
    for (const auto& c : commands())
      if (c.complete && startsWith(before.substr(first), std::string(":") + c.name + " ")) {
        wordStart = before.find_last_of(" \t") + 1;
        return c.complete(before.substr(wordStart));
      }
  size_t s = before.size();
  while (s > 0) {
    char c = before[s - 1];
    if (std::isalnum((unsigned char)c) || c == '_' || c == '.' || c == ':' || c == '@') --s;
    else break;
  }
  wordStart = s;
  std::string word = before.substr(s);
  if (!word.empty() && word[0] == ':') {
    if (s != first) return {};
    for (const auto& c : commandNames())
      if (startsWith(c, word)) out.insert(c);
    return {out.begin(), out.end()};
  }
  if (word.empty()) return {};
  static const std::vector<std::string> fixed = [] {
    std::vector<std::string> r = {"print", "save", "load", "exists", "let", "fn", "param", "const", "mesh",
                                  "import", "for", "in", "if", "else", "return", "true", "false", "and",
                                  "or", "not", "f32", "i32", "bool", "@shard", "@replicate", "zeros", "ones",
                                  "normal", "uniform", "glorot"};
    for (const auto& op : ir::allOps())
      if (op.builtin) r.push_back(op.builtin);
    return r;
  }();
  for (const auto* list : {&fixed, &names_})
    for (const auto& c : *list)
      if (startsWith(c, word)) out.insert(c);
  return {out.begin(), out.end()};
}

// ------------------------------------------------------------------ inputs

void Session::handle(const std::string& raw) {
  std::string input = trim(raw);
  if (input.empty()) return;
  if (input[0] == ':') {
    command(input);
    out_.flush();
    return;
  }
  auto toks = tokenize(input);
  if (toks.empty()) return;  // a comment
  const std::string& first = toks[0].text;
  bool ident = toks[0].kind == Token::Ident;
  auto tok = [&](size_t i) { return i < toks.size() ? toks[i].text : std::string(); };
  if (ident && kDeclKeywords.count(first)) declaration(input);
  else if (ident && (first == "let" || first == "for" || first == "if")) statement(input);
  else if (ident && (first == "print" || first == "save") && tok(1) == "(") statement(input);
  else if (ident && tok(1) == "=") statement(input);
  else if (ident && tok(1) == "." && toks.size() > 3 && tok(3) == "(") statement(input);
  else expression(input);
  out_.flush();
}

void Session::declaration(const std::string& text) {
  auto toks = tokenize(text);
  if (toks.size() > 1 && toks[0].text == "fn" && toks[1].text == "main") {
    error("fn main is the session's host script: type its statements (let, print, ...) at the prompt");
    return;
  }
  Entry e{++counter_, text};
  auto b = compile(assemble(&e, Extra::Decl));
  if (!b->ok()) {
    b->printDiagnostics(out_);
    return;
  }
  decls_.push_back(e);
  commit();
}

// Compiles the session with `e` added as `kind` and runs it, printing what
// `e` printed; on an error prints it and returns null.
std::unique_ptr<Build> Session::compileAndRun(const Entry& e, Extra kind) {
  auto b = compile(assemble(&e, kind));
  if (!b->ok()) {
    b->printDiagnostics(out_);
    return nullptr;
  }
  std::string shown;
  if (!run(*b, shown)) return nullptr;
  out_ << shown;
  return b;
}

void Session::statement(const std::string& text) {
  Entry e{++counter_, text};
  auto b = compileAndRun(e, Extra::Stmt);
  if (!b) return;
  const auto& body = b->prog->host.body;
  if (!body.empty() && body.back().kind == HostStmt::Let) {
    auto vars = simulateHost(*b);
    for (const auto& n : body.back().names) out_ << n << ": " << typeLine(vars[n].type, vars[n].sharding) << "\n";
  }
  host_.push_back(e);
  commit();
}

void Session::expression(const std::string& text) {
  Entry e{++counter_, text};
  auto b = compileAndRun(e, Extra::Expr);
  if (!b) return;
  auto vars = simulateHost(*b);
  const HostVar& v = vars[kValueName];
  out_ << typeLine(v.type, v.sharding) << "\n";
}

std::string Session::typeLine(const ir::TensorType& t, const std::optional<Sharding>& s) const {
  std::string sh = s && !s->mesh.empty() && !s->isReplicated() ? s->str() : "(replicated)";
  return t.str() + " " + paint(sh, "36");
}

std::map<std::string, HostVar> Session::simulateHost(const Build& b) const {
  runtime::PerRankPrograms programs(*b.prog->module);
  runtime::ShardingWalk walk(programs);
  return walk.walk(b.prog->host.body);
}

// ------------------------------------------------------------------ commands

void Session::command(const std::string& text) {
  size_t sp = text.find_first_of(" \t\n");
  std::string name = text.substr(1, sp == std::string::npos ? std::string::npos : sp - 1);
  std::string arg = sp == std::string::npos ? "" : trim(text.substr(sp));
  if (name == "q" || name == "exit") name = "quit";
  // The command named, or the ones the name abbreviates.
  std::vector<const Command*> hits;
  for (const auto& c : commands()) {
    if (name == c.name) {
      hits = {&c};
      break;
    }
    if (!name.empty() && startsWith(c.name, name)) hits.push_back(&c);
  }
  if (hits.size() != 1) {
    if (hits.empty()) error("unknown command ':" + name + "' (:help lists the commands)");
    else {
      std::string l;
      for (const auto* h : hits) l += std::string(l.empty() ? ":" : ", :") + h->name;
      error("':" + name + "' is ambiguous: " + l);
    }
    return;
  }
  const Command& c = *hits[0];
  if (c.needs && arg.empty()) {
    error(std::string(":") + c.name + " needs " + c.needs);
    return;
  }
  c.run(*this, arg);
}

const std::vector<Command>& Session::commands() {
  using S = Session;
  using A = const std::string&;
  static const std::vector<Command> c = {
      {"help", "", "this list", nullptr, nullptr, [](S& s, A) { s.help(); }},
      {"load", "FILE", "start a new session from FILE (its fn main is not run)", "a file", completeFiles,
       [](S& s, A a) { s.load(a); }},
      {"reload", "", "re-read the loaded file, keeping what was typed", nullptr, nullptr,
       [](S& s, A) { s.reload(); }},
      {"reset", "", "forget everything: an empty session", nullptr, nullptr, [](S& s, A) { s.reset(); }},
      {"np", "N", "recompile everything for N ranks", "a number of ranks", nullptr, [](S& s, A a) { s.setNp(a); }},
      {"type", "EXPR", "the type and sharding of EXPR, without running it", "an expression", nullptr,
       [](S& s, A a) { s.typeOf(a); }},
      {"sharding", "NAME",
       "NAME's sharding and why (a param or GROUP.MEMBER, a host variable, FN.VALUE, a call path, grad(w), opt.m(w))",
       "a name", nullptr, [](S& s, A a) { s.sharding(a); }},
      {"show", "NAME", "how NAME's blocks lie on the devices", "a name", nullptr, [](S& s, A a) { s.show(a); }},
      {"spmd", "FN", "the per-rank program of FN (or of the training step: step), collectives marked", "a function",
       nullptr, [](S& s, A a) { s.spmd(a); }},
      {"cost", "FN", "per-rank FLOPs, memory, collective bytes and an estimated time of FN (or step)", "a function",
       nullptr, [](S& s, A a) { s.cost(a); }},
      {"try", "NAME @shard(...)", "the costs that change with another annotation on NAME (param, argument, FN.VALUE)",
       "a name and an annotation: :try w1 @shard(m, [model, _])", nullptr,
       [](S& s, A a) { s.tryAnnotation(a); }},
      {"plans", "FN.VALUE", "the candidate plans of the op making VALUE, their costs, the one chosen and why",
       "FN.VALUE: a let of a tensor function", nullptr, [](S& s, A a) { s.plans(a); }},
      {"ir", "[FN]", "the global IR of the session (or of FN)", nullptr, nullptr, [](S& s, A a) { s.ir(a); }},
      {"llvm", "FN", "the LLVM IR of FN's per-rank program", "a function", nullptr, [](S& s, A a) { s.llvm(a); }},
      {"quit", "", "leave (also Ctrl-D)", nullptr, nullptr, [](S& s, A) { s.quit_ = true; }},
  };
  return c;
}

void Session::help() {
  out_ << "Type GSL at the prompt:\n"
          "  declarations   const, mesh, param, fn, import: added to the session\n"
          "  statements     let x = ..., x = ..., print(...), save(...), for, if: the session's fn main\n"
          "  expressions    print their value, type and sharding\n"
          "A line that leaves a bracket open continues on the next. Commands:\n";
  size_t w = 0;
  for (const auto& c : commands()) w = std::max(w, std::string(c.name).size() + std::string(c.args).size() + 2);
  for (const auto& c : commands()) {
    std::string head = std::string(":") + c.name + (c.args[0] ? std::string(" ") + c.args : "");
    out_ << "  " << head << std::string(w + 1 - head.size(), ' ') << "  " << c.help << "\n";
  }
  out_ << "Commands may be abbreviated (:q). Tab completes commands, names and builtins.\n";
}

bool Session::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::error_code ec;
  if (!in || fs::is_directory(path, ec)) {
    error(path + ": " + (fs::exists(path, ec) ? "cannot be read" : "no such file"));
    return false;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  bool hadMain = false;
  std::string text = blankMain(ss.str(), hadMain);
  // Try the new session; keep the old one if the file does not check.
  auto saved = std::make_tuple(file_, fileText_, fileSource_, fileHadMain_, decls_, host_);
  file_ = path;
  fileText_ = text;
  fileSource_ = ss.str();
  fileHadMain_ = hadMain;
  decls_.clear();
  host_.clear();
  auto b = compile(assemble(nullptr, Extra::None));
  if (!b->ok()) {
    b->printDiagnostics(out_);
    std::tie(file_, fileText_, fileSource_, fileHadMain_, decls_, host_) = saved;
    out_ << "(" << path << " not loaded; the session is unchanged)\n";
    return false;
  }
  const ir::Module& m = *b->prog->module;
  std::ostringstream os;
  os << "loaded " << path << " (np = " << m.np << ")";
  for (const auto& mesh : m.meshes) os << "; " << meshText(mesh);
  if (!m.params.empty()) {
    os << "; params";
    for (const auto& p : m.params) os << " " << p.name;
  }
  std::vector<std::string> fns;
  for (const auto& p : b->prog->asts)
    for (const auto& d : p->decls)
      if (d->kind == ast::DeclKind::Fn && d->name != "main" && p->file == b->mainFile) fns.push_back(d->name);
  if (!fns.empty()) {
    os << "; fns";
    for (const auto& f : fns) os << " " << f;
  }
  out_ << os.str() << "\n";
  if (hadMain) out_ << "(its fn main is not run: type statements at the prompt)\n";
  forgetStep();
  current_ = std::move(b);
  refreshNames();
  return true;
}

void Session::reload() {
  if (file_.empty()) {
    error("no file is loaded (:load FILE)");
    return;
  }
  std::ifstream in(file_, std::ios::binary);
  if (!in) {
    error(file_ + ": cannot be read");
    return;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  bool hadMain = false;
  std::string oldText = fileText_, oldSource = fileSource_;
  fileText_ = blankMain(ss.str(), hadMain);
  fileSource_ = ss.str();
  auto b = compile(assemble(nullptr, Extra::None));
  std::string shown;
  if (!b->ok() || !run(*b, shown)) {
    if (!b->ok()) b->printDiagnostics(out_);
    fileText_ = oldText;
    fileSource_ = oldSource;
    out_ << "(not reloaded; the session is unchanged)\n";
    return;
  }
  fileHadMain_ = hadMain;
  out_ << "reloaded " << file_ << "\n";
  commit();
}

void Session::reset() {
  file_.clear();
  fileText_.clear();
  fileSource_.clear();
  decls_.clear();
  host_.clear();
  commit();
  out_ << "the session is empty (np = " << np_ << ")\n";
}

void Session::setNp(const std::string& arg) {
  char* end = nullptr;
  long long n = std::strtoll(arg.c_str(), &end, 10);
  if (*end != '\0' || n < 1 || n > (1 << 20)) {
    error(":np needs a number of ranks from 1 to 1048576, got '" + arg + "'");
    return;
  }
  int64_t old = np_;
  np_ = n;
  auto b = compile(assemble(nullptr, Extra::None));
  std::string shown;
  if (!b->ok() || !run(*b, shown)) {
    if (!b->ok()) b->printDiagnostics(out_);
    np_ = old;
    out_ << "(np stays " << old << ")\n";
    return;
  }
  out_ << "np = " << np_;
  for (const auto& m : b->prog->module->meshes) out_ << "; " << meshText(m);
  out_ << "\n";
  commit();
}

void Session::typeOf(const std::string& expr) {
  Entry e{++counter_, expr};
  auto b = compile(assemble(&e, Extra::ExprNoRun));
  if (!b->ok()) {
    b->printDiagnostics(out_);
    return;
  }
  auto vars = simulateHost(*b);
  out_ << typeLine(vars[kValueName].type, vars[kValueName].sharding) << "\n";
}

ir::Function* Session::userFunction(Build& b, const std::string& name, bool report) {
  ir::Function* f = b.prog->module->findFunction(name);
  if (f) return f;
  if (!report) return nullptr;
  for (const auto& p : b.prog->asts)
    for (const auto& d : p->decls)
      if (d->kind == ast::DeclKind::Fn && d->name == name) {
        if (name == "main") error("fn main is the host script; it has no IR of its own (its tensor math is in thunks main.0, main.1, ...)");
        else error("fn " + name + " is generic (shape variables): it has IR only inlined into its callers");
        return nullptr;
      }
  std::string known;
  for (const auto& n : b.prog->userFunctions) known += (known.empty() ? "" : ", ") + n;
  error("no function '" + name + "'" + (known.empty() ? " (the session has none)" : " (functions: " + known + ")"));
  return nullptr;
}

void Session::sharding(const std::string& name) {
  Build* b = current();
  if (!b) return;
  if (std::string h = groupHint(*b, name); !h.empty()) {
    error(h);
    return;
  }
  const ir::Module& mod = *b->prog->module;
  // FN.VALUE, or a let / argument name of some function.
  // Values of f's loop bodies are found too, each with a note that says
  // which loop it is in.
  auto explainIn = [&](ir::Function& f, const std::string& v, const std::string& label) {
    auto c = propagated(mod, f);
    auto vals = valuesNamed(*c, v);
    auto inLoops = loopValuesNamed(*c, v);
    const size_t n = vals.size() + inLoops.size();
    size_t k = 0;
    auto tagged = [&]() { return label + (n > 1 ? "#" + std::to_string(k++) : ""); };
    ValueContext ctx{*b, mod, f.name};
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
    ValueContext ctx{*b, mod, ""};
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
      auto c = propagated(mod, *f);
      for (auto& op : c->ops)
        if (op->kind == ir::OpKind::Param && op->attrs.getString("name") == name && op->result->shardingVia &&
            !sameLayout(op->result->sharding, p->sharding)) {
          ValueContext fc{*b, mod, fname};
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
    passes::propagateShardings(mod, *f);
    f->renumber();
    ValueContext ctx{*b, mod, "", &v.thunk->leaves, name};
    out_ << explainSharding(ctx, *f->results[v.result], name);
    return;
  }
  bool any = false;
  for (const auto& fname : b->prog->userFunctions)
    if (ir::Function* f = mod.findFunction(fname)) any |= explainIn(*f, name, fname + "." + name);
  if (any) return;
  if (mod.findFunction(name)) {
    ir::Function* f = mod.findFunction(name);
    auto c = propagated(mod, *f);
    ValueContext ctx{*b, mod, f->name};
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
      ValueContext ctx{rb, m, root->fn, root->leaves};
      ctx.loop = pv->loop;
      ctx.enclosing = pv->enclosing;
      out_ << explainSharding(ctx, *pv->value, label);
    }
    if (pv->loop) out_ << insideLoopNote(rb, *pv->loop);
  }
  return !r.values.empty();
}

void Session::show(const std::string& name) {
  Build* b = current();
  if (!b) return;
  if (std::string h = groupHint(*b, name); !h.empty()) {
    error(h);
    return;
  }
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

bool Session::program(const std::string& fn, Program& p) {
  Build* b = current();
  if (!b) return false;
  const Build* sb = nullptr;
  if (fn == "step" && !b->prog->module->findFunction(fn) && !isFunctionDecl(*b, fn)) {
    const Step* st = step(&sb);
    if (!st) {
      error("fn main runs no opt.minimize(...): there is no training step (:cost step and :spmd step show it)");
      return false;
    }
    p = {sb, st->thunk->fn, st->perRank->clone(), stepTitle(*sb, *st)};
    return true;
  }
  ir::Function* f = userFunction(*b, fn, true);
  if (!f) return false;
  p = {b, f, perRank(*b->prog->module, *f), "fn " + fn};
  return true;
}

void Session::spmd(const std::string& fn) {
  Program p;
  if (!program(fn, p)) return;
  const Build* b = p.build;
  const ir::Module& mod = *b->prog->module;
  auto& local = p.local;
  out_ << "# per-rank program of " << (p.global->train ? p.title : fn) << " for np = " << mod.np
       << " (one program, run by every rank)\n";
  for (const auto& m : mod.meshes) out_ << "# " << m.str() << "\n";
  // The collectives, from the ops; their lines of the printed program are
  // marked by the values they define.
  std::string text = ir::printFunction(*local);  // numbers the values
  // Collectives in loop bodies (at any depth) are marked too and counted
  // apart: they run once per iteration.
  std::map<std::string, int> count, inLoops;
  std::set<std::string> marked;
  std::function<void(const ir::Function&, bool)> mark = [&](const ir::Function& g, bool inLoop) {
    for (const auto& op : g.ops) {
      if (op->info().volume) {  // the collectives that communicate (op table)
        ++(inLoop ? inLoops : count)[op->info().mnemonic];
        marked.insert("%" + std::to_string(op->result->id) + " = ");
      }
      if (op->body) mark(*op->body, true);
    }
  };
  mark(*local, false);
  std::istringstream lines(text);
  for (std::string l; std::getline(lines, l);) {
    size_t st = l.find_first_not_of(' '), eq = l.find(" = ");
    bool coll = st != std::string::npos && eq != std::string::npos && eq > st &&
                marked.count(l.substr(st, eq + 3 - st)) > 0;
    if (color_) out_ << (coll ? paint(l, "1;33") : l) << "\n";
    else out_ << (coll ? ">> " : "   ") << l << "\n";
  }
  if (count.empty() && inLoops.empty()) out_ << "# no collectives: every rank computes on its own blocks\n";
  else {
    out_ << "# collectives:";
    for (const auto& [k, n] : count) out_ << " " << n << " " << k;
    if (!inLoops.empty()) {
      out_ << (count.empty() ? "" : ";") << " in loop bodies, each iteration:";
      for (const auto& [k, n] : inLoops) out_ << " " << n << " " << k;
      out_ << " (:cost counts them per iteration x trip count)";
    }
    out_ << "\n";
  }
}

void Session::cost(const std::string& fn) {
  Program p;
  if (!program(fn, p)) return;
  const Build* b = p.build;
  const ir::Function* f = p.global;
  const ir::Module& mod = *b->prog->module;
  auto& local = p.local;
  passes::Cost c = passes::estimateCost(mod, *local);
  out_ << p.title << ", per rank (np = " << mod.np << "):\n" << costTable({&c}, {""});
  // A training step: what it holds per rank, as `gsl compile --stats
  // json`'s "training" counts it (states as the step's arguments lie, split
  // over the data axes by weight-update sharding or FSDP).
  if (f->train && f->train->kind == ir::TrainRequest::Minimize && local->args.size() >= f->train->states.size()) {
    const ir::TrainRequest& tr = *f->train;
    uint64_t params = 0, grads = 0, states = 0;
    for (const auto& q : mod.params)
      params += (uint64_t)ir::TensorType{q.type.dtype, ir::localShape(mod, q.type, q.sharding)}.byteSize();
    for (size_t i = 1; i <= tr.params.size() && i < local->results.size(); ++i)
      grads += (uint64_t)local->results[i]->type.byteSize();
    for (size_t k = local->args.size() - tr.states.size(); k < local->args.size(); ++k)
      states += (uint64_t)local->args[k]->type.byteSize();
    out_ << "  training memory: params " << thousands(params) << " B, gradients " << thousands(grads)
         << " B, optimizer states " << thousands(states) << " B (weight-update sharding "
         << (mod.updateSharding ? "on" : "off") << ")\n";
  }
  // Its loops: the totals above count each body once per iteration.
  std::vector<const ir::Op*> loops, named;
  collectLoops(*local, loops);
  collectLoops(*f, named);
  std::map<const ir::Op*, const ir::Op*> parentOf;  // a loop in a loop body -> that loop
  std::function<void(const ir::Function&, const ir::Op*)> parents = [&](const ir::Function& g, const ir::Op* p) {
    for (const auto& op : g.ops)
      if (op->body) {
        parentOf[op.get()] = p;
        parents(*op->body, op.get());
      }
  };
  parents(*local, nullptr);
  auto nameOf = [&](size_t i) -> const ir::Op& {
    return i < named.size() && loops.size() == named.size() ? *named[i] : *loops[i];
  };
  for (size_t i = 0; i < loops.size(); ++i) {
    const ir::Op& loop = nameOf(i);
    std::string where = "included above";
    if (const ir::Op* p = parentOf[loops[i]]) {
      size_t pi = std::find(loops.begin(), loops.end(), p) - loops.begin();
      where = "included in each iteration of " + loopText(*b, nameOf(pi));
    }
    const int64_t trip = ir::LoopInfo(*loops[i]).trip;
    passes::Cost one = passes::estimateCost(mod, *loops[i]->body);
    passes::Cost all = one;
    all.flops *= (uint64_t)trip;
    for (auto& [k, v] : all.collectives) v.calls *= (uint64_t)trip, v.bytes *= (uint64_t)trip;
    out_ << "inside " << loopText(*b, loop) << ", " << where << ": per iteration x " << trip << "\n"
         << costTable({&one, &all}, {"per iteration", "x " + std::to_string(trip)});
  }
  out_ << machineModelLine();
}

void Session::tryAnnotation(const std::string& args) {
  size_t sp = args.find_first_of(" \t");
  std::string name = args.substr(0, sp);
  std::string annot = sp == std::string::npos ? "" : trim(args.substr(sp));
  if (!(startsWith(annot, "@shard") || startsWith(annot, "@replicate")) || annot.find('\n') != std::string::npos) {
    error("usage: :try NAME @shard(MESH, [...])  (NAME: a param, an argument, FN.ARG or FN.VALUE)");
    return;
  }
  Build* b = current();
  if (!b) return;
  if (std::string h = groupHint(*b, name); !h.empty()) {
    error(h);
    return;
  }
  // Find the declaration: a param, or a function argument.
  // FN.NAME; of a call path (loss.logits.h), the last function and name:
  // the declaration is the one of that function, for every call of it.
  std::string fnName, argName = name;
  if (size_t dot = name.rfind('.'); dot != std::string::npos) {
    size_t from = dot == 0 ? std::string::npos : name.rfind('.', dot - 1);
    from = from == std::string::npos ? 0 : from + 1;
    fnName = name.substr(from, dot - from);
    argName = name.substr(dot + 1);
  }
  struct Hit {
    const ast::Decl* decl;
    const ast::TypeExpr* type;
    const ast::ShardAnnot* annot;
    int file;
    std::string what;
  };
  std::vector<Hit> hits;
  // A param-group member GROUP.MEMBER: its annotation gives one layer's
  // dims (the stacked dim 0 is never split).
  if (!fnName.empty() && b->prog->module->findParam(name))
    for (const auto& p : b->prog->asts)
      for (const auto& d : p->decls)
        if (d->kind == ast::DeclKind::ParamGroup && d->name == fnName)
          for (const auto& m : d->members)
            if (m->name == argName)
              hits.push_back({m.get(), m->type.get(), m->annot.get(), p->file,
                              "param-group member " + name + " (one layer's dims)"});
  for (const auto& p : b->prog->asts)
    for (const auto& d : p->decls) {
      if (!hits.empty()) break;
      if (fnName.empty() && d->kind == ast::DeclKind::Param && d->name == argName)
        hits.push_back({d.get(), d->type.get(), d->annot.get(), p->file, "param " + argName});
      if (d->kind == ast::DeclKind::Fn && d->name != "main" && (fnName.empty() || d->name == fnName))
        for (const auto& a : d->args)
          if (a.name == argName)
            hits.push_back({d.get(), a.type.get(), a.annot.get(), p->file, "argument " + argName + " of fn " + d->name});
    }
  if (hits.empty()) {
    tryOnLet(*b, name, fnName, argName, annot);
    return;
  }
  if (hits.size() > 1 && hits[0].what.rfind("param", 0) != 0) {
    std::string l;
    for (const auto& h : hits) l += (l.empty() ? "" : ", ") + h.decl->name + "." + argName;
    error("'" + name + "' is an argument of several functions: say which (" + l + ")");
    return;
  }
  const Hit& h = hits[0];
  std::string what = h.what;
  if (h.file != b->mainFile) what += ", declared in " + b->sm->name(h.file) + " (the what-if edits the session's copy)";
  std::string mainText = b->src.text, before;
  std::map<std::string, std::string> imports;
  std::string& text = editable(*b, h.file, mainText, imports);
  if (h.annot) {
    size_t s = offsetOf(text, h.annot->loc.line, h.annot->loc.col);
    size_t e = s == std::string::npos ? s : matchingClose(text, s, '(');
    if (e == std::string::npos) {
      error("cannot find the end of " + h.what + "'s annotation");
      return;
    }
    before = text.substr(s, e - s);
    text.replace(s, e - s, annot);
  } else {
    size_t s = offsetOf(text, h.type->loc.line, h.type->loc.col);
    if (s == std::string::npos) return;
    size_t e = s;
    while (e < text.size() && (std::isalnum((unsigned char)text[e]) || text[e] == '_')) ++e;
    size_t br = text.find_first_not_of(" \t", e);
    if (br != std::string::npos && text[br] == '[') e = matchingClose(text, br, '[');
    if (e == std::string::npos) return;
    before = "replicated (no annotation)";
    text.insert(e, " " + annot);
  }
  whatIf(*b, mainText, imports, what + ": " + before + " -> " + annot + "   (a what-if: the session is unchanged)\n");
}

std::string& Session::editable(const Build& b, int file, std::string& mainText,
                               std::map<std::string, std::string>& importTexts) const {
  if (file == b.mainFile) return mainText;
  std::error_code ec;
  std::string key = fs::weakly_canonical(b.sm->name(file), ec).string();
  auto it = importTexts.find(key);
  if (it == importTexts.end()) it = importTexts.emplace(key, b.sm->text(file)).first;
  return it->second;
}

void Session::whatIf(const Build& b, const std::string& text, const std::map<std::string, std::string>& importTexts,
                     const std::string& head) {
  Assembled a = b.src;
  a.text = text;
  auto after = compile(a, importTexts);
  if (!after->ok()) {
    after->printDiagnostics(out_);
    return;
  }
  // The training step, with the same edit: the step's text has the
  // session's declarations at the same offsets (a blanked fn main keeps
  // its length), so the edited region [p, old end) carries over.
  const Build* sb = nullptr;
  const Step* st = step(&sb);
  std::unique_ptr<Build> stepAfterBuild;
  std::unique_ptr<Step> stAfter;
  if (st) {
    const Build* sa = after.get();
    if (sb != &b) {
      const std::string& was = b.src.text;
      Assembled s2 = sb->src;
      if (was != text) {
        size_t p = 0, q = 0;
        while (p < was.size() && p < text.size() && was[p] == text[p]) ++p;
        while (q < was.size() - p && q < text.size() - p && was[was.size() - 1 - q] == text[text.size() - 1 - q]) ++q;
        s2.text.replace(p, was.size() - q - p, text.substr(p, text.size() - q - p));
      }
      stepAfterBuild = compile(s2, importTexts);
      sa = stepAfterBuild->ok() ? stepAfterBuild.get() : nullptr;
    }
    if (sa) stAfter = findStep(*sa);
  }
  out_ << head;
  const ir::Module& m0 = *b.prog->module;
  const ir::Module& m1 = *after->prog->module;
  int unchanged = 0;
  auto compare = [&](const std::string& title, const ir::Module& mod0, const ir::Function& l0, const ir::Module& mod1,
                     const ir::Function& l1) {
    passes::Cost c0 = passes::estimateCost(mod0, l0), c1 = passes::estimateCost(mod1, l1);
    if (passes::costJson(c0) == passes::costJson(c1)) ++unchanged;
    else out_ << title << ", per rank (np = " << mod0.np << "):\n" << costTable({&c0, &c1}, {"before", "after"});
  };
  int shown = 0;
  for (const auto& fname : b.prog->userFunctions) {
    ir::Function* f0 = m0.findFunction(fname);
    ir::Function* f1 = m1.findFunction(fname);
    if (!f0 || !f1) continue;
    compare("fn " + fname, m0, *perRank(m0, *f0), m1, *perRank(m1, *f1));
    ++shown;
  }
  if (st && stAfter) {
    compare(stepTitle(*sb, *st), *sb->prog->module, *st->perRank, stAfter->programs->module(), *stAfter->perRank);
    ++shown;
  }
  if (unchanged == shown) out_ << "(no cost changed: " << shown << (shown == 1 ? " function" : " functions") << ")\n";
  else if (unchanged > 0)
    out_ << "(" << unchanged << " other " << (unchanged == 1 ? "function" : "functions") << " unchanged)\n";
  out_ << machineModelLine();
}

// :try FN.VALUE / VALUE where VALUE is a let of a tensor function: the
// let's expression gets the annotation as a constraint (`(EXPR) @shard(...)`),
// or its constraint is replaced when it has one.
void Session::tryOnLet(Build& b, const std::string& name, const std::string& fnName, const std::string& letName,
                       const std::string& annot) {
  struct LetHit {
    const ast::Decl* fn;
    const ast::Stmt* let;
    int file;
    bool inLoop;  // in the body of a `for`
  };
  std::vector<LetHit> hits;
  std::function<void(const ast::Decl&, const ast::Block&, int, bool)> scan =
      [&](const ast::Decl& d, const ast::Block& blk, int file, bool inLoop) {
        for (const auto& st : blk) {
          if (st->kind == ast::StmtKind::Let && st->names.size() == 1 && st->names[0] == letName && !st->exprs.empty())
            hits.push_back({&d, st.get(), file, inLoop});
          scan(d, st->body, file, inLoop || st->kind == ast::StmtKind::For);
          scan(d, st->elseBody, file, inLoop);
        }
      };
  for (const auto& p : b.prog->asts)
    for (const auto& d : p->decls)
      if (d->kind == ast::DeclKind::Fn && d->name != "main" && (fnName.empty() || d->name == fnName))
        scan(*d, d->body, p->file, false);
  if (hits.empty()) {
    error("no param, fn argument or let of a tensor function named '" + name + "'");
    return;
  }
  std::set<std::string> fns;  // by name: the list reads the same in every run
  for (const auto& h : hits) fns.insert(h.fn->name);
  if (fns.size() > 1) {
    std::string l;
    for (const auto& f : fns) l += (l.empty() ? "" : ", ") + f + "." + letName;
    error("'" + name + "' is a let of several functions: say which (" + l + ")");
    return;
  }
  if (hits.size() > 1) {
    error("fn " + hits[0].fn->name + " assigns '" + letName + "' with let more than once: :try cannot tell which");
    return;
  }
  const LetHit& h = hits[0];
  std::string what = "value " + letName + " of fn " + h.fn->name + (h.inLoop ? " (in a loop body: every iteration)" : "");
  std::string mainText = b.src.text, before;
  std::map<std::string, std::string> imports;
  std::string& text = editable(b, h.file, mainText, imports);
  if (h.file != b.mainFile) what += ", declared in " + b.sm->name(h.file) + " (the what-if edits the session's copy)";
  const ast::Expr& e = *h.let->exprs[0];
  if (e.kind == ast::ExprKind::Annot && e.annot) {
    size_t s = offsetOf(text, e.annot->loc.line, e.annot->loc.col);
    size_t end = s == std::string::npos ? s : matchingClose(text, s, '(');
    if (end == std::string::npos) {
      error("cannot find the end of " + what + "'s annotation");
      return;
    }
    before = text.substr(s, end - s);
    text.replace(s, end - s, annot);
  } else {
    // The expression: from after the let's `=` to the end of the statement
    // (a newline, `;` or `}` outside brackets and strings).
    size_t s = offsetOf(text, h.let->nameLocs.empty() ? h.let->loc.line : h.let->nameLocs[0].line,
                        h.let->nameLocs.empty() ? h.let->loc.col : h.let->nameLocs[0].col);
    if (s != std::string::npos) s = text.find('=', s);
    if (s == std::string::npos) {
      error("cannot find the expression of " + what);
      return;
    }
    ++s;
    while (s < text.size() && (text[s] == ' ' || text[s] == '\t')) ++s;
    size_t end = s;
    int depth = 0;
    bool str = false;
    for (; end < text.size(); ++end) {
      char c = text[end];
      if (str) {
        str = c != '"';
        continue;
      }
      if (c == '"') str = true;
      else if (c == '(' || c == '[' || c == '{') ++depth;
      else if (c == ')' || c == ']' || c == '}') {
        if (depth == 0) break;
        --depth;
      } else if (depth == 0 && (c == '\n' || c == ';')) break;
    }
    while (end > s && (text[end - 1] == ' ' || text[end - 1] == '\t' || text[end - 1] == '\r')) --end;
    if (end <= s) {
      error("cannot find the expression of " + what);
      return;
    }
    ir::Function* f = b.prog->module->findFunction(h.fn->name);
    before = "no annotation";
    if (f) {
      auto c = propagated(*b.prog->module, *f);
      auto vals = valuesNamed(*c, letName);
      for (const auto& lv : loopValuesNamed(*c, letName)) vals.push_back(lv.value);
      if (!vals.empty())
        before = "propagated " + (vals[0]->sharding ? vals[0]->sharding->str() : std::string("replicated")) +
                 " (no annotation)";
    }
    text.replace(s, end - s, "(" + text.substr(s, end - s) + ") " + annot);
  }
  whatIf(b, mainText, imports, what + ": " + before + " -> " + annot + "   (a what-if: the session is unchanged)\n");
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
  auto c = propagated(mod, *f);
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
    ValueContext ctx{*b, mod, f->name};
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

void Session::ir(const std::string& fn) {
  Build* b = current();
  if (!b) return;
  ir::Module& m = *b->prog->module;
  if (!fn.empty()) {
    if (ir::Function* f = userFunction(*b, fn, true)) out_ << ir::printFunction(*f);
    return;
  }
  out_ << "np = " << m.np << "\n";
  for (const auto& mesh : m.meshes) out_ << mesh.str() << "\n";
  for (const auto& p : m.params) {
    out_ << "param @" << p.name << " : " << p.type.str();
    if (p.sharding) out_ << " " << p.sharding->str();
    out_ << " = " << p.init.str() << "\n";
  }
  for (const auto& name : b->prog->userFunctions)
    if (ir::Function* f = m.findFunction(name)) out_ << "\n" << ir::printFunction(*f);
}

void Session::llvm(const std::string& fn) {
#ifdef GSL_REPL_JIT
  Build* b = current();
  if (!b) return;
  ir::Function* f = userFunction(*b, fn, true);
  if (!f) return;
  auto local = perRank(*b->prog->module, *f);
  out_ << "; LLVM IR of the per-rank program of " << fn << " (np = " << b->prog->module->np << "), after O3\n"
       << backend::jitEmitLLVM(*local, true);
#else
  (void)fn;
  out_ << "the LLVM JIT is not available in this build (backend/jit is not built), so there is no LLVM IR to show\n";
#endif
}

}  // namespace gsl::repl
