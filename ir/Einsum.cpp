#include "ir/Einsum.h"

#include <map>

#include "support/Diagnostics.h"

namespace gsl::ir {

std::string parseEinsum(const std::string& spec, size_t numOperands, EinsumSpec& out) {
  out = {};
  out.text = spec;
  std::string lhs = spec, rhs;
  bool explicitOut = false;
  if (auto p = spec.find("->"); p != std::string::npos) {
    lhs = spec.substr(0, p);
    rhs = spec.substr(p + 2);
    explicitOut = true;
  }
  std::string cur;
  for (char c : lhs) {
    if (c == ',') {
      out.inputs.push_back(cur);
      cur.clear();
    } else if (c == ' ') {
    } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      cur += c;
    } else {
      return std::string("einsum spec \"") + spec + "\" has invalid character '" + c +
             "' (use letters, ',' and '->')";
    }
  }
  out.inputs.push_back(cur);
  if (out.inputs.size() != numOperands)
    return "einsum spec \"" + spec + "\" names " + std::to_string(out.inputs.size()) +
           " operands but " + std::to_string(numOperands) + " were given";
  if (explicitOut) {
    for (char c : rhs) {
      if (c == ' ') continue;
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
        return std::string("einsum spec \"") + spec + "\" has invalid character '" + c + "' in its output";
      if (out.output.find(c) != std::string::npos)
        return std::string("einsum output label '") + c + "' appears twice in \"" + spec + "\"";
      bool found = false;
      for (auto& in : out.inputs) found |= in.find(c) != std::string::npos;
      if (!found) return std::string("einsum output label '") + c + "' does not appear in any input of \"" + spec + "\"";
      out.output += c;
    }
  } else {
    // NumPy implicit mode: labels appearing exactly once, sorted.
    std::map<char, int> count;
    for (auto& in : out.inputs)
      for (char c : in) count[c]++;
    for (auto& [c, n] : count)
      if (n == 1) out.output += c;
  }
  return "";
}

EinsumSpec einsumSpec(const std::string& spec, size_t numOperands) {
  EinsumSpec es;
  std::string err = parseEinsum(spec, numOperands, es);
  GSL_ASSERT(err.empty(), "internal error: " + err);
  return es;
}

}  // namespace gsl::ir
