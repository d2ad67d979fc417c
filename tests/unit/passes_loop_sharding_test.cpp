// Sharding propagation through loops (docs/loops.md, "Sharding
// propagation"): carried values keep one sharding in every iteration (a
// fixed point between the carried inputs and the body's results), stacked
// dims stay unsplit unless annotated.
#include <doctest/doctest.h>

#include <string>

#include "ir/IRParser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/CostModel.h"
#include "passes/Pipeline.h"
#include "passes/ShardingPropagation.h"

using namespace gsl;

namespace {

std::unique_ptr<ir::Module> parse(const std::string& text) {
  ir::IRParseResult r = ir::parseModule(text);
  REQUIRE_MESSAGE(r.module, r.error);
  REQUIRE_MESSAGE(ir::verify(*r.module).empty(), ir::verify(*r.module));
  return std::move(r.module);
}

std::string str(const std::optional<ir::Sharding>& s) { return s ? s->str() : "none"; }

const ir::Op& theLoop(const ir::Function& f) {
  for (const auto& o : f.ops)
    if (o->kind == ir::OpKind::Loop) return *o;
  FAIL("no loop");
  return *f.ops[0];
}

// A loop whose carried value only its body's annotation reaches (the
// first test case says what propagation makes of it).
const char* const kBodyGivesCarried =
    "np = 2\n"
    "mesh @m = [data: 2]\n"
    "\n"
    "func @f(%0: f32[4, 8]) -> (f32[4, 8], f32[3, 4, 8]) {\n"
    "  %1, %2 = loop %0 {carried = 1, trip = 3} : f32[4, 8], f32[3, 4, 8] {\n"
    "    body(%3: i32, %4: f32[4, 8]):\n"
    "    %5 = tanh %4 : f32[4, 8]\n"
    "    %6 = copy %5 : f32[4, 8] @shard(m, [data, _])\n"
    "    %7 = exp %6 : f32[4, 8]\n"
    "    yield %7, %5\n"
    "  }\n"
    "  return %1, %2\n"
    "}\n";

}  // namespace

TEST_CASE("a carried value unconstrained outside takes the sharding the body gives it, in every iteration") {
  // h0 is an unannotated argument; inside the body the new h is annotated
  // split over `data`. The fixed point: h enters the body split the same
  // way, the loop's operand and result lie so too, and so does everything
  // computed from h in the body.
  auto m = parse(kBodyGivesCarried);
  ir::Function& f = *m->functions[0];
  passes::propagateShardings(*m, f);
  const ir::Op& lp = theLoop(f);
  const ir::Function& body = *lp.body;
  const std::string split = "@shard(m, [data, _])";
  CHECK(str(body.args[1]->sharding) == split);  // enters split
  CHECK(str(body.resultShardings[0]) == split);  // leaves split
  CHECK(str(body.ops[0]->result->sharding) == split);  // tanh of the entering h
  CHECK(str(lp.operands[0]->sharding) == split);  // the function argument, backward
  CHECK(str(lp.results[0]->sharding) == split);
  // The per-iteration output (tanh's row) is stacked with dim 0 unsplit.
  CHECK(str(lp.results[1]->sharding) == "@shard(m, [_, data, _])");
}

TEST_CASE("given a provenance table, propagation records the step that gave each value its sharding, in loop bodies too") {
  // The shardings are the same with the table or without it.
  auto plain = parse(kBodyGivesCarried);
  passes::propagateShardings(*plain, *plain->functions[0]);
  auto m = parse(kBodyGivesCarried);
  ir::Function& f = *m->functions[0];
  passes::ShardingProvenance why;
  passes::propagateShardings(*m, f, &why);
  CHECK(ir::printFunction(f) == ir::printFunction(*plain->functions[0]));
  const ir::Op& lp = theLoop(f);
  const ir::Function& body = *lp.body;
  CHECK(!why.propagated(body.ops[1]->result));  // %6, annotated
  CHECK(!why.propagated(body.results[0]));       // %7, constrained as the carried value
  // %5 = tanh %4: forward from the entering h, once the fixed point gave
  // h its sharding.
  const ir::Value* t = body.ops[0]->result;
  REQUIRE(why.find(t));
  CHECK(why.find(t)->via == body.ops[0].get());
  CHECK(why.find(t)->source == body.args[1]);
  // The stacked output: through the loop, from the body's row.
  REQUIRE(why.find(lp.results[1]));
  CHECK(why.find(lp.results[1])->via == &lp);
  CHECK(why.find(lp.results[1])->source == body.results[1]);
  CHECK(why.propagated(lp.operands[0]));  // the unannotated argument
}

TEST_CASE("a carried value's operand sharding wins over what the body would give it") {
  // h0 is split over `model` on dim 1; the body's annotation would split
  // the new h on dim 0. The carried sharding is the operand's: the body
  // must give h back as it came in (the partitioner reshards at its end).
  auto m = parse(
      "np = 4\n"
      "mesh @m = [data: 2, model: 2]\n"
      "\n"
      "func @f(%0: f32[4, 8] @shard(m, [_, model])) -> (f32[4, 8]) {\n"
      "  %1 = loop %0 {carried = 1, trip = 3} : f32[4, 8] {\n"
      "    body(%2: i32, %3: f32[4, 8]):\n"
      "    %4 = tanh %3 : f32[4, 8]\n"
      "    %5 = copy %4 : f32[4, 8] @shard(m, [data, _])\n"
      "    yield %5\n"
      "  }\n"
      "  return %1\n"
      "}\n");
  ir::Function& f = *m->functions[0];
  passes::propagateShardings(*m, f);
  const ir::Op& lp = theLoop(f);
  CHECK(str(lp.body->args[1]->sharding) == "@shard(m, [_, model])");
  CHECK(str(lp.body->resultShardings[0]) == "@shard(m, [_, model])");
  CHECK(str(lp.results[0]->sharding) == "@shard(m, [_, model])");
  CHECK(str(lp.body->ops[1]->result->sharding) == "@shard(m, [data, _])");  // the annotation stays
}

TEST_CASE("stacked dims: never split unless annotated; an annotated stacked weight enters the body whole on dim 0") {
  auto m = parse(
      "np = 4\n"
      "mesh @m = [data: 2, model: 2]\n"
      "param @w : f32[4, 8, 8] @shard(m, [data, _, model]) = normal(0.5)\n"
      "param @v : f32[4, 8, 8] @shard(m, [_, _, model]) = normal(0.5)\n"
      "\n"
      "func @f(%0: f32[6, 8]) -> (f32[6, 8], f32[4, 8, 8]) {\n"
      "  %1 = param {name = \"w\"} : f32[4, 8, 8] @shard(m, [data, _, model])\n"
      "  %2 = param {name = \"v\"} : f32[4, 8, 8] @shard(m, [_, _, model])\n"
      "  %3, %4 = loop %0, %1, %2 {carried = 1, trip = 4} : f32[6, 8], f32[4, 8, 8] {\n"
      "    body(%5: i32, %6: f32[6, 8], %7: f32[4, 8, 8], %8: f32[4, 8, 8]):\n"
      "    %9 = dynamic_index %7, %5 : f32[8, 8]\n"
      "    %10 = matmul %6, %9 : f32[6, 8]\n"
      "    %11 = dynamic_index %8, %5 : f32[8, 8]\n"
      "    yield %10, %11\n"
      "  }\n"
      "  return %3, %4\n"
      "}\n");
  ir::Function& f = *m->functions[0];
  passes::propagateShardings(*m, f);
  const ir::Op& lp = theLoop(f);
  // w is read only as w[i]: its annotated stacked split is gathered before
  // the loop; its other dims follow the operand.
  CHECK(str(lp.body->args[2]->sharding) == "@shard(m, [_, _, model])");
  CHECK(str(lp.body->ops[0]->result->sharding) == "@shard(m, [_, model])");
  // The stacked output of v's rows: dim 0 unsplit, the row's dims as the row.
  CHECK(str(lp.results[1]->sharding) == "@shard(m, [_, _, model])");
}

TEST_CASE("the per-rank loop: collectives inside the body, local types, and their cost once per iteration") {
  // Megatron MLP layers over 4 iterations, weights split over `model` = 2:
  // one all_reduce per iteration, inside the body.
  auto m = parse(
      "np = 2\n"
      "mesh @m = [model: 2]\n"
      "param @w1 : f32[4, 8, 16] @shard(m, [_, _, model]) = normal(0.5)\n"
      "param @w2 : f32[4, 16, 8] @shard(m, [_, model, _]) = normal(0.5)\n"
      "\n"
      "func @f(%0: f32[6, 8]) -> (f32[6, 8]) {\n"
      "  %1 = param {name = \"w1\"} : f32[4, 8, 16] @shard(m, [_, _, model])\n"
      "  %2 = param {name = \"w2\"} : f32[4, 16, 8] @shard(m, [_, model, _])\n"
      "  %3 = loop %0, %1, %2 {carried = 1, trip = 4} : f32[6, 8] {\n"
      "    body(%4: i32, %5: f32[6, 8], %6: f32[4, 8, 16], %7: f32[4, 16, 8]):\n"
      "    %8 = dynamic_index %6, %4 : f32[8, 16]\n"
      "    %9 = matmul %5, %8 : f32[6, 16]\n"
      "    %10 = dynamic_index %7, %4 : f32[16, 8]\n"
      "    %11 = matmul %9, %10 : f32[6, 8]\n"
      "    yield %11\n"
      "  }\n"
      "  return %3\n"
      "}\n");
  auto local = passes::buildPerRankProgram(*m, *m->functions[0], /*gather=*/false);
  REQUIRE(ir::verifyFunction(*m, *local).empty());
  const ir::Op& lp = theLoop(*local);
  CHECK(lp.operands[1]->type.str() == "f32[4, 8, 8]");  // local w1
  size_t inBody = 0, outside = 0;
  for (const auto& o : lp.body->ops) inBody += o->kind == ir::OpKind::AllReduce;
  for (const auto& o : local->ops) outside += o->info().cls == ir::OpClass::Collective;
  CHECK(inBody == 1);
  CHECK(outside == 0);
  passes::Cost c = passes::estimateCost(*m, *local);
  REQUIRE(c.collectives.count(ir::OpKind::AllReduce));
  CHECK(c.collectives.at(ir::OpKind::AllReduce).calls == 4);
  // Each call sends 2 (n-1)/n of the f32[6, 8] block.
  CHECK(c.collectives.at(ir::OpKind::AllReduce).bytes == 4 * (6 * 8 * 4));
  // Per rank per iteration: (6x8x8) + (6x8x8) multiply-adds, 2 flops each.
  CHECK(c.flops == 4 * 2 * (6 * 8 * 8 + 6 * 8 * 8));
}
