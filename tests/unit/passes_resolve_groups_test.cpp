// passes/ResolveGroups: every collective of a per-rank program gets its
// groups, one table per mesh and axis list, and the IR text is unchanged.
#include <doctest/doctest.h>

#include <string>

#include "ir/IRParser.h"
#include "ir/Printer.h"
#include "passes/ResolveGroups.h"

using namespace gsl;

TEST_CASE("resolve-groups: each collective's groups, shared per (mesh, axes), the text unchanged") {
  const std::string text =
      "np = 4\nmesh @m = [a: 2, b: 2]\n\n"
      "func @f(%0: f32[4]) -> (f32[4], f32[4], f32[8]) {\n"
      "  %1 = all_reduce %0 {axes = [1], mesh = \"m\", reduce = \"sum\"} : f32[4]\n"
      "  %2 = all_reduce %1 {axes = [0], mesh = \"m\", reduce = \"max\"} : f32[4]\n"
      "  %3 = all_gather %2 {axes = [1], dim = 0, mesh = \"m\", n = 2} : f32[8]\n"
      "  %4 = exp %2 : f32[4]\n"
      "  return %1, %4, %3\n"
      "}\n";
  ir::IRParseResult r = ir::parseModule(text);
  REQUIRE_MESSAGE(r.module, r.error);
  ir::Function& f = *r.module->functions[0];
  const std::string before = ir::printModule(*r.module);
  passes::resolveGroups(*r.module, f);
  CHECK(ir::printModule(*r.module) == before);

  const ir::Op& overB = *f.ops[0];
  const ir::Op& overA = *f.ops[1];
  const ir::Op& gather = *f.ops[2];
  CHECK(!f.ops[3]->groups);  // not a collective
  REQUIRE(overB.groups);
  REQUIRE(overA.groups);
  CHECK(gather.groups == overB.groups);  // the same mesh and axes: one table
  CHECK(overA.groups != overB.groups);
  // Ranks are row-major over [a: 2, b: 2]: over b, {0, 1} and {2, 3}; over
  // a, {0, 2} and {1, 3}.
  CHECK(overB.groups->groups == std::vector<std::vector<int>>{{0, 1}, {2, 3}});
  CHECK(overA.groups->groups == std::vector<std::vector<int>>{{0, 2}, {1, 3}});
  CHECK(overA.groups->groupOf == std::vector<int>{0, 1, 0, 1});
  CHECK(overA.groups->indexOf == std::vector<int>{0, 0, 1, 1});
  // Every rank's entry is collectiveGroup's answer for it.
  const ir::Mesh& mesh = *r.module->findMesh("m");
  for (int rank = 0; rank < 4; ++rank)
    for (const ir::Op* op : {&overA, &overB}) {
      int index = -1;
      const auto g = ir::collectiveGroup(mesh, op->attrs.getInts("axes"), rank, &index);
      CHECK(op->groups->groups[(size_t)op->groups->groupOf[(size_t)rank]] == g);
      CHECK(op->groups->indexOf[(size_t)rank] == index);
    }
}
