// Shape inference pass: recomputes every op's result type from its
// operands with the op table's type rules (canonicalising attributes), in
// program order. Passes that rewrite the IR run it to keep types exact.
#pragma once
#include <string>

#include "ir/Module.h"

namespace gsl::passes {

// Returns "" or a description of the first op whose type rule fails
// (an internal error when it happens after the front end).
std::string inferShapes(ir::Module& m);

}  // namespace gsl::passes
