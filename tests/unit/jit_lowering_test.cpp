// A JIT lowering is optional (docs/architecture.md, "Recipe: a new op"):
// every op of the op table either has generated code or is planned as a
// fallback that runs its reference kernel (backend::evalOp through
// gsl_rt_eval_op), with the interpreter's values. ScopedHiddenLowering
// makes an op look like one added to the table without a lowering.
#include <doctest/doctest.h>

#include "backend/jit/BufferPlan.h"
#include "backend/jit/OpLowering.h"
#include "jit_test_util.h"

using namespace jittest;
using backend::jit::hasLowering;
using backend::jit::ScopedHiddenLowering;
using ir::OpClass;

namespace {

constexpr auto npos = std::string::npos;

bool elementwiseClass(OpKind k) {
  const OpClass c = ir::opInfo(k).cls;
  return c == OpClass::Unary || c == OpClass::Binary || c == OpClass::Ternary;
}

// An operand of the dtype the elementwise op `k` takes (bool for logic,
// i32 for floor division, f32 else), random, of shape {3, 5}.
Tensor operandFor(OpKind k, int i) {
  const uint32_t seed = 40 + (uint32_t)i;
  switch (k) {
    case OpKind::Not: case OpKind::And: case OpKind::Or: return randBool({3, 5}, seed);
    case OpKind::FloorDiv: return randI32({3, 5}, -9, 9, seed);
    case OpKind::Where: return i == 0 ? randBool({3, 5}, seed) : randF32({3, 5}, -3, 3, seed);
    default: return randF32({3, 5}, 0.1f, 3, seed);  // positive: log, sqrt and pow are defined
  }
}

// A function computing the elementwise op `k` between elementwise ops
// (a producer per operand, a consumer), so that generated code would fuse
// them into one loop nest: consumer(k(producer(a), producer(b), ...)).
// `at` is the index of the op of kind `k`.
struct Sample {
  Builder b;
  size_t at = 0;
};

void elementwiseSample(OpKind k, Sample& s) {
  Builder& b = s.b;
  std::vector<Value*> in;
  const ir::OpInfo& info = ir::opInfo(k);
  const int n = info.cls == OpClass::Unary ? 1 : info.cls == OpClass::Binary ? 2 : 3;
  for (int i = 0; i < n; ++i) {
    Value* a = b.arg(operandFor(k, i));
    in.push_back(b.op(a->type.dtype == DType::Bool ? OpKind::Not : OpKind::Copy, {a}));
  }
  ir::AttrMap at;
  if (k == OpKind::Cast) at = attrs({{"dtype", DType::I32}});
  Value* r = b.op(k, in, at);
  s.at = b.f.ops.size() - 1;
  b.f.results = {b.op(r->type.dtype == DType::Bool ? OpKind::Not : OpKind::Neg, {r})};
}

JitOptions planOptions() {
  JitOptions o;
  o.vectorWidth = 8;  // resolved, as planBuffers needs
  return o;
}

}  // namespace

TEST_CASE("jit lowering: every op of the op table has generated code or takes the reference-kernel fallback") {
  size_t lowered = 0;
  for (const ir::OpInfo& info : ir::allOps()) {
    INFO("op " << info.mnemonic);
    // The planner's decision for an op of this kind on f32 (the type rule
    // is not needed for it).
    Builder b;
    Value* r = b.typed(info.kind, {}, {DType::F32, {2}});
    const bool fallback = backend::jit::runsReferenceKernel(*r->def, planOptions());
    if (hasLowering(info.kind)) {
      lowered++;
      CHECK(!fallback);
    } else {
      CHECK(fallback);
    }
    // An elementwise op also computes the interpreter's values without
    // its lowering (the next test case); the fallback of the others is
    // the same call.
    ScopedHiddenLowering hide(info.kind);
    CHECK(backend::jit::runsReferenceKernel(*r->def, planOptions()) == (info.kind != OpKind::Loop));
  }
  // The ops the generator knows today (the loop: its body's ops are
  // lowered or fall back one by one; it has no reference kernel).
  CHECK(lowered == ir::allOps().size());
}

TEST_CASE("jit lowering: an elementwise op without a lowering runs its reference kernel, with the interpreter's values") {
  for (const ir::OpInfo& info : ir::allOps()) {
    if (!elementwiseClass(info.kind)) continue;
    INFO("op " << info.mnemonic);
    Sample s;
    elementwiseSample(info.kind, s);
    // With its lowering: one fused loop nest, no call of a reference kernel.
    CHECK(!backend::jit::planBuffers(s.b.f, planOptions()).fallback[s.at]);
    CHECK(jitEmitLLVM(s.b.f, false).find("gsl_rt_eval_op") == npos);

    ScopedHiddenLowering hide(info.kind);
    REQUIRE(!hasLowering(info.kind));
    const backend::jit::BufferPlan plan = backend::jit::planBuffers(s.b.f, planOptions());
    CHECK(plan.fallback[s.at]);
    // Neither its producers nor it are fused: the reference kernel reads
    // and writes buffers.
    for (size_t i = 0; i <= s.at; ++i) CHECK(!plan.fused[i]);
    CHECK(jitEmitLLVM(s.b.f, false).find("gsl_rt_eval_op") != npos);
    s.b.check(s.b.f.results);
  }
}

TEST_CASE("jit lowering: other ops without a lowering run their reference kernel") {
  Builder b;
  Value* x = b.arg(randF32({4, 9}, -5, 5));
  Value* sm = b.op(OpKind::Softmax, {b.op(OpKind::Exp, {x})}, attrs({{"axis", int64_t(1)}}));
  b.f.results = {b.op(OpKind::Mul, {sm, x})};
  const uint64_t before = jitCompileCount();
  {
    ScopedHiddenLowering hide(OpKind::Softmax);
    b.check(b.f.results);
  }
  // The lowering is back, and the code compiled without it is not reused.
  CHECK(hasLowering(OpKind::Softmax));
  CHECK(jitEmitLLVM(b.f, false).find("gsl_rt_eval_op") == npos);
  b.check(b.f.results);
  CHECK(jitCompileCount() - before == 2);

  ScopedHiddenLowering hide(OpKind::Take);
  ScopedHiddenLowering hideToo(OpKind::CumSum);
  Builder g;
  Value* table = g.arg(randF32({6, 4}));
  Value* rows = g.op(OpKind::Take, {table, g.arg(i32({3}, {5, 0, 2}))});
  Value* cs = g.op(OpKind::CumSum, {rows}, attrs({{"axis", int64_t(0)}, {"exclusive", false}}));
  g.check({cs, g.op(OpKind::Transpose, {cs}, attrs({{"perm", Ints{1, 0}}}))});
}
