// The cost model's collective bytes (passes/CostModel, `--stats`, the
// REPL's :cost, the partitioner's plan choice) equal the bytes the ranks
// count when they run the per-rank program (ThreadComm's CommStats).
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "backend/Interpreter.h"
#include "ir/IRParser.h"
#include "passes/CostModel.h"
#include "passes/Pipeline.h"
#include "passes/ShardingPropagation.h"
#include "passes/SpmdPartitioner.h"
#include "runtime/ThreadComm.h"

using namespace gsl;

namespace {

// Partitions the module's first function, runs it on np thread ranks with
// the interpreter, and checks every rank's counted bytes and calls per
// collective kind against the cost model's. Returns the model's total.
uint64_t checkBytes(const std::string& text) {
  ir::IRParseResult r = ir::parseModule(text);
  REQUIRE_MESSAGE(r.module, r.error);
  ir::Module& m = *r.module;
  passes::runGlobalPipeline(m);
  ir::Function& global = *m.functions[0];
  auto local = passes::buildPerRankProgram(m, global, false);
  passes::Cost c = passes::estimateCost(m, *local);
  std::vector<backend::CommStats> stats(m.np);
  runtime::runRanksOrThrow((int)m.np, [&](int rank, backend::Communicator& comm) {
    std::vector<backend::Tensor> args;
    for (const ir::Value* a : local->args) args.emplace_back(a->type);
    backend::KernelContext ctx;
    ctx.rank = rank;
    ctx.comm = &comm;
    ctx.mesh = [&](const std::string& n) -> const ir::Mesh& { return *m.findMesh(n); };
    backend::interpret(*local, args, ctx);
    comm.barrier();
    stats[rank] = comm.stats;
  });
  uint64_t total = 0;
  for (auto& [kind, cc] : c.collectives) total += cc.bytes;
  // Every rank sends the model's bytes, except that a collective_permute
  // member keeping its own block sends nothing (the model, one program for
  // every rank, counts the busiest rank): there the model is the maximum.
  ir::OpKindMap<uint64_t> modelBytes, modelCalls, maxBytes;
  for (auto& [kind, cc] : c.collectives) {
    modelBytes[kind] = cc.bytes;
    modelCalls[kind] = cc.calls;
  }
  for (int rank = 0; rank < (int)m.np; ++rank) {
    CAPTURE(rank);
    const ir::OpKindMap<uint64_t> &counted = stats[rank].bytesSent, &calls = stats[rank].calls;
    CHECK(calls == modelCalls);
    for (auto& [kind, b] : counted) {
      const char* kindName = ir::opName(kind);
      CAPTURE(kindName);
      maxBytes[kind] = std::max(maxBytes[kind], b);
      if (kind == ir::OpKind::CollectivePermute)
        CHECK(b <= modelBytes[kind]);
      else
        CHECK(b == modelBytes[kind]);
    }
  }
  CHECK(maxBytes == modelBytes);
  return total;
}

// A rotation by 10 of 12 rows split over 4 (blocks of 3): a halo exchange.
const std::string kRotation =
    "np = 4\nmesh @m = [x: 4]\n\n"
    "func @f(%0: f32[12, 2] @shard(m, [x, _])) -> (f32[12, 2] @shard(m, [x, _])) {\n"
    "  %1 = slice %0 {axis = 0, end = 12, start = 10} : f32[2, 2]\n"
    "  %2 = slice %0 {axis = 0, end = 10, start = 0} : f32[10, 2]\n"
    "  %3 = concat %1, %2 {axis = 0} : f32[12, 2]\n  return %3\n}\n";

// The candidate plans (:plans) of the op defining the module's first
// function's last value.
passes::OpPlans plansOf(const std::string& text) {
  ir::IRParseResult r = ir::parseModule(text);
  REQUIRE_MESSAGE(r.module, r.error);
  passes::runGlobalPipeline(*r.module);
  ir::Function& f = *r.module->functions[0];
  passes::propagateShardings(*r.module, f);
  return passes::explainPlans(*r.module, f, f.ops.back()->result);
}

}  // namespace

TEST_CASE("cost model bytes = bytes counted at run time: each collective the partitioner emits") {
  // all_gather
  CHECK(checkBytes("np = 4\nmesh @m = [x: 4]\n\n"
                   "func @f(%0: f32[8, 6] @shard(m, [x, _])) -> (f32[8, 6] @replicate(m)) {\n"
                   "  return %0\n}\n") == 3 * 2 * 6 * 4);
  // all_to_all
  CHECK(checkBytes("np = 4\nmesh @m = [x: 4]\n\n"
                   "func @f(%0: f32[8, 16] @shard(m, [x, _])) -> (f32[8, 16] @shard(m, [_, x])) {\n"
                   "  return %0\n}\n") == 3 * 2 * 4 * 4);
  // partial sum -> all_reduce (2 (n-1)/n of the block)
  CHECK(checkBytes("np = 2\nmesh @m = [x: 2]\n\n"
                   "func @f(%0: f32[4, 8] @shard(m, [_, x]), %1: f32[8, 4] @shard(m, [x, _])) -> (f32[4, 4] @replicate(m)) {\n"
                   "  %2 = matmul %0, %1 : f32[4, 4]\n  return %2\n}\n") == 64);
  // partial sum -> reduce_scatter
  CHECK(checkBytes("np = 4\nmesh @m = [x: 4]\n\n"
                   "func @f(%0: f32[8, 8] @shard(m, [_, x]), %1: f32[8, 8] @shard(m, [x, _])) -> (f32[8, 8] @shard(m, [x, _])) {\n"
                   "  %2 = matmul %0, %1 : f32[8, 8]\n  return %2\n}\n") == 3 * 2 * 8 * 4);
  // collective_permute (same axes, other order), on a 2 x 3 mesh
  CHECK(checkBytes("np = 6\nmesh @m = [a: 2, b: 3]\n\n"
                   "func @f(%0: f32[12, 2] @shard(m, [(a, b), _])) -> (f32[12, 2] @shard(m, [(b, a), _])) {\n"
                   "  return %0\n}\n") == 2 * 2 * 4);
  // collective_permute halo exchange: a rotation by 10 of 12 rows in blocks
  // of 3 (two rows of the block 3 ranks on; the third row is local)
  CHECK(checkBytes(kRotation) == 2 * 2 * 4);
  // ... and a shift by 5 with a zero fill: one row from the next block, two
  // from the one after, the fill masked in locally
  CHECK(checkBytes("np = 4\nmesh @m = [x: 4]\n\n"
                   "func @f(%0: f32[12, 2] @shard(m, [x, _])) -> (f32[12, 2] @shard(m, [x, _])) {\n"
                   "  %1 = slice %0 {axis = 0, end = 12, start = 5} : f32[7, 2]\n"
                   "  %2 = constant {value = 0.0} : f32\n"
                   "  %3 = broadcast %2 {shape = [5, 2]} : f32[5, 2]\n"
                   "  %4 = concat %1, %3 {axis = 0} : f32[12, 2]\n  return %4\n}\n") == 3 * 2 * 4);
}

TEST_CASE("cost model bytes = bytes counted at run time: the plan search's choice is what runs") {
  // Issue 19's reproducer 1 and GShard's dispatch einsum: the chosen plan's
  // bytes (what :plans prints) are the bytes the ranks send.
  const std::vector<std::string> cases = {
      "np = 4\nmesh @m = [a: 4]\n\n"
      "func @f(%0: f32[64, 1024] @shard(m, [a, _]), %1: f32[1024, 64] @replicate(m)) -> (f32[64, 64] @shard(m, [_, a])) {\n"
      "  %2 = matmul %0, %1 : f32[64, 64] @shard(m, [_, a])\n  return %2\n}\n",
      "np = 4\nmesh @m = [x: 4]\n\n"
      "func @f(%0: f32[4, 8, 8, 2] @shard(m, [x, _, _, _]), %1: f32[4, 8, 16] @shard(m, [x, _, _])) -> (f32[8, 4, 2, 16] @shard(m, [x, _, _, _])) {\n"
      "  %2 = einsum %0, %1 {spec = \"gsec,gsm->egcm\"} : f32[8, 4, 2, 16] @shard(m, [x, _, _, _])\n  return %2\n}\n"};
  const std::vector<uint64_t> expected = {3072, 768};
  for (size_t i = 0; i < cases.size(); ++i) {
    CAPTURE(i);
    uint64_t counted = checkBytes(cases[i]);
    CHECK(counted == expected[i]);
    passes::OpPlans plans = plansOf(cases[i]);
    REQUIRE(plans.found);
    int chosen = 0;
    for (const auto& c : plans.candidates)
      if (c.chosen) {
        ++chosen;
        CHECK(c.cost.bytes == counted);
      }
    CHECK(chosen == 1);
    CHECK(plans.candidates.size() >= 3);
  }
}

TEST_CASE("cost model bytes = bytes counted at run time: vocab-parallel take against the replicated table") {
  // A table split on its rows over 4: the plan search compares gathering the
  // table (3 blocks of 16 x 8 floats, 1,536 B) with each rank's masked
  // gather of its rows and one all_reduce of the f32[2, 5, 8] result
  // (2 (4-1)/4 of 320 B = 480 B), and takes the latter.
  const std::string text =
      "np = 4\nmesh @m = [x: 4]\n\n"
      "func @f(%0: f32[64, 8] @shard(m, [x, _]), %1: i32[2, 5] @replicate(m)) -> (f32[2, 5, 8] @replicate(m)) {\n"
      "  %2 = take %0, %1 : f32[2, 5, 8]\n  return %2\n}\n";
  uint64_t counted = checkBytes(text);
  CHECK(counted == 480);
  passes::OpPlans plans = plansOf(text);
  REQUIRE(plans.found);
  bool sawReplicated = false;
  for (const auto& c : plans.candidates) {
    if (c.chosen) {
      CHECK(c.cost.bytes == counted);
      CHECK(gsl::ir::namesOf(c.result.partial) == std::vector<std::string>{"x"});
    }
    if (c.operands[0].dims[0].empty()) {
      sawReplicated = true;
      CHECK(c.cost.bytes == 3 * 16 * 8 * 4);
      CHECK(!c.chosen);
    }
  }
  CHECK(sawReplicated);
}

TEST_CASE("cost model bytes = bytes counted at run time: a rotation's plans (halo exchange against all_gather)") {
  // :plans of the concat: the halo exchange (16 B: two rows of the block
  // three ranks on) is chosen over gathering x (3 blocks of 3 x 2 floats, 72 B).
  uint64_t counted = checkBytes(kRotation);
  CHECK(counted == 16);
  passes::OpPlans plans = plansOf(kRotation);
  REQUIRE(plans.found);
  REQUIRE(plans.candidates.size() == 2);
  CHECK(plans.candidates[0].chosen);
  CHECK(plans.candidates[0].cost.bytes == counted);
  CHECK(gsl::ir::namesOf(plans.candidates[0].operands[0].dims[0]) == std::vector<std::string>{"x"});
  CHECK(!plans.candidates[1].chosen);
  CHECK(plans.candidates[1].cost.bytes == 3 * 3 * 2 * 4);
  CHECK(plans.candidates[1].operands[0].dims[0].empty());
  CHECK(plans.why == "fewest bytes sent (16 B, the next sends 72 B)");
}

TEST_CASE("cost model bytes = bytes counted at run time: padded dims (docs/sharding.md, Uneven dims)") {
  // 11 rows over 3 ranks: blocks of 4, gathered as 12 rows (then sliced).
  CHECK(checkBytes("np = 3\nmesh @m = [x: 3]\n\n"
                   "func @f(%0: f32[11, 6] @shard(m, [x, _])) -> (f32[11, 6] @replicate(m)) {\n"
                   "  return %0\n}\n") == 2 * 4 * 6 * 4);
  // A contraction over the padded dim: masked blocks, the partial [6, 5]
  // all-reduced (2 (n-1)/n of 120 B).
  CHECK(checkBytes("np = 3\nmesh @m = [x: 3]\n\n"
                   "func @f(%0: f32[6, 11] @shard(m, [_, x]), %1: f32[11, 5] @shard(m, [x, _])) -> (f32[6, 5] @replicate(m)) {\n"
                   "  %2 = matmul %0, %1 : f32[6, 5]\n  return %2\n}\n") == 2 * 2 * 120 / 3);
  // A padded split moving to another dim: one all_to_all of the padded
  // block ((n-1)/n of 3 x 9 words), the joined padding sliced off.
  CHECK(checkBytes("np = 3\nmesh @m = [x: 3]\n\n"
                   "func @f(%0: f32[7, 9] @shard(m, [x, _])) -> (f32[7, 9] @shard(m, [_, x])) {\n"
                   "  return %0\n}\n") == 2 * 3 * 9 * 4 / 3);
  // ... and to a padded dim: zeros appended to whole blocks first (8 -> 9).
  CHECK(checkBytes("np = 3\nmesh @m = [x: 3]\n\n"
                   "func @f(%0: f32[7, 8] @shard(m, [x, _])) -> (f32[7, 8] @shard(m, [_, x])) {\n"
                   "  return %0\n}\n") == 2 * 3 * 9 * 4 / 3);
  // A partial sum reduced onto a padded dim: zeros to 3 x 3 rows, reduce_scatter.
  CHECK(checkBytes("np = 3\nmesh @m = [x: 3]\n\n"
                   "func @f(%0: f32[7, 6] @shard(m, [_, x]), %1: f32[6, 5] @shard(m, [x, _])) -> (f32[7, 5] @shard(m, [x, _])) {\n"
                   "  %2 = matmul %0, %1 : f32[7, 5]\n  return %2\n}\n") == 2 * 3 * 5 * 4);
  // A padded split over both axes of a 2 x 3 mesh moving to the other dim:
  // one all_to_all over (a, b) of the [2, 18] padded block ((n-1)/n of it).
  CHECK(checkBytes("np = 6\nmesh @m = [a: 2, b: 3]\n\n"
                   "func @f(%0: f32[11, 13] @shard(m, [(a, b), _])) -> (f32[11, 13] @shard(m, [_, (a, b)])) {\n"
                   "  return %0\n}\n") == 5 * 2 * 18 * 4 / 6);
  // Partial sums over (a, b) onto 11 rows split over both: zeros to 12 rows,
  // one reduce_scatter ((n-1)/n of the [12, 7] sum).
  CHECK(checkBytes("np = 6\nmesh @m = [a: 2, b: 3]\n\n"
                   "func @f(%0: f32[11, 13] @shard(m, [_, (a, b)]), %1: f32[13, 7] @shard(m, [(a, b), _])) -> (f32[11, 7] @shard(m, [(a, b), _])) {\n"
                   "  %2 = matmul %0, %1 : f32[11, 7]\n  return %2\n}\n") == 5 * 12 * 7 * 4 / 6);
}

TEST_CASE("cost model bytes = bytes counted at run time: a pad and a slice that change the split dim's size") {
  // XLA's pad along a partitioned dim: 16 columns over 4 padded by 4 (blocks
  // 4 -> 5). Member r needs r + 1 columns of the next block, at most 3: one
  // collective_permute of a [2, 3] slice (24 B), where gathering x sends 3
  // blocks of 2 x 4 floats (96 B). The chosen plan's bytes are what runs.
  const std::string pad =
      "np = 4\nmesh @m = [x: 4]\n\n"
      "func @f(%0: f32[2, 16] @shard(m, [_, x])) -> (f32[2, 20] @shard(m, [_, x])) {\n"
      "  %1 = constant {value = 0.0} : f32\n"
      "  %2 = broadcast %1 {shape = [2, 4]} : f32[2, 4]\n"
      "  %3 = concat %0, %2 {axis = 1} : f32[2, 20]\n  return %3\n}\n";
  uint64_t counted = checkBytes(pad);
  CHECK(counted == 2 * 3 * 4);
  passes::OpPlans plans = plansOf(pad);
  REQUIRE(plans.found);
  REQUIRE(plans.candidates.size() == 2);
  CHECK(plans.candidates[0].chosen);
  CHECK(plans.candidates[0].cost.bytes == counted);
  CHECK(plans.candidates[1].cost.bytes == 3 * 2 * 4 * 4);
  CHECK(plans.why == "fewest bytes sent (24 B, the next sends 96 B)");
  // A slice dropping 2 rows at each end (16 -> 8 rows, blocks 4 -> 2): the
  // last member reads the whole block before its own (32 B), not 3 blocks.
  const std::string slice =
      "np = 4\nmesh @m = [x: 4]\n\n"
      "func @f(%0: f32[16, 2] @shard(m, [x, _])) -> (f32[8, 2] @shard(m, [x, _])) {\n"
      "  %1 = slice %0 {axis = 0, end = 10, start = 2} : f32[8, 2]\n  return %1\n}\n";
  counted = checkBytes(slice);
  CHECK(counted == 4 * 2 * 4);
  plans = plansOf(slice);
  REQUIRE(plans.found);
  REQUIRE(plans.candidates.size() == 2);
  CHECK(plans.candidates[0].chosen);
  CHECK(plans.candidates[0].cost.bytes == counted);
  CHECK(plans.candidates[1].cost.bytes == 3 * 4 * 2 * 4);
}
