// `gsl repl [FILE] [-np N]`: an interactive session for exploring shardings.
//
// The session is a growing GSL program: declarations typed at the prompt
// (const, mesh, param, fn, import) are appended to it and the whole program
// is re-checked; host statements (`let x = ...`, `x = ...`, print, for, if)
// form the body of the session's `fn main`; a bare expression prints its
// value, type and sharding. Commands start with `:` (`:help` lists them).
// Details: repl/Session.h.
//
// Input: with libedit (history in ~/.gsl_history, Tab completion, Ctrl-C
// cancels the line, Ctrl-D leaves) when reading a terminal; plain lines
// otherwise (no prompts), so scripts can be piped in. A line that leaves a
// bracket open continues on the next (`...> `).
#pragma once
#include <cstdint>
#include <istream>
#include <map>
#include <optional>
#include <ostream>
#include <string>

namespace gsl::repl {

struct ReplOptions {
  std::string file;                        // loaded at start (empty: an empty session)
  int64_t np = 1;                          // -np: the number of ranks (NP)
  std::map<std::string, int64_t> defines;  // -D NAME=VALUE, applied to consts as they are declared
  // Where input comes from and output goes. Null: stdin / stdout, with line
  // editing when stdin is a terminal. Given streams are read as plain lines.
  std::istream* in = nullptr;
  std::ostream* out = nullptr;
  // Without line editing: echo every input line after its prompt, so the
  // output reads as a transcript (`gsl repl --echo < script`).
  bool echo = false;
  // ANSI colours and bold; default: when stdout is a terminal (and
  // $NO_COLOR is unset) and input is edited.
  std::optional<bool> color;
};

// Runs the session until :quit or end of input. Returns the exit code (0).
int runRepl(const ReplOptions& opts);

}  // namespace gsl::repl
