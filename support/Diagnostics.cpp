#include "support/Diagnostics.h"

#include <cstdlib>
#include <iostream>
#include <sstream>

namespace gsl {

int SourceManager::addFile(std::string display, std::string text) {
  files_.push_back({std::move(display), std::move(text)});
  return (int)files_.size() - 1;
}

std::string SourceManager::lineText(int file, int line) const {
  if (file < 0 || file >= (int)files_.size() || line < 1) return "";
  const std::string& t = files_[file].text;
  size_t pos = 0;
  for (int l = 1; l < line; ++l) {
    pos = t.find('\n', pos);
    if (pos == std::string::npos) return "";
    ++pos;
  }
  size_t end = t.find('\n', pos);
  std::string s = t.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
  if (!s.empty() && s.back() == '\r') s.pop_back();
  return s;
}

void Diagnostics::error(SourceLoc loc, std::string message) {
  diags_.push_back({Severity::Error, loc, std::move(message)});
  ++errorCount_;
}

void Diagnostics::note(SourceLoc loc, std::string message) {
  diags_.push_back({Severity::Note, loc, std::move(message)});
}

std::string Diagnostics::render(const Diagnostic& d) const {
  std::ostringstream os;
  const char* sev = d.severity == Severity::Error ? "error" : d.severity == Severity::Warning ? "warning" : "note";
  if (!d.loc.valid()) {
    os << "gsl: " << sev << ": " << d.message << "\n";
    return os.str();
  }
  os << sm_.name(d.loc.file) << ":" << d.loc.line << ":" << d.loc.col << ": " << sev << ": "
     << d.message << "\n";
  std::string line = sm_.lineText(d.loc.file, d.loc.line);
  os << "    " << line << "\n    ";
  // Keep tabs so the caret lines up under the same column.
  for (int i = 1; i < d.loc.col && i - 1 < (int)line.size(); ++i)
    os << (line[i - 1] == '\t' ? '\t' : ' ');
  os << "^\n";
  return os.str();
}

void Diagnostics::print(std::ostream& os) const {
  for (const auto& d : diags_) os << render(d);
}

void internalError(const char* file, int line, const std::string& msg) {
  std::cerr << "gsl: internal error: " << msg << " (" << file << ":" << line
            << ")\nThis is a bug in GSL, not in your program.\n";
  std::abort();
}

}  // namespace gsl
