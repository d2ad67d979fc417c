#include "support/Text.h"

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

std::string shortest(double v) {
  char b[32];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(b, sizeof b, "%.*g", prec, v);
    if (std::strtod(b, nullptr) == v) break;
  }
  return b;
}

}  // namespace gsl
