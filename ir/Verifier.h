// Structural checks of a Module: SSA (every operand defined before use, in
// the same function), operand counts, op-table type rules hold, param ops
// name a declared param of the same type, shardings name a declared mesh
// and axes, have one entry per dim and use an axis at most once.
// A failure is a bug in whatever built the IR (internal error), so passes
// call verifyOrDie after they run.
#pragma once
#include <string>

#include "ir/Module.h"

namespace gsl::ir {

// Returns "" if the module is well formed, else a description of the first problem.
std::string verify(const Module& m);
// The same checks for one function (a per-rank program outside the module).
std::string verifyFunction(const Module& m, const Function& f);
// Aborts with an internal error naming `after` if verify fails.
void verifyOrDie(const Module& m, const char* after);

}  // namespace gsl::ir
