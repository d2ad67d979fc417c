// An einsum op's spec ("ab,bc->ac"), parsed once where it enters: the front
// end (einsum's string literal), the IR parser (the `spec` attr's string)
// and the gradient rule (the specs it writes). The op keeps it, parsed, as
// its `spec` attr (ir/Attr.h); the IR prints its text.
#pragma once
#include <compare>
#include <cstddef>
#include <string>
#include <vector>

namespace gsl::ir {

struct EinsumSpec {
  std::string text;                 // as written; the rest follows from it
  std::vector<std::string> inputs;  // one label string per operand
  std::string output;               // the output labels
  bool operator==(const EinsumSpec& o) const { return text == o.text; }
  std::strong_ordering operator<=>(const EinsumSpec& o) const { return text <=> o.text; }
};

// Parses "ab,bc->ac" (implicit output when "->" is absent, as NumPy) for an
// einsum of `numOperands` operands. Returns "" or an error message.
std::string parseEinsum(const std::string& spec, size_t numOperands, EinsumSpec& out);
// A spec the compiler writes itself: an invalid one is an internal error.
EinsumSpec einsumSpec(const std::string& spec, size_t numOperands);

}  // namespace gsl::ir
