// passes/ReshapeLayout: which shardings keep every rank's block one
// contiguous range of the row-major order, and the sharding of a reshaped
// shape that keeps the same ranges.
#include <doctest/doctest.h>

#include "ir/IRParser.h"
#include "passes/ReshapeLayout.h"

using namespace gsl;

namespace {

ir::Sharding sh(std::vector<std::vector<std::string>> dims) {
  return gsl::ir::Sharding::fromNames("m", dims);
}

// A layout's weights by axis name.
std::map<std::string, int64_t> byName(const std::map<Symbol, int64_t>& w) { return {w.begin(), w.end()}; }

}  // namespace

TEST_CASE("reshape layout: contiguous blocks and their start weights") {
  ir::IRParseResult r = ir::parseModule("np = 4\nmesh @m = [a: 2, b: 2]\n");
  REQUIRE_MESSAGE(r.module, r.error);
  const ir::Module& m = *r.module;
  // [2, 4] @[a, b]: rank (i, j) holds row i, columns 2j..2j+1: start 4i + 2j.
  auto w = passes::contiguousLayout(m, {2, 4}, sh({{"a"}, {"b"}}));
  REQUIRE(w);
  CHECK(byName(*w) == std::map<std::string, int64_t>{{"a", 4}, {"b", 2}});
  // [8] @[(b, a)]: start 4b + 2a.
  w = passes::contiguousLayout(m, {8}, sh({{"b", "a"}}));
  REQUIRE(w);
  CHECK(byName(*w) == std::map<std::string, int64_t>{{"a", 2}, {"b", 4}});
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
  CHECK(gsl::ir::namesOf(s->dims) == std::vector<std::vector<std::string>>{{"a", "b"}});
  s = passes::sameLayoutSharding(m, {8}, sh({{"b", "a"}}), {2, 4});
  REQUIRE(s);
  CHECK(gsl::ir::namesOf(s->dims) == std::vector<std::vector<std::string>>{{"b"}, {"a"}});
  s = passes::sameLayoutSharding(m, {8}, sh({{"a", "b"}}), {4, 2});
  REQUIRE(s);
  CHECK(gsl::ir::namesOf(s->dims) == std::vector<std::vector<std::string>>{{"a", "b"}, {}});
  s = passes::sameLayoutSharding(m, {8}, sh({{"a"}}), {2, 4});
  REQUIRE(s);
  CHECK(gsl::ir::namesOf(s->dims) == std::vector<std::vector<std::string>>{{"a"}, {}});
  // A size-1 dim takes no axis; [16] @[(a, b)] as [2, 8]: a takes the two
  // rows, b halves each row (start 8a + 4b either way).
  s = passes::sameLayoutSharding(m, {8}, sh({{"a", "b"}}), {1, 8});
  REQUIRE(s);
  CHECK(gsl::ir::namesOf(s->dims) == std::vector<std::vector<std::string>>{{}, {"a", "b"}});
  s = passes::sameLayoutSharding(m, {16}, sh({{"a", "b"}}), {2, 8});
  REQUIRE(s);
  CHECK(gsl::ir::namesOf(s->dims) == std::vector<std::vector<std::string>>{{"a"}, {"b"}});
  // Not contiguous, or nothing split: no layout to keep.
  CHECK_FALSE(passes::sameLayoutSharding(m, {4, 4}, sh({{"a"}, {"b"}}), {16}));
  CHECK_FALSE(passes::sameLayoutSharding(m, {8}, sh({{}}), {2, 4}));
}

TEST_CASE("reshape layout: a padded split as the one split dim keeps its ranges") {
  ir::IRParseResult r = ir::parseModule("np = 4\nmesh @m = [a: 2, b: 2]\n");
  REQUIRE_MESSAGE(r.module, r.error);
  const ir::Module& m = *r.module;
  // [14, 3] @[(a, b), _]: blocks of ceil(14 / 4) = 4 rows of 3, rank (i, j)
  // starts at 24i + 12j; the last block's padding lies past the end.
  auto w = passes::contiguousLayout(m, {14, 3}, sh({{"a", "b"}, {}}));
  REQUIRE(w);
  CHECK(byName(*w) == std::map<std::string, int64_t>{{"a", 24}, {"b", 12}});
  // Size-one dims before it are fine; a split dim before it is not (its
  // padding rows would overlap the next block), nor a padded dim before
  // another split one.
  CHECK(passes::contiguousLayout(m, {1, 7}, sh({{}, {"a"}})));
  CHECK_FALSE(passes::contiguousLayout(m, {2, 7}, sh({{"a"}, {"b"}})));
  CHECK_FALSE(passes::contiguousLayout(m, {7, 4}, sh({{"a"}, {"b"}})));
  // [14, 3] to [7, 2, 3]: blocks of 4 rows are blocks of 2 x 2 rows.
  auto s = passes::sameLayoutSharding(m, {14, 3}, sh({{"a", "b"}, {}}), {7, 2, 3});
  REQUIRE(s);
  CHECK(gsl::ir::namesOf(s->dims) == std::vector<std::vector<std::string>>{{"a", "b"}, {}, {}});
  s = passes::sameLayoutSharding(m, {7, 2, 3}, sh({{"a", "b"}, {}, {}}), {14, 3});
  REQUIRE(s);
  CHECK(gsl::ir::namesOf(s->dims) == std::vector<std::vector<std::string>>{{"a", "b"}, {}});
  // [7, 4] @[a, _] to [14, 2]: blocks of 4 x 4 elements, but 14 rows over 2
  // are blocks of 7 x 2: no sharding of [14, 2] keeps the ranges.
  CHECK_FALSE(passes::sameLayoutSharding(m, {7, 4}, sh({{"a"}, {}}), {14, 2}));
}
