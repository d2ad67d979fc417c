// Small lexical helpers of the REPL: a GSL tokenizer that is enough to
// classify an input, count open brackets, find `fn main` in a loaded file
// and find the end of an annotation. It never reports errors: the front
// end does that when the text is compiled.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "support/Text.h"

namespace gsl::repl {

struct Token {
  enum Kind { Ident, Number, String, Punct } kind;
  std::string text;
  size_t pos = 0;  // byte offset of the first character
};

// Comments (`#` to end of line) and whitespace are skipped. An unterminated
// string ends at the end of its line.
std::vector<Token> tokenize(const std::string& s);

// The number of (, [ and { left open at the end of `s` (0 when balanced or
// over-closed).
int openBrackets(const std::string& s);

// `text` with a top-level `fn main(...) { ... }` replaced by spaces (newlines
// kept, so line numbers stay). `found` tells whether there was one.
std::string blankMain(const std::string& text, bool& found);

// matchingClose and offsetOf: support/Text.h.
using gsl::matchingClose;
using gsl::offsetOf;

std::string trim(const std::string& s);
bool startsWith(const std::string& s, const std::string& prefix);

// "0,2", "0-3", "0-3,8-11": ranks with runs of 3 or more written as ranges.
std::string rankList(const std::vector<int64_t>& ranks);

// 1234567 -> "1,234,567"
std::string thousands(uint64_t n);

}  // namespace gsl::repl
