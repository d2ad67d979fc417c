// Small text helpers shared by the file readers and the front end.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace gsl {

// Shows untrusted text safely in a message: printable ASCII kept, other
// bytes as \xNN, at most `max` bytes ("..." when cut).
std::string excerpt(std::string_view s, size_t max = 60);

// Index of the first byte that is not part of well-formed UTF-8 (RFC 3629:
// no overlong forms, no surrogates, nothing above U+10FFFF), or npos.
size_t invalidUtf8At(std::string_view s);

// The shortest text that reads back to `v` ("%.*g" with the fewest digits
// that round-trip), for a value named in a message.
std::string shortest(double v);

// Offset just past the bracket that closes the first `open` at or after
// `pos` on its line (`open` is '(' or '['); npos if there is none. For
// edits of source text at the front end's locations (the REPL's :try,
// gsl plan).
size_t matchingClose(const std::string& text, size_t pos, char open);

// Byte offset of 1-based (line, col); npos when out of range.
size_t offsetOf(const std::string& text, int line, int col);

// Offset just past the type expression at `pos` (`f32[B, D]`, or `f32`):
// where an annotation written after it goes; npos if its `[` is not closed.
size_t endOfType(const std::string& text, size_t pos);

}  // namespace gsl
