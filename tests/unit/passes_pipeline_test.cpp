// passes/Pipeline: the emit stages, named once; the IR after each pass.
#include <doctest/doctest.h>

#include <set>
#include <sstream>
#include <string>

#include "ir/IRParser.h"
#include "ir/Printer.h"
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

TEST_CASE("pipeline: print-after shows the IR after the passes it names, in pipeline order") {
  gsl::ir::IRParseResult r = gsl::ir::parseModule(
      "np = 2\nmesh @m = [x: 2]\n\n"
      "func @f(%0: f32[4, 2] @shard(m, [x, _])) -> (f32[4, 2]) {\n"
      "  %1 = exp %0 : f32[4, 2]\n"
      "  %2 = exp %0 : f32[4, 2]\n"
      "  %3 = add %1, %2 : f32[4, 2]\n"
      "  return %3\n"
      "}\n");
  REQUIRE_MESSAGE(r.module, r.error);
  std::ostringstream os;
  gsl::passes::PrintAfter print{{"shape-inference", "partition", "simplify"}, &os};
  gsl::passes::runGlobalPipeline(*r.module, &print);
  auto local = gsl::passes::buildPerRankProgram(*r.module, *r.module->functions[0], false, &print);
  const std::string s = os.str();
  size_t shape = s.find("// ----- IR after shape-inference -----\nnp = 2\n");
  size_t part = s.find("// ----- IR after partition (@f) -----\nfunc @f(%0: f32[2, 2]");
  size_t simp = s.find("// ----- IR after simplify (@f) -----\nfunc @f(%0: f32[2, 2]");
  REQUIRE(shape != std::string::npos);
  REQUIRE(part != std::string::npos);
  REQUIRE(simp != std::string::npos);
  CHECK(shape < part);
  CHECK(part < simp);
  CHECK(s.find("IR after training") == std::string::npos);     // not asked for
  CHECK(s.find("IR after propagation") == std::string::npos);
  // The partitioned program still computes exp twice; simplify merges them.
  auto count = [&](size_t from, size_t to) {
    int n = 0;
    for (size_t p = s.find(" = exp ", from); p < to; p = s.find(" = exp ", p + 1)) ++n;
    return n;
  };
  CHECK(count(part, simp) == 2);
  CHECK(count(simp, s.size()) == 1);
  // The printed module is real IR: read back and partitioned without a
  // printer, it gives the same per-rank program.
  std::string global = s.substr(shape, part - shape);
  global = global.substr(global.find('\n') + 1);
  gsl::ir::IRParseResult r2 = gsl::ir::parseModule(global);
  REQUIRE_MESSAGE(r2.module, r2.error);
  auto local2 = gsl::passes::buildPerRankProgram(*r2.module, *r2.module->functions[0], false);
  CHECK(gsl::ir::printFunction(*local2) == gsl::ir::printFunction(*local));
}
