// Runs a checked program's host script (`fn main`): host variables, loops,
// conditionals, print, load/save of .npy files, and calls of IR thunks on
// an engine. Run-time user errors (a missing or mismatched .npy file, an
// index out of range) become diagnostics at their source location.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>

#include "frontend/Frontend.h"
#include "support/Diagnostics.h"

namespace gsl::runtime {

struct RunOptions {
  uint64_t seed = 0;               // --seed: params and random_uniform
  std::string engine = "interp";   // --engine
  std::ostream* out = nullptr;     // where print writes (default std::cout)
};

// Runs `fn main` of `prog`. Returns true on success; false after reporting
// a run-time error to `diags`.
bool runMain(const frontend::CheckedProgram& prog, const RunOptions& opts, Diagnostics& diags);

}  // namespace gsl::runtime
