// The REPL session: a growing GSL program, re-checked as a whole after
// every change.
//
// State: the loaded file (its text with `fn main` blanked out: the REPL
// does not run the file's script), the declarations typed so far, and the
// host statements typed so far. Every change assembles one source text
//
//   <the loaded file>            lines keep their file:line
//   <typed declarations>         each shown in locations as <input N>
//   fn main() {                  the session's host script:
//   <typed host statements>      let, x = ..., print, for, if (in order)
//   }
//
// and compiles it with the front end and the global pass pipeline. A
// change that fails to check prints the diagnostics and is dropped: the
// session stays as it was.
//
// Values: host statements are kept as text and re-run (fn main, on NP
// thread ranks, seed 0) whenever a value is needed; only the output of the
// newest statement is shown. Re-running is simple and always consistent
// with the current declarations and -np; the price is time, which is small
// at REPL sizes. Files a kept `save` writes are re-written on each run.
//
// The training step: the first opt.minimize(...) that fn main runs, of
// the session's own host script, else of the loaded file's fn main (which
// is compiled for it, not run): :cost step, :spmd step, and the names
// grad(w) and opt.m(w) (repl/CallPaths.h).
//
// Shardings of host variables are found by the runtime's own walk of the
// host script (runtime/HostWalk.h): each statement's tensor math (a thunk)
// is propagated and partitioned for the shardings its inputs have, in
// statement order.
//
// The members are defined by concern, one file each (the groups of the
// private section name them): Session.cpp (the state and its builds),
// Inputs.cpp, Commands.cpp (the table of commands), Completion.cpp,
// Views.cpp, Programs.cpp and WhatIf.cpp.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "frontend/Frontend.h"
#include "ir/Module.h"
#include "passes/MachineModel.h"
#include "runtime/HostWalk.h"
#include "support/Diagnostics.h"

namespace gsl::repl {

// One input kept by the session.
struct Entry {
  int number = 0;  // shown in locations as <input N>
  std::string text;
};

// Where a line of the assembled session text came from.
struct LineOrigin {
  std::string display;  // a file name, "<input N>", or "<repl>" (generated)
  int line = 0;         // line in that origin (0: a generated line)
  int colShift = 0;     // columns the REPL put in front of the typed text
};

struct Assembled {
  std::string text;
  std::vector<LineOrigin> lines;  // index: line - 1
  // Appends `piece` and a newline; its lines are lines 1.. of `display`.
  void add(const std::string& piece, const std::string& display, int firstColShift = 0);
};

// One compile of an assembled text (owns the sources its diagnostics quote).
struct Build {
  Assembled src;
  std::string mainDisplay;
  std::unique_ptr<SourceManager> sm;
  std::unique_ptr<Diagnostics> diags;
  std::unique_ptr<frontend::CheckedProgram> prog;
  int mainFile = 0;

  bool ok() const { return prog != nullptr; }
  // "examples/mlp.gsl:11:21", "<input 3>:1:7" ("" for no location).
  std::string where(SourceLoc l) const;
  // A diagnostic as Diagnostics::render prints it, with REPL locations.
  std::string render(const Diagnostic& d) const;
  void printDiagnostics(std::ostream& os) const;
};

// How a host variable got its value and sharding (see the file comment):
// its type, sharding, and the thunk result it holds, as the host-script walk
// (runtime/HostWalk.h) finds them.
using HostVar = runtime::WalkedValue;

struct Step;
struct PathRoot;
class Session;

// A command of the session, `:NAME ARGS`: one row of the table in
// repl/Commands.cpp, which :help lists, completion reads and dispatch looks
// up by name.
struct Command {
  const char* name;
  const char* args;  // as :help shows them ("" for none)
  const char* help;
  // What `:NAME` typed without an argument is told it lacks (null: it runs
  // without one).
  const char* needs;
  // The candidates for the argument word `word` (null: what the prompt
  // completes, the session's names and the builtins).
  std::vector<std::string> (*complete)(const std::string& word);
  void (*run)(Session& s, const std::string& arg);
};

class Session {
 public:
  Session(std::ostream& out, bool color, int64_t np, std::map<std::string, int64_t> defines);
  ~Session();

  // One complete input: a command (`:...`), a declaration, a host
  // statement or an expression.
  void handle(const std::string& input);
  // :load FILE
  bool load(const std::string& path);
  bool quitRequested() const { return quit_; }
  // Tab completion of the word that ends `before` (the line up to the
  // cursor): sets `wordStart` and returns the candidates, sorted.
  std::vector<std::string> complete(const std::string& before, size_t& wordStart) const;
  static const std::vector<std::string>& commandNames();
  // The commands, in the order :help lists them.
  static const std::vector<Command>& commands();

 private:
  enum class Extra { None, Decl, Stmt, Expr, ExprNoRun };
  // The name an expression typed at the prompt gets in fn main.
  static constexpr const char* kValueName = "__repl_value";

  std::ostream& out_;
  bool color_;
  int64_t np_;
  // What :cost and :try predict seconds with: the machine file `gsl
  // calibrate` wrote beside the compile cache (threads' collectives), else
  // the default model.
  passes::MachineModel machine_;
  std::map<std::string, int64_t> defines_;
  std::string file_;      // "" when no file is loaded
  std::string fileText_;  // with fn main blanked
  std::string fileSource_;  // as read (with its fn main): the training step's
  bool fileHadMain_ = false;
  std::vector<Entry> decls_, host_;
  int counter_ = 0;
  bool quit_ = false;
  std::unique_ptr<Build> current_;     // the session as it is (lazily built)
  std::vector<std::string> names_;     // completion: names of the session
  // The training step (found when first needed; forgotten on a change):
  // in current_, or in stepBuild_ (the loaded file with its fn main).
  bool stepSought_ = false;
  std::unique_ptr<Build> stepBuild_;
  std::unique_ptr<Step> step_;

  // The session and its builds (repl/Session.cpp).
  // Building. With `fileMain`, the loaded file keeps its own fn main and
  // the session's host script is left out (the training step's text).
  Assembled assemble(const Entry* extra, Extra kind, bool withMain = true, bool fileMain = false) const;
  // `importTexts`: imported files edited by a what-if (frontend::Options).
  std::unique_ptr<Build> compile(const Assembled& a, const std::map<std::string, std::string>& importTexts = {}) const;
  // Runs fn main; returns false after printing a run-time error. `shown`
  // gets what the statements after the marker printed.
  bool run(const Build& b, std::string& shown) const;
  Build* current();
  // current() for a command that looks up `name`; null after saying why
  // not (the session does not check, or `name` is a param group's).
  Build* currentFor(const std::string& name);
  // After a change: the session's build and completion names are renewed.
  void commit();
  void forgetStep();
  // The training step and the build it is in (null: fn main runs none).
  const Step* step(const Build** where);
  // The call-path roots of the session and its training step.
  std::vector<PathRoot> roots(Build& b);
  ir::Function* userFunction(Build& b, const std::string& name, bool report);
  // The commands that change the session's file or np.
  void reload();
  void reset();
  void setNp(const std::string& arg);
  std::string paint(const std::string& s, const char* code) const;
  void error(const std::string& msg) const;

  // What is typed at the prompt (repl/Inputs.cpp).
  void declaration(const std::string& text);
  void statement(const std::string& text);
  // Compiles and runs the session with `e` added as `kind` (Stmt or Expr),
  // printing its output or its diagnostics; null on an error.
  std::unique_ptr<Build> compileAndRun(const Entry& e, Extra kind);
  void expression(const std::string& text);
  void typeOf(const std::string& expr);  // :type
  std::map<std::string, HostVar> simulateHost(const Build& b) const;
  std::string typeLine(const ir::TensorType& t, const std::optional<ir::Sharding>& s) const;

  // Commands (repl/Commands.cpp): dispatch by the table, and :help.
  void command(const std::string& text);
  void help();

  // Completion (repl/Completion.cpp).
  void refreshNames();
  static std::vector<std::string> completeFiles(const std::string& word);  // :load's argument

  // How values lie (repl/Views.cpp): :sharding, :show, :plans.
  void sharding(const std::string& name);
  void show(const std::string& name);
  void plans(const std::string& name);
  // Prints the values `name` picks by call path (repl/CallPaths.h), as
  // :sharding (explain) or :show (pictures); false when it picks none
  // (an ambiguous name prints the candidates and returns true).
  bool byCallPath(Build& b, const std::string& name, bool explain);

  // Per-rank programs (repl/Programs.cpp): :spmd, :cost, :ir, :llvm.
  // What :cost and :spmd show: fn FN's per-rank program, or for `step`
  // (when no fn is named so) the training step's.
  struct Program {
    const Build* build = nullptr;
    const ir::Function* global = nullptr;
    std::unique_ptr<ir::Function> local;
    std::string title;  // "fn loss", "the training step opt.minimize(loss, ...) at ..."
  };
  bool program(const std::string& fn, Program& p);
  void spmd(const std::string& fn);
  void cost(const std::string& fn);
  void ir(const std::string& fn);
  void llvm(const std::string& fn);

  // What-if (repl/WhatIf.cpp): :try, by editing a copy of the source text.
  void tryAnnotation(const std::string& args);
  // :auto [FN]: gsl plan on the loaded file (runtime/AutoSharding.h).
  void autoPlan(const std::string& fn);
  void tryOnLet(Build& b, const std::string& name, const std::string& fnName, const std::string& letName,
                const std::string& annot);
  // What-if: `text` (the session's, with the edit) and `importTexts`
  // compiled and compared with the session: what is printed after `head`.
  void whatIf(const Build& before, const std::string& text, const std::map<std::string, std::string>& importTexts,
              const std::string& head);
  // The text a what-if edits for a declaration in file `file` of build
  // `b`: `mainText` (the session's) or the session's copy of an imported
  // file in `importTexts` (the user's file is never written).
  std::string& editable(const Build& b, int file, std::string& mainText,
                        std::map<std::string, std::string>& importTexts) const;
};

}  // namespace gsl::repl
