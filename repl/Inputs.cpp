// What the session does with a line typed at the prompt that is not a
// command: a declaration joins the session, a host statement joins fn
// main and runs, an expression runs and prints its value; each is kept
// only if the session still checks. Also :type (an expression, not run).
#include "repl/Session.h"

#include <set>

#include "repl/Text.h"

namespace gsl::repl {

using frontend::HostStmt;
using ir::Sharding;

namespace {

// The words a declaration begins with.
const std::set<std::string> kDeclKeywords = {"import", "const", "mesh", "param", "fn", "optimizer", "dataset"};

}  // namespace

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

std::string Session::typeLine(const ir::TensorType& t, const std::optional<Sharding>& s) const {
  std::string sh = s && !s->mesh.empty() && !s->isReplicated() ? s->str() : "(replicated)";
  return t.str() + " " + paint(sh, "36");
}

std::map<std::string, HostVar> Session::simulateHost(const Build& b) const {
  runtime::PerRankPrograms programs(*b.prog->module);
  runtime::ShardingWalk walk(programs);
  return walk.walk(b.prog->host.body);
}

}  // namespace gsl::repl
