// The IR parser's robustness check, shared by the IR core's tests of
// plain and loop programs: truncations and random mutations of a text.
#pragma once
#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "ir/IRParser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

namespace irtext {

// Random edits of a text for the parser's robustness tests: `iterations`
// texts, each `base` with 1 to `maxEdits` edits (a character replaced by
// one of `alphabet`, 1 to `maxErase` characters erased, or one inserted),
// from a xorshift generator seeded with `seed`.
struct Mutations {
  uint64_t seed;
  int iterations;
  int maxEdits;
  int maxErase;
  std::string alphabet;
};

// How many of the prefixes and of the mutations parsed.
struct ParsedCounts {
  int prefixes = 0;
  int mutations = 0;
};

// Every prefix of `base` and every mutation of it either parses or reports
// an error (one of the two, and never a crash); whatever parses verifies
// and prints to a fixed point.
inline ParsedCounts checkTruncationsAndMutations(const std::string& base, const Mutations& m) {
  using namespace gsl::ir;
  ParsedCounts counts;
  for (size_t n = 0; n < base.size(); ++n) {
    IRParseResult r = parseModule(base.substr(0, n));
    CHECK((r.module != nullptr) != !r.error.empty());
    if (r.module) ++counts.prefixes;
  }
  uint64_t s = m.seed;
  auto rnd = [&]() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  };
  for (int iter = 0; iter < m.iterations; ++iter) {
    std::string t = base;
    int edits = 1 + (int)(rnd() % m.maxEdits);
    for (int e = 0; e < edits; ++e) {
      size_t pos = rnd() % t.size();
      switch (rnd() % 3) {
        case 0: t[pos] = m.alphabet[rnd() % m.alphabet.size()]; break;
        case 1: t.erase(pos, 1 + rnd() % m.maxErase); break;
        case 2: t.insert(pos, 1, m.alphabet[rnd() % m.alphabet.size()]); break;
      }
      if (t.empty()) t = "x";
    }
    IRParseResult r = parseModule(t);
    REQUIRE((r.module != nullptr) != !r.error.empty());
    if (r.module) {
      ++counts.mutations;
      CHECK(verify(*r.module) == "");
      std::string p1 = printModule(*r.module);
      IRParseResult again = parseModule(p1);
      REQUIRE_MESSAGE(again.module, again.error);
      CHECK(verify(*again.module) == "");
      CHECK(printModule(*again.module) == p1);
    }
  }
  return counts;
}

}  // namespace irtext
