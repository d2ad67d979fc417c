// The session's state and its builds: the source text it assembles from
// the loaded file and what was typed, compiling and running it, the
// training step, and the commands that replace the file or np (:load,
// :reload, :reset, :np). The design is in Session.h.
#include "repl/Session.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

#include "backend/jit/ObjectCache.h"
#include "frontend/AST.h"
#include "passes/Pipeline.h"
#include "repl/CallPaths.h"
#include "repl/Explain.h"
#include "repl/Lookup.h"
#include "repl/Text.h"
#include "runtime/Host.h"

namespace gsl::repl {

namespace fs = std::filesystem;

namespace {

// fn main prints it before the newest input: what is printed after it is
// what the REPL shows.
const char* kMarker = "@@gsl-repl-output@@";

}  // namespace

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
    : out_(out),
      color_(color),
      np_(np),
      machine_(passes::loadMachineModel(passes::machineModelDir(backend::defaultCompileCacheDir()), "threads")),
      defines_(std::move(defines)) {
  refreshNames();
}

Session::~Session() = default;

std::string Session::paint(const std::string& s, const char* code) const {
  return color_ ? std::string("\033[") + code + "m" + s + "\033[0m" : s;
}

void Session::error(const std::string& msg) const { out_ << paint("error:", "1;31") << " " << msg << "\n"; }

Assembled Session::assemble(const Entry* extra, Extra kind, bool withMain, bool fileMain) const {
  static const std::string letValue = std::string("let ") + kValueName + " = ";
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
      a.add(letValue + extra->text, input(*extra), (int)letValue.size());
      a.add(std::string("print(") + kValueName + ")", "<repl>");
      break;
    case Extra::ExprNoRun: a.add(letValue + extra->text, input(*extra), (int)letValue.size()); break;
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

Build* Session::currentFor(const std::string& name) {
  Build* b = current();
  if (!b) return nullptr;
  if (std::string h = groupHint(*b, name); !h.empty()) {
    error(h);
    return nullptr;
  }
  return b;
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

// ------------------------------------------------------------------ :load, :reload, :reset, :np

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

}  // namespace gsl::repl
