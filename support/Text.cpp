#include "support/Text.h"

#include <cctype>

#include <cstdio>
#include <cstdlib>

namespace gsl {

std::string excerpt(std::string_view s, size_t max) {
  std::string r;
  for (size_t i = 0; i < s.size() && i < max; ++i) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 0x20 && c < 0x7f) {
      r += (char)c;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      r += buf;
    }
  }
  if (s.size() > max) r += "...";
  return r;
}

// Index of the first byte that is not part of well-formed UTF-8 (RFC 3629:
// no overlong forms, no surrogates, nothing above U+10FFFF), or npos.
size_t invalidUtf8At(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = (unsigned char)s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) len = 2;
    else if (c == 0xe0) len = 3, lo = 0xa0;
    else if (c >= 0xe1 && c <= 0xec) len = 3;
    else if (c == 0xed) len = 3, hi = 0x9f;
    else if (c >= 0xee && c <= 0xef) len = 3;
    else if (c == 0xf0) len = 4, lo = 0x90;
    else if (c >= 0xf1 && c <= 0xf3) len = 4;
    else if (c == 0xf4) len = 4, hi = 0x8f;
    else return i;
    if (i + len > s.size()) return i;
    unsigned char c1 = (unsigned char)s[i + 1];
    if (c1 < lo || c1 > hi) return i;
    for (size_t k = 2; k < len; ++k) {
      unsigned char ck = (unsigned char)s[i + k];
      if (ck < 0x80 || ck > 0xbf) return i;
    }
    i += len;
  }
  return std::string_view::npos;
}

std::string shortest(double v) {
  char b[32];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(b, sizeof b, "%.*g", prec, v);
    if (std::strtod(b, nullptr) == v) break;
  }
  return b;
}

size_t matchingClose(const std::string& text, size_t pos, char open) {
  char close = open == '(' ? ')' : ']';
  size_t i = text.find(open, pos);
  if (i == std::string::npos) return i;
  int depth = 0;
  for (; i < text.size(); ++i) {
    if (text[i] == open) ++depth;
    else if (text[i] == close && --depth == 0) return i + 1;
    else if (text[i] == '\n') break;
  }
  return std::string::npos;
}

size_t offsetOf(const std::string& text, int line, int col) {
  size_t pos = 0;
  for (int l = 1; l < line; ++l) {
    pos = text.find('\n', pos);
    if (pos == std::string::npos) return pos;
    ++pos;
  }
  pos += (size_t)(col - 1);
  return pos <= text.size() ? pos : std::string::npos;
}

size_t endOfType(const std::string& text, size_t pos) {
  size_t e = pos;
  while (e < text.size() && (std::isalnum((unsigned char)text[e]) || text[e] == '_')) ++e;
  size_t br = text.find_first_not_of(" \t", e);
  if (br != std::string::npos && text[br] == '[') return matchingClose(text, br, '[');
  return e;
}

}  // namespace gsl
