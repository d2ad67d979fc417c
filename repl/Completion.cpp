// Tab completion: the names of the session (renewed after every change),
// the builtins, the commands, and a command's own argument completion
// (:load's file names).
#include "repl/Session.h"

#include <filesystem>
#include <functional>
#include <set>

#include "frontend/AST.h"
#include "ir/OpTable.h"
#include "repl/Text.h"

namespace gsl::repl {

namespace fs = std::filesystem;
using frontend::HostStmt;

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
                                  "or", "not", "f32", "i32", "bool", "@shard", "@replicate", "@pipeline", "zeros", "ones",
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

// :load's argument: the .gsl files and the folders that `word` begins
// (hidden ones only when it names them).
std::vector<std::string> Session::completeFiles(const std::string& word) {
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

}  // namespace gsl::repl
