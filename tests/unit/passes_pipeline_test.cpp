// passes/Pipeline: the emit stages, named once.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "passes/Pipeline.h"

using gsl::passes::EmitKind;

TEST_CASE("pipeline: every emit kind reads back from its name") {
  std::set<std::string> names;
  for (EmitKind k : gsl::passes::kEmitKinds) {
    std::string n = gsl::passes::emitKindName(k);
    CHECK(names.insert(n).second);
    CHECK(gsl::passes::parseEmitKind(n) == k);
  }
  CHECK(names == std::set<std::string>{"ast", "ir", "sharded", "spmd", "llvm"});
  CHECK_FALSE(gsl::passes::parseEmitKind("IR").has_value());
  CHECK_FALSE(gsl::passes::parseEmitKind("").has_value());
}
