// Hostile nesting far beyond the limit (kMaxNesting, 200 levels): programs
// of 100,000 levels, too large for the diagnostics corpus, must end in the
// limit's message, never in a stack overflow (ANTLR's recursive descent
// follows prefix operators, ** and `else if` one call per level) and not
// in quadratic parsing time (`else if` chains).
#include <doctest/doctest.h>

#include <chrono>
#include <string>

#include "frontend/Frontend.h"

namespace {

struct Result {
  bool ok;
  std::string first;  // "LINE:COL: MESSAGE" of the first diagnostic
  double seconds;
};

Result compile(const std::string& text) {
  gsl::SourceManager sm;
  gsl::Diagnostics diags(sm);
  gsl::frontend::Options o;
  auto t0 = std::chrono::steady_clock::now();
  auto prog = gsl::frontend::compileSource("deep.gsl", text, o, sm, diags);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string first;
  if (!diags.all().empty()) {
    const auto& d = diags.all()[0];
    first = std::to_string(d.loc.line) + ":" + std::to_string(d.loc.col) + ": " + d.message;
  }
  return {prog != nullptr, first, s};
}

std::string repeat(const std::string& s, int n) {
  std::string r;
  r.reserve(s.size() * n);
  for (int i = 0; i < n; ++i) r += s;
  return r;
}

const std::string kExpr = "expression is nested too deeply (more than 200 operators deep; split it with let)";
const std::string kProgram = "program is nested too deeply (more than 200 levels)";

}  // namespace

TEST_CASE("deep nesting: 100,000 prefix minus signs") {
  Result r = compile("const X = " + repeat("-", 100000) + "1\n");
  CHECK_FALSE(r.ok);
  // The 1001st sign (column 11 + 1000) is where the parser stops.
  CHECK(r.first == "1:1011: " + kExpr);
}

TEST_CASE("deep nesting: 100,000 `not`") {
  Result r = compile("const X = " + repeat("not ", 100000) + "true\n");
  CHECK_FALSE(r.ok);
  CHECK(r.first == "1:4011: " + kExpr);
}

TEST_CASE("deep nesting: a chain of 100,000 ** (right-associative)") {
  Result r = compile("const X = " + repeat("2 ** ", 100000) + "1\n");
  CHECK_FALSE(r.ok);
  CHECK(r.first == "1:5013: " + kExpr);
}

TEST_CASE("deep nesting: 150 brackets each holding 900 minus signs") {
  Result r = compile("const X = " + repeat("(" + repeat("-", 900), 150) + "1" + repeat(")", 150) + "\n");
  CHECK_FALSE(r.ok);
  CHECK(r.first == "1:1011: " + kExpr);
}

TEST_CASE("deep nesting: 100,000 brackets") {
  Result r = compile("const X = " + repeat("(", 100000) + "1" + repeat(")", 100000) + "\n");
  CHECK_FALSE(r.ok);
  CHECK(r.first == "1:211: " + kProgram);
}

TEST_CASE("deep nesting: an `else if` chain of 20,000 links, in linear time") {
  // Line 2 opens the chain; the link on line 2 + k is the k-th `else if`.
  // With fn main's block, the 1000th link is the 1001st level.
  std::string text = "fn main() {\n  if false { print(0)\n" + repeat("  } else if false { print(0)\n", 20000) +
                     "  } else { print(1) }\n}\n";
  Result r = compile(text);
  CHECK_FALSE(r.ok);
  CHECK(r.first == "1002:5: " + kProgram);
  CHECK(r.seconds < 20);  // without the check before parsing: minutes
}

TEST_CASE("deep nesting: chains within the limit still compile") {
  Result r = compile("const X = -(-(-2)) ** 2 ** 2\n"
                     "fn main() {\n  let y = not not true\n"
                     "  if X == 1 { print(1) } else if X == 2 { print(2) } else if y { print(X) }\n"
                     "  else { print(0) }\n}\n");
  CHECK_MESSAGE(r.ok, r.first);
}
