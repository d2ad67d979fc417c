// A position in a GSL source file. Every AST node and IR op carries one so
// that any later stage can report `file:line:col: error: ...`.
#pragma once
#include <cstdint>

namespace gsl {

struct SourceLoc {
  int file = -1;  // index into SourceManager; -1 = no location
  int line = 0;   // 1-based
  int col = 0;    // 1-based
  bool valid() const { return file >= 0; }
};

}  // namespace gsl
