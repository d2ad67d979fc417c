// passes/ReshapeLayout: which shardings keep every rank's block one
// contiguous range of the row-major order, and the sharding of a reshaped
// shape that keeps the same ranges.
#include <doctest/doctest.h>

#include "ir/IRParser.h"
#include "passes/ReshapeLayout.h"

using namespace gsl;

namespace {

ir::Sharding sh(std::vector<std::vector<std::string>> dims) {
  ir::Sharding s;
  s.mesh = "m";
  s.dims = std::move(dims);
  return s;
}

}  // namespace

TEST_CASE("reshape layout: contiguous blocks and their start weights") {
  ir::IRParseResult r = ir::parseModule("np = 4\nmesh @m = [a: 2, b: 2]\n");
  REQUIRE_MESSAGE(r.module, r.error);
  const ir::Module& m = *r.module;
  // [2, 4] @[a, b]: rank (i, j) holds row i, columns 2j..2j+1: start 4i + 2j.
  auto w = passes::contiguousLayout(m, {2, 4}, sh({{"a"}, {"b"}}));
  REQUIRE(w);
  CHECK(*w == std::map<std::string, int64_t>{{"a", 4}, {"b", 2}});
  // [8] @[(b, a)]: start 4b + 2a.
  w = passes::contiguousLayout(m, {8}, sh({{"b", "a"}}));
  REQUIRE(w);
  CHECK(*w == std::map<std::string, int64_t>{{"a", 2}, {"b", 4}});
  // [4, 4] @[a, b]: blocks of two rows are not contiguous.
  CHECK_FALSE(passes::contiguousLayout(m, {4, 4}, sh({{"a"}, {"b"}})));
  // Unsplit: contiguous, no weights.
  w = passes::contiguousLayout(m, {4, 4}, sh({{}, {}}));
  REQUIRE(w);
  CHECK(w->empty());
}

TEST_CASE("reshape layout: the same blocks after a reshape") {
  ir::IRParseResult r = ir::parseModule("np = 4\nmesh @m = [a: 2, b: 2]\n");
  REQUIRE_MESSAGE(r.module, r.error);
  const ir::Module& m = *r.module;
  auto s = passes::sameLayoutSharding(m, {2, 4}, sh({{"a"}, {"b"}}), {8});
  REQUIRE(s);
  CHECK(s->dims == std::vector<std::vector<std::string>>{{"a", "b"}});
  s = passes::sameLayoutSharding(m, {8}, sh({{"b", "a"}}), {2, 4});
  REQUIRE(s);
  CHECK(s->dims == std::vector<std::vector<std::string>>{{"b"}, {"a"}});
  s = passes::sameLayoutSharding(m, {8}, sh({{"a", "b"}}), {4, 2});
  REQUIRE(s);
  CHECK(s->dims == std::vector<std::vector<std::string>>{{"a", "b"}, {}});
  s = passes::sameLayoutSharding(m, {8}, sh({{"a"}}), {2, 4});
  REQUIRE(s);
  CHECK(s->dims == std::vector<std::vector<std::string>>{{"a"}, {}});
  // A size-1 dim takes no axis; [16] @[(a, b)] as [2, 8]: a takes the two
  // rows, b halves each row (start 8a + 4b either way).
  s = passes::sameLayoutSharding(m, {8}, sh({{"a", "b"}}), {1, 8});
  REQUIRE(s);
  CHECK(s->dims == std::vector<std::vector<std::string>>{{}, {"a", "b"}});
  s = passes::sameLayoutSharding(m, {16}, sh({{"a", "b"}}), {2, 8});
  REQUIRE(s);
  CHECK(s->dims == std::vector<std::vector<std::string>>{{"a"}, {"b"}});
  // Not contiguous, or nothing split: no layout to keep.
  CHECK_FALSE(passes::sameLayoutSharding(m, {4, 4}, sh({{"a"}, {"b"}}), {16}));
  CHECK_FALSE(passes::sameLayoutSharding(m, {8}, sh({{}}), {2, 4}));
}
