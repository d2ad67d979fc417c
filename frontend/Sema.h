// Semantic analysis and lowering to IR (see frontend/Frontend.h for where
// it sits). One entry point: checks the declarations of all files of a
// program (imports first, in order) and builds the module and host script.
// The implementation is one class split by concern over several files;
// frontend/SemaImpl.h lists them.
#pragma once
#include <vector>

#include "frontend/Frontend.h"

namespace gsl::frontend {

// `decls` are all declarations in program order (an imported file's
// declarations come before the importing file's). Returns false if any
// error was reported.
bool analyze(const std::vector<const ast::Decl*>& decls, const Options& opts, Diagnostics& diags,
             CheckedProgram& out);

}  // namespace gsl::frontend
