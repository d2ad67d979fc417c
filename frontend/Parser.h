// Parsing: source text -> AST, through the ANTLR parser generated from
// grammar/GSL.g4. Lexical and syntax errors go to the diagnostics engine
// (the first syntax error of a file is reported; later ones are usually
// cascades of it, so parsing of that file stops there).
#pragma once
#include <memory>

#include "frontend/AST.h"
#include "support/Diagnostics.h"

namespace gsl::frontend {

// Parses file `file` of `sm`. Returns null if a syntax error was reported.
std::unique_ptr<ast::Program> parseProgram(const SourceManager& sm, int file, Diagnostics& diags);

// Deepest nesting of expressions/blocks accepted (deeper input is an error
// rather than a stack overflow).
constexpr int kMaxNesting = 200;

}  // namespace gsl::frontend
