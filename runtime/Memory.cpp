#include "runtime/Memory.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace gsl::runtime {

std::optional<uint64_t> parseByteSize(const std::string& s) {
  size_t i = 0;
  std::string digits;
  while (i < s.size() && (std::isdigit((unsigned char)s[i]) || s[i] == '.')) digits += s[i++];
  if (digits.empty() || digits == "." || std::count(digits.begin(), digits.end(), '.') > 1) return std::nullopt;
  std::string unit = s.substr(i);
  for (char& c : unit) c = (char)std::toupper((unsigned char)c);
  int shift = 0;
  if (!unit.empty()) {
    const std::string letters = "KMGT";
    auto p = letters.find(unit[0]);
    if (p != std::string::npos) {
      shift = 10 * (int)(p + 1);
      unit = unit.substr(1);
    }
  }
  if (!(unit.empty() || unit == "B" || (shift && unit == "IB"))) return std::nullopt;
  bool fraction = digits.find('.') != std::string::npos;
  if (fraction && !shift) return std::nullopt;  // bytes are whole
  if (!fraction) {
    uint64_t v = 0;
    for (char c : digits) {
      if (v > (UINT64_MAX - 9) / 10) return std::nullopt;
      v = v * 10 + (uint64_t)(c - '0');
    }
    if (shift && v > (UINT64_MAX >> shift)) return std::nullopt;
    return v << shift;
  }
  long double v = std::strtold(digits.c_str(), nullptr) * std::ldexp(1.0L, shift);
  if (!(v < 18446744073709551615.0L)) return std::nullopt;
  return (uint64_t)std::llroundl(v);
}

std::string formatBytes(uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = (double)bytes;
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  // 1023.96 KiB would print as "1024.0 KiB": move up instead.
  if (v >= 1023.95 && u < 6) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

std::optional<uint64_t> availableMemory() {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream ss(line.substr(13));
    uint64_t kb = 0;
    std::string unit;
    if (ss >> kb >> unit && unit == "kB") return kb * 1024;
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace gsl::runtime
