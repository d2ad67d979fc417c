// Diagnostics engine: the one place user errors are reported.
//
// Format (clox/clang style):
//   FILE:LINE:COL: error: MESSAGE
//       <the source line>
//       <spaces>^
// Internal compiler errors are NOT diagnostics: they use GSL_ASSERT (below)
// / gsl::internalError, which says "internal error" and aborts.
#pragma once
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "support/SourceLoc.h"

namespace gsl {

// Owns the text of every file read, so diagnostics can quote source lines.
class SourceManager {
 public:
  // Returns the file id. `display` is the name shown in diagnostics.
  int addFile(std::string display, std::string text);
  const std::string& name(int file) const { return files_[file].name; }
  const std::string& text(int file) const { return files_[file].text; }
  std::string lineText(int file, int line) const;
  int numFiles() const { return (int)files_.size(); }

 private:
  struct File { std::string name, text; };
  std::vector<File> files_;
};

enum class Severity { Error, Warning, Note };

struct Diagnostic {
  Severity severity;
  SourceLoc loc;
  std::string message;
};

class Diagnostics {
 public:
  explicit Diagnostics(const SourceManager& sm) : sm_(sm) {}
  void error(SourceLoc loc, std::string message);
  void note(SourceLoc loc, std::string message);
  bool hasErrors() const { return errorCount_ > 0; }
  int errorCount() const { return errorCount_; }
  const std::vector<Diagnostic>& all() const { return diags_; }
  // Renders one diagnostic with its source line and caret.
  std::string render(const Diagnostic& d) const;
  // Renders every diagnostic reported so far, in order.
  void print(std::ostream& os) const;
  const SourceManager& sources() const { return sm_; }

 private:
  const SourceManager& sm_;
  std::vector<Diagnostic> diags_;
  int errorCount_ = 0;
};

// Thrown to abandon work after a user error has been reported (for example a
// failed load at run time). Carries nothing: the diagnostic is already out.
struct UserError : std::exception {
  std::string msg;
  explicit UserError(std::string m = "") : msg(std::move(m)) {}
  const char* what() const noexcept override { return msg.c_str(); }
};

[[noreturn]] void internalError(const char* file, int line, const std::string& msg);

}  // namespace gsl

// Internal invariant check: failing it is a bug in GSL, never a user error.
#define GSL_ASSERT(cond, msg)                                              \
  do {                                                                     \
    if (!(cond)) ::gsl::internalError(__FILE__, __LINE__, (msg));          \
  } while (0)
