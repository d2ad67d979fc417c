// passes/CombineAllReduce: before/after IR text cases on per-rank programs.
#include <doctest/doctest.h>

#include <string>

#include "ir/IRParser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/CombineAllReduce.h"

using namespace gsl;

namespace {

std::string combined(const std::string& before) {
  ir::IRParseResult r = ir::parseModule(before);
  REQUIRE_MESSAGE(r.module, r.error);
  for (auto& f : r.module->functions) {
    passes::combineAllReduces(*f);
    CHECK(ir::verifyFunction(*r.module, *f) == "");
  }
  return ir::printModule(*r.module);
}

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

const char* kHeader = "np = 4\nmesh @m = [x: 4]\n\n";

}  // namespace

TEST_CASE("combine: tagged scalar sums are reduced by one all_reduce of a vector") {
  std::string before = std::string(kHeader) +
      "func @f(%0: f32[4] @shard(m, [x]), %1: f32[2, 3] @shard(m, [x, _])) -> (f32) {\n"
      "  %2 = sum %0 {axis = [0], combine = \"g\", keepdims = false} : f32 @shard(m, []) partial(x)\n"
      "  %3 = sum %1 {axis = [0, 1], combine = \"g\", keepdims = false} : f32 @shard(m, []) partial(x)\n"
      "  %4 = all_reduce %2 {axes = [0], mesh = \"m\", reduce = \"sum\"} : f32\n"
      "  %5 = all_reduce %3 {axes = [0], mesh = \"m\", reduce = \"sum\"} : f32\n"
      "  %6 = add %4, %5 : f32\n"
      "  return %6\n"
      "}\n";
  std::string after = combined(before);
  CHECK(count(after, "all_reduce") == 1);
  std::string want = std::string(kHeader) +
      "func @f(%0: f32[4] @shard(m, [x]), %1: f32[2, 3] @shard(m, [x, _])) -> (f32) {\n"
      "  %2 = sum %0 {axis = [0], combine = \"g\", keepdims = false} : f32 @shard(m, []) partial(x)\n"
      "  %3 = sum %1 {axis = [0, 1], combine = \"g\", keepdims = false} : f32 @shard(m, []) partial(x)\n"
      "  %4 = reshape %2 {shape = [1]} : f32[1]\n"
      "  %5 = reshape %3 {shape = [1]} : f32[1]\n"
      "  %6 = concat %4, %5 {axis = 0} : f32[2]\n"
      "  %7 = all_reduce %6 {axes = [0], mesh = \"m\", reduce = \"sum\"} : f32[2]\n"
      "  %8 = slice %7 {axis = 0, end = 1, start = 0} : f32[1]\n"
      "  %9 = reshape %8 {shape = []} : f32\n"
      "  %10 = slice %7 {axis = 0, end = 2, start = 1} : f32[1]\n"
      "  %11 = reshape %10 {shape = []} : f32\n"
      "  %12 = add %9, %11 : f32\n"
      "  return %12\n"
      "}\n";
  CHECK(after == want);
}

TEST_CASE("combine: small untagged all_reduces of any shape, large ones left alone") {
  // Untagged small sums: one all_reduce, idempotent.
  std::string plain = std::string(kHeader) +
      "func @f(%0: f32[4] @shard(m, [x]), %1: f32[4] @shard(m, [x])) -> (f32) {\n"
      "  %2 = sum %0 {axis = [0], keepdims = false} : f32 @shard(m, []) partial(x)\n"
      "  %3 = sum %1 {axis = [0], keepdims = false} : f32 @shard(m, []) partial(x)\n"
      "  %4 = all_reduce %2 {axes = [0], mesh = \"m\", reduce = \"sum\"} : f32\n"
      "  %5 = all_reduce %3 {axes = [0], mesh = \"m\", reduce = \"sum\"} : f32\n"
      "  %6 = add %4, %5 : f32\n"
      "  return %6\n"
      "}\n";
  CHECK(combined(plain) == combined(combined(plain)));
  CHECK(count(combined(plain), "all_reduce") == 1);
  // Gradients of two shapes, one an argument (no defining op): packed
  // flat, unpacked to their shapes, the new ops first.
  std::string grads = std::string(kHeader) +
      "func @f(%0: f32[2, 3], %1: f32[4]) -> (f32[2, 3], f32[4]) {\n"
      "  %2 = neg %1 : f32[4]\n"
      "  %3 = all_reduce %0 {axes = [0], mesh = \"m\", reduce = \"sum\"} : f32[2, 3]\n"
      "  %4 = all_reduce %2 {axes = [0], mesh = \"m\", reduce = \"sum\"} : f32[4]\n"
      "  return %3, %4\n"
      "}\n";
  std::string want = std::string(kHeader) +
      "func @f(%0: f32[2, 3], %1: f32[4]) -> (f32[2, 3], f32[4]) {\n"
      "  %2 = neg %1 : f32[4]\n"
      "  %3 = reshape %0 {shape = [6]} : f32[6]\n"
      "  %4 = reshape %2 {shape = [4]} : f32[4]\n"
      "  %5 = concat %3, %4 {axis = 0} : f32[10]\n"
      "  %6 = all_reduce %5 {axes = [0], mesh = \"m\", reduce = \"sum\"} : f32[10]\n"
      "  %7 = slice %6 {axis = 0, end = 6, start = 0} : f32[6]\n"
      "  %8 = reshape %7 {shape = [2, 3]} : f32[2, 3]\n"
      "  %9 = slice %6 {axis = 0, end = 10, start = 6} : f32[4]\n"
      "  %10 = reshape %9 {shape = [4]} : f32[4]\n"
      "  return %8, %10\n"
      "}\n";
  CHECK(combined(grads) == want);
  // Above kCombineBytes (64 KiB) an all_reduce is bandwidth-bound: left alone.
  std::string large = std::string(kHeader) +
      "func @f(%0: f32[128, 256], %1: f32[4]) -> (f32[128, 256], f32[4]) {\n"
      "  %2 = all_reduce %0 {axes = [0], mesh = \"m\", reduce = \"sum\"} : f32[128, 256]\n"
      "  %3 = all_reduce %1 {axes = [0], mesh = \"m\", reduce = \"sum\"} : f32[4]\n"
      "  return %2, %3\n"
      "}\n";
  CHECK(count(combined(large), "all_reduce") == 2);
}

TEST_CASE("combine: a use before the last operand, and other reductions, are left alone") {
  // The first reduced value is used before the second sum is computed: a
  // combined all_reduce would have to come after its use.
  std::string early = std::string(kHeader) +
      "func @f(%0: f32[4] @shard(m, [x]), %1: f32[4] @shard(m, [x])) -> (f32) {\n"
      "  %2 = sum %0 {axis = [0], combine = \"g\", keepdims = false} : f32 @shard(m, []) partial(x)\n"
      "  %3 = all_reduce %2 {axes = [0], mesh = \"m\", reduce = \"sum\"} : f32\n"
      "  %4 = mul %1, %3 : f32[4] @shard(m, [x])\n"
      "  %5 = sum %4 {axis = [0], combine = \"g\", keepdims = false} : f32 @shard(m, []) partial(x)\n"
      "  %6 = all_reduce %5 {axes = [0], mesh = \"m\", reduce = \"sum\"} : f32\n"
      "  return %6\n"
      "}\n";
  CHECK(count(combined(early), "all_reduce") == 2);
  // Different reductions are different groups.
  std::string mixed = std::string(kHeader) +
      "func @f(%0: f32[4] @shard(m, [x]), %1: f32[4] @shard(m, [x])) -> (f32) {\n"
      "  %2 = sum %0 {axis = [0], combine = \"g\", keepdims = false} : f32 @shard(m, []) partial(x)\n"
      "  %3 = sum %1 {axis = [0], combine = \"g\", keepdims = false} : f32 @shard(m, []) partial(x)\n"
      "  %4 = all_reduce %2 {axes = [0], mesh = \"m\", reduce = \"sum\"} : f32\n"
      "  %5 = all_reduce %3 {axes = [0], mesh = \"m\", reduce = \"max\"} : f32\n"
      "  %6 = add %4, %5 : f32\n"
      "  return %6\n"
      "}\n";
  CHECK(count(combined(mixed), "all_reduce") == 2);
}
