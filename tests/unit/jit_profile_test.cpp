// The op timer (JitOptions::profileKernels, backend/jit/KernelProfile.h):
// off, the code has no timer; on, the results are the same bits, and
// every op with code gets a row with its kind, its GEMM shape and FLOPs,
// and one call per call of the function (loop bodies' ops per iteration).
#include <doctest/doctest.h>

#include <algorithm>

#include "backend/jit/KernelProfile.h"
#include "jit_test_util.h"

using namespace jittest;

namespace {

const KernelProfileRow* row(const std::vector<KernelProfileRow>& rows, const std::string& op) {
  auto it = std::find_if(rows.begin(), rows.end(), [&](const KernelProfileRow& r) { return r.op == op; });
  return it == rows.end() ? nullptr : &*it;
}

}  // namespace

TEST_CASE("jit profile: the timer is compiled only when asked for, and changes no result") {
  Builder b;
  Value* x = b.arg(randF32({64, 32}, -1, 1, 11));
  Value* w = b.arg(randF32({32, 48}, -1, 1, 12));
  Value* y = b.op(OpKind::MatMul, {x, w});
  Value* t = b.op(OpKind::Tanh, {y});
  Value* s = b.op(OpKind::Sum, {t}, attrs({{"axes", Ints{1}}, {"keepdims", false}}));
  Value* sm = b.op(OpKind::Softmax, {y}, attrs({{"axis", int64_t(-1)}}));
  // Results after the first written by elementwise ops of the function
  // itself: what a training step's update is.
  Value* u = b.op(OpKind::Mul, {t, t});
  std::vector<Tensor> plain = b.check({s, sm, u});

  JitOptions on = testOptions();
  on.profileKernels = true;
  CHECK(jitEmitLLVM(b.f, false, testOptions()).find("gsl_rt_profile") == std::string::npos);
  CHECK(jitEmitLLVM(b.f, false, on).find("llvm.readcyclecounter") != std::string::npos);

  jitKernelProfileReset();
  auto engine = makeJitEngine({}, on);
  std::vector<Tensor> timed;
  for (int i = 0; i < 3; ++i) timed = engine->call(b.f, b.args);
  REQUIRE(timed.size() == plain.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    REQUIRE(timed[i].type() == plain[i].type());
    CHECK(std::equal(timed[i].f32(), timed[i].f32() + timed[i].size(), plain[i].f32()));
  }

  const std::vector<KernelProfileRow> rows = jitKernelProfile();
  const KernelProfileRow* mm = row(rows, "matmul");
  REQUIRE(mm);
  CHECK(mm->kind == "gemm");
  CHECK(mm->shape == "64x48x32");
  CHECK(mm->flops == 2.0 * 64 * 48 * 32);
  CHECK(mm->calls == 3);
  CHECK(mm->seconds > 0);
  CHECK(mm->function == "t");
  // tanh has two users: a kernel of its own (a fused op would have no row).
  REQUIRE(row(rows, "tanh"));
  CHECK(row(rows, "tanh")->kind == "elementwise");
  REQUIRE(row(rows, "sum"));
  CHECK(row(rows, "sum")->kind == "reduction");
  REQUIRE(row(rows, "softmax"));
  CHECK(row(rows, "softmax")->kind == "softmax/layer_norm");
  REQUIRE(row(rows, "mul"));
  CHECK(row(rows, "mul")->kind == "optimizer");
  for (const KernelProfileRow& r : rows) CHECK(r.calls == 3);
  jitKernelProfileReset();
  CHECK(jitKernelProfile().empty());
}
