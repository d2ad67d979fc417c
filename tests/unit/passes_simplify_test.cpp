// passes/Simplify: before/after IR text cases for CSE and dead-code
// elimination on per-rank programs.
#include <doctest/doctest.h>

#include <string>

#include "ir/IRParser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/Simplify.h"

using namespace gsl;

namespace {

// Parses `before`, simplifies every function, returns the printed module.
std::string simplified(const std::string& before, int* removed = nullptr) {
  ir::IRParseResult r = ir::parseModule(before);
  REQUIRE_MESSAGE(r.module, r.error);
  int n = 0;
  for (auto& f : r.module->functions) {
    n += passes::simplify(*f);
    CHECK(ir::verifyFunction(*r.module, *f) == "");
  }
  if (removed) *removed = n;
  return ir::printModule(*r.module);
}

const char* kHeader = "np = 4\nmesh @m = [x: 4]\n\n";

}  // namespace

TEST_CASE("simplify: a repeated all_to_all of the same value is computed once") {
  std::string before = std::string(kHeader) +
      "func @f(%0: f32[8, 2] @shard(m, [_, x])) -> (f32[2, 8], f32[2, 8]) {\n"
      "  %1 = all_to_all %0 {axes = [0], concat_dim = 1, mesh = \"m\", n = 4, split_dim = 0} : f32[2, 8] @shard(m, [x, _])\n"
      "  %2 = exp %1 : f32[2, 8] @shard(m, [x, _])\n"
      "  %3 = all_to_all %0 {axes = [0], concat_dim = 1, mesh = \"m\", n = 4, split_dim = 0} : f32[2, 8] @shard(m, [x, _])\n"
      "  %4 = mul %3, %2 : f32[2, 8] @shard(m, [x, _])\n"
      "  return %2, %4\n"
      "}\n";
  std::string after = std::string(kHeader) +
      "func @f(%0: f32[8, 2] @shard(m, [_, x])) -> (f32[2, 8], f32[2, 8]) {\n"
      "  %1 = all_to_all %0 {axes = [0], concat_dim = 1, mesh = \"m\", n = 4, split_dim = 0} : f32[2, 8] @shard(m, [x, _])\n"
      "  %2 = exp %1 : f32[2, 8] @shard(m, [x, _])\n"
      "  %3 = mul %1, %2 : f32[2, 8] @shard(m, [x, _])\n"
      "  return %2, %3\n"
      "}\n";
  int removed = 0;
  CHECK(simplified(before, &removed) == after);
  CHECK(removed == 1);
}

TEST_CASE("simplify: CSE follows chains and needs equal attributes") {
  std::string before = std::string(kHeader) +
      "func @f(%0: f32[4]) -> (f32, f32, f32) {\n"
      "  %1 = exp %0 : f32[4]\n"
      "  %2 = exp %0 : f32[4]\n"
      "  %3 = sum %1 {axis = [0], keepdims = false} : f32\n"
      "  %4 = sum %2 {axis = [0], keepdims = false} : f32\n"
      "  %5 = all_reduce %3 {axes = [0], mesh = \"m\", reduce = \"sum\"} : f32\n"
      "  %6 = all_reduce %4 {axes = [0], mesh = \"m\", reduce = \"max\"} : f32\n"
      "  %7 = all_reduce %4 {axes = [0], mesh = \"m\", reduce = \"sum\"} : f32\n"
      "  return %5, %6, %7\n"
      "}\n";
  std::string after = std::string(kHeader) +
      "func @f(%0: f32[4]) -> (f32, f32, f32) {\n"
      "  %1 = exp %0 : f32[4]\n"
      "  %2 = sum %1 {axis = [0], keepdims = false} : f32\n"
      "  %3 = all_reduce %2 {axes = [0], mesh = \"m\", reduce = \"sum\"} : f32\n"
      "  %4 = all_reduce %2 {axes = [0], mesh = \"m\", reduce = \"max\"} : f32\n"
      "  return %3, %4, %3\n"
      "}\n";
  CHECK(simplified(before) == after);
}

TEST_CASE("simplify: ops nothing uses are dropped, collectives included") {
  std::string before = std::string(kHeader) +
      "func @f(%0: f32[4]) -> (f32[4]) {\n"
      "  %1 = all_gather %0 {axes = [0], dim = 0, mesh = \"m\", n = 4} : f32[16]\n"
      "  %2 = sum %1 {axis = [0], keepdims = false} : f32\n"
      "  %3 = neg %0 : f32[4]\n"
      "  return %3\n"
      "}\n";
  std::string after = std::string(kHeader) +
      "func @f(%0: f32[4]) -> (f32[4]) {\n"
      "  %1 = neg %0 : f32[4]\n"
      "  return %1\n"
      "}\n";
  int removed = 0;
  CHECK(simplified(before, &removed) == after);
  CHECK(removed == 2);
}

TEST_CASE("simplify: a program without repeats or dead ops is unchanged") {
  std::string text = std::string(kHeader) +
      "func @f(%0: f32[4], %1: f32[4]) -> (f32[4]) {\n"
      "  %2 = add %0, %1 : f32[4]\n"
      "  %3 = add %1, %0 : f32[4]\n"
      "  %4 = mul %2, %3 : f32[4]\n"
      "  return %4\n"
      "}\n";
  int removed = -1;
  CHECK(simplified(text, &removed) == text);
  CHECK(removed == 0);
}

TEST_CASE("simplify: a where on a constant condition keeps the branch it picks") {
  std::string before = std::string(kHeader) +
      "func @f(%0: f32[4], %1: f32[4]) -> (f32[4]) {\n"
      "  %2 = constant {value = 0} : i32\n"
      "  %3 = constant {value = 1} : i32\n"
      "  %4 = eq %2, %3 : bool\n"
      "  %5 = exp %0 : f32[4]\n"
      "  %6 = all_reduce %1 {axes = [0], mesh = \"m\", reduce = \"sum\"} : f32[4]\n"
      "  %7 = where %4, %5, %6 : f32[4]\n"
      "  return %7\n"
      "}\n";
  std::string after = std::string(kHeader) +
      "func @f(%0: f32[4], %1: f32[4]) -> (f32[4]) {\n"
      "  %2 = all_reduce %1 {axes = [0], mesh = \"m\", reduce = \"sum\"} : f32[4]\n"
      "  return %2\n"
      "}\n";
  CHECK(simplified(before) == after);
  // a runtime condition, or a branch of another type (broadcast), stays
  std::string keep = std::string(kHeader) +
      "func @f(%0: f32[4], %1: bool) -> (f32[4], f32[4]) {\n"
      "  %2 = constant {value = true} : bool\n"
      "  %3 = constant {value = 2.0} : f32\n"
      "  %4 = where %2, %3, %0 : f32[4]\n"
      "  %5 = where %1, %0, %3 : f32[4]\n"
      "  return %4, %5\n"
      "}\n";
  CHECK(simplified(keep) == keep);
}

TEST_CASE("simplify: CSE compares attribute values by type and bits, not by text") {
  // The same float twice is one constant; 0.0 and -0.0 are two (as are an
  // int and a float attribute of equal value).
  std::string before = std::string(kHeader) +
      "func @f(%0: f32) -> (f32, f32, f32, f32, f32) {\n"
      "  %1 = constant {value = 0.5} : f32\n"
      "  %2 = constant {value = 0.5} : f32\n"
      "  %3 = constant {value = 0.0} : f32\n"
      "  %4 = constant {value = -0.0} : f32\n"
      "  %5 = constant {value = 1} : f32\n"
      "  %6 = constant {value = 1.0} : f32\n"
      "  %7 = mul %0, %1 : f32\n"
      "  %8 = mul %0, %2 : f32\n"
      "  %9 = mul %0, %3 : f32\n"
      "  %10 = mul %0, %4 : f32\n"
      "  %11 = add %5, %6 : f32\n"
      "  return %7, %8, %9, %10, %11\n"
      "}\n";
  std::string after = std::string(kHeader) +
      "func @f(%0: f32) -> (f32, f32, f32, f32, f32) {\n"
      "  %1 = constant {value = 0.5} : f32\n"
      "  %2 = constant {value = 0.0} : f32\n"
      "  %3 = constant {value = -0.0} : f32\n"
      "  %4 = constant {value = 1} : f32\n"
      "  %5 = constant {value = 1.0} : f32\n"
      "  %6 = mul %0, %1 : f32\n"
      "  %7 = mul %0, %2 : f32\n"
      "  %8 = mul %0, %3 : f32\n"
      "  %9 = add %4, %5 : f32\n"
      "  return %6, %6, %7, %8, %9\n"
      "}\n";
  int removed = 0;
  CHECK(simplified(before, &removed) == after);
  CHECK(removed == 2);
}
