// Loops (ir/Loop.h) in the passes that handle them so far: simplification
// (never merges loops, keeps a loop while any result is used, simplifies
// bodies), the cost model (a body's cost once per iteration) and shape
// inference (bodies first, then the loop's results).
#include <doctest/doctest.h>

#include <string>

#include "ir/IRParser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/CostModel.h"
#include "passes/ShapeInference.h"
#include "passes/Simplify.h"
#include "ir_texts.h"

using namespace gsl;

namespace {

std::unique_ptr<ir::Module> parse(const std::string& text) {
  ir::IRParseResult r = ir::parseModule(text);
  REQUIRE_MESSAGE(r.module, r.error);
  return std::move(r.module);
}

}  // namespace

TEST_CASE("simplify: loops are never merged, kept while a result is used, their bodies simplified") {
  const char* before =
      "np = 1\n"
      "\n"
      "func @s(%0: f32[2], %1: f32[3, 2]) -> (f32[3, 2]) {\n"
      "  %2, %3 = loop %0, %1 {carried = 1, trip = 3} : f32[2], f32[3, 2] {\n"
      "    body(%4: i32, %5: f32[2], %6: f32[3, 2]):\n"
      "    %7 = dynamic_index %6, %4 : f32[2]\n"
      "    %8 = dynamic_index %6, %4 : f32[2]\n"
      "    %9 = exp %5 : f32[2]\n"
      "    %10 = add %7, %8 : f32[2]\n"
      "    yield %5, %10\n"
      "  }\n"
      "  %11, %12 = loop %0, %1 {carried = 1, trip = 3} : f32[2], f32[3, 2] {\n"
      "    body(%13: i32, %14: f32[2], %15: f32[3, 2]):\n"
      "    %16 = dynamic_index %15, %13 : f32[2]\n"
      "    %17 = mul %16, %14 : f32[2]\n"
      "    yield %14, %17\n"
      "  }\n"
      "  %18 = loop %0, %1 {carried = 1, trip = 2} : f32[2] {\n"
      "    body(%19: i32, %20: f32[2], %21: f32[3, 2]):\n"
      "    yield %20\n"
      "  }\n"
      "  %22 = add %3, %12 : f32[3, 2]\n"
      "  return %22\n"
      "}\n";
  const char* after =
      "np = 1\n"
      "\n"
      "func @s(%0: f32[2], %1: f32[3, 2]) -> (f32[3, 2]) {\n"
      "  %2, %3 = loop %0, %1 {carried = 1, trip = 3} : f32[2], f32[3, 2] {\n"
      "    body(%4: i32, %5: f32[2], %6: f32[3, 2]):\n"
      "    %7 = dynamic_index %6, %4 : f32[2]\n"
      "    %8 = add %7, %7 : f32[2]\n"
      "    yield %5, %8\n"
      "  }\n"
      "  %9, %10 = loop %0, %1 {carried = 1, trip = 3} : f32[2], f32[3, 2] {\n"
      "    body(%11: i32, %12: f32[2], %13: f32[3, 2]):\n"
      "    %14 = dynamic_index %13, %11 : f32[2]\n"
      "    %15 = mul %14, %12 : f32[2]\n"
      "    yield %12, %15\n"
      "  }\n"
      "  %16 = add %3, %10 : f32[3, 2]\n"
      "  return %16\n"
      "}\n";
  auto m = parse(before);
  ir::Function& f = *m->functions[0];
  // removed: the duplicate dynamic_index, the dead exp, the unused loop
  CHECK(passes::simplify(f) == 3);
  CHECK(ir::verify(*m) == "");
  CHECK(ir::printModule(*m) == after);
}

// The 4-layer MLP of tests/unit/ir_texts.h (61 flops per iteration).
using irtext::kLoopMlp;

TEST_CASE("cost model: a loop costs its body once per iteration") {
  auto m = parse(kLoopMlp);
  passes::Cost c = passes::estimateCost(*m, *m->functions[0]);
  CHECK(c.flops == 244);
  CHECK(c.paramBytes == 4 * 3 * 3 * 4);
  // Live at the loop: args 24 + 12 bytes, the constant 4, the loop's
  // results 24 + 4 + 96 = 164. The body's peak is its args 4 + 24 + 4 + 144
  // + 12 = 188 (the loop's operands, not counted twice) plus
  // dynamic_index's 36. Together 164 + 36 = 200.
  CHECK(c.peakActivationBytes == 200);
  CHECK(c.collectives.empty());
}

TEST_CASE("shape inference: a loop's body first, then its results") {
  auto m = parse(kLoopMlp);
  ir::Function& f = *m->functions[0];
  ir::Op& loop = *f.ops[2];
  loop.body->ops[1]->result->type = ir::TensorType{ir::DType::F32, {9}};
  loop.results[2]->type = ir::TensorType{ir::DType::F32, {1}};
  CHECK(ir::verify(*m) != "");
  CHECK(passes::inferShapes(*m) == "");
  CHECK(ir::verify(*m) == "");
  CHECK(ir::printModule(*m) == kLoopMlp);
}
