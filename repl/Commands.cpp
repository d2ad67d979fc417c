// The commands: the table of them (each row: name, arguments, help,
// what a missing argument is told, argument completion, handler), the
// dispatch that looks a typed `:name` up in it (abbreviations too), and
// :help, which lists it.
#include "repl/Session.h"

#include <algorithm>

#include "repl/Text.h"

namespace gsl::repl {

// In the order :help lists them. A handler gets the argument trimmed ("" for
// none); dispatch has checked that the ones that need one got one.
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
      {"auto", "[FN]", "gsl plan on the loaded file: the open annotations and mesh sizes with the least predicted step "
                       "(or FN's) time",
       nullptr, nullptr, [](S& s, A a) { s.autoPlan(a); }},
      {"plans", "FN.VALUE", "the candidate plans of the op making VALUE, their costs, the one chosen and why",
       "FN.VALUE: a let of a tensor function", nullptr, [](S& s, A a) { s.plans(a); }},
      {"ir", "[FN]", "the global IR of the session (or of FN)", nullptr, nullptr, [](S& s, A a) { s.ir(a); }},
      {"llvm", "FN", "the LLVM IR of FN's per-rank program", "a function", nullptr, [](S& s, A a) { s.llvm(a); }},
      {"quit", "", "leave (also Ctrl-D)", nullptr, nullptr, [](S& s, A) { s.quit_ = true; }},
  };
  return c;
}

const std::vector<std::string>& Session::commandNames() {
  static std::vector<std::string> n = [] {
    std::vector<std::string> r;
    for (const auto& c : commands()) r.push_back(std::string(":") + c.name);
    return r;
  }();
  return n;
}

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

}  // namespace gsl::repl
