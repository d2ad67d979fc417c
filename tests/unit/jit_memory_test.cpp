// The memory of calls (docs/memory.md): buffers reused from one call to
// the next (the Tensor pool), and donation (Engine::call's Donation): a
// result written into a donated input's buffer only where the buffer
// planner shows it safe and no one else holds the buffer, with the same
// numbers as without donation.
#include <doctest/doctest.h>

#include <cstring>
#include <map>

#include "backend/jit/BufferPlan.h"
#include "jit_test_util.h"

using namespace jittest;

namespace {

constexpr int64_t kN = 64 * 1024;  // 256 KiB per tensor: pooled

// An Adam-like update of param `w` with state m (argument 0) and gradient
// g (argument 1): m' = 0.9 m + 0.1 g, w' = w - 0.01 m'; results (w', m').
// With `readLate`, sum(w) is a third result, computed after w' is written.
struct Update {
  Builder b;
  Value* w = nullptr;
  Update(const Tensor& m, const Tensor& g, bool readLate = false) {
    Value* mv = b.arg(m);
    Value* gv = b.arg(g);
    w = b.typed(OpKind::Param, attrs({{"name", std::string("w")}}), m.type());
    const TensorType s{DType::F32, {}};
    Value* m2 = b.op(OpKind::Add, {b.op(OpKind::Mul, {b.constant(0.9, s), mv}), b.op(OpKind::Mul, {b.constant(0.1, s), gv})});
    Value* w2 = b.op(OpKind::Sub, {w, b.op(OpKind::Mul, {b.constant(0.01, s), m2})});
    b.f.results = {w2, m2};
    if (readLate) b.f.results.push_back(b.op(OpKind::Sum, {w}, attrs({{"axis", Ints{0}}})));
  }
};

KernelContext paramContext(std::map<std::string, Tensor>& params) {
  KernelContext ctx;
  ctx.param = [&params](const std::string& n) -> const Tensor& { return params.at(n); };
  return ctx;
}

}  // namespace

TEST_CASE("jit memory: a second call of a function allocates no new buffers") {
  std::map<std::string, Tensor> params{{"w", randF32({kN}, -1, 1, 5)}};
  Update u(randF32({kN}, -1, 1, 6), randF32({kN}, -1, 1, 7));
  auto engine = makeJitEngine(paramContext(params), testOptions());
  engine->call(u.b.f, u.b.args);  // compiles; its results are dropped
  const auto before = tensorPoolStats();
  std::vector<Tensor> r = engine->call(u.b.f, u.b.args);
  const auto after = tensorPoolStats();
  CHECK(after.allocated == before.allocated);  // both results from the pool
  CHECK(after.reused == before.reused + 2);
}

TEST_CASE("jit memory: donated params and states are updated in place, with the same numbers") {
  const Tensor w0 = randF32({kN}, -1, 1, 5), m0 = randF32({kN}, -1, 1, 6), g = randF32({kN}, -1, 1, 7);
  // Reference: three steps without donation (each result a new buffer).
  std::map<std::string, Tensor> plain{{"w", w0}};
  Update ref(m0, g);
  auto e1 = makeJitEngine(paramContext(plain), testOptions());
  std::vector<Tensor> want;
  Tensor m = m0;
  for (int step = 0; step < 3; ++step) {
    want = e1->call(ref.b.f, {m, g});
    CHECK(want[0].raw() != plain.at("w").raw());
    plain["w"] = want[0];
    m = want[1];
  }

  // The plan: w' may take w's buffer, and m' that of argument 0 (m, its
  // first leaf of its type; g is read by m' too).
  const std::vector<DonorInput> donors = jitPlannedDonors(ref.b.f, testOptions());
  REQUIRE(donors.size() == 2);
  CHECK(donors[0].param == "w");
  CHECK(donors[1].arg == 0);

  // Donated: the copies of w0 and m0 are the only holders of their buffers,
  // so every step writes into them.
  std::map<std::string, Tensor> params{{"w", Tensor::fromF32({kN}, std::vector<float>(w0.f32(), w0.f32() + kN))}};
  auto e2 = makeJitEngine(paramContext(params), testOptions());
  Donation d;
  d.args = {true, false};
  d.params = {"w"};
  const void* wbuf = params.at("w").raw();
  std::vector<Tensor> args{Tensor::fromF32({kN}, std::vector<float>(m0.f32(), m0.f32() + kN)), g};
  const void* mbuf = args[0].raw();
  std::vector<Tensor> got;
  const auto before = tensorPoolStats();
  for (int step = 0; step < 3; ++step) {
    got = e2->call(ref.b.f, args, d);
    CHECK(got[0].raw() == wbuf);
    CHECK(got[1].raw() == mbuf);
    params["w"] = got[0];
    args[0] = got[1];
    got.clear();  // the host holds the results only as its param and state
  }
  got = {params.at("w"), args[0]};
  CHECK(tensorPoolStats().allocated == before.allocated);
  compareTensors(got[0], want[0], "w after 3 steps");
  compareTensors(got[1], want[1], "m after 3 steps");
  CHECK(std::memcmp(got[0].raw(), want[0].raw(), kN * 4) == 0);  // the same bits
  CHECK(std::memcmp(got[1].raw(), want[1].raw(), kN * 4) == 0);
}

TEST_CASE("jit memory: no donation where another tensor holds the buffer, or where a later op reads it") {
  const Tensor w0 = randF32({kN}, -1, 1, 5), m0 = randF32({kN}, -1, 1, 6), g = randF32({kN}, -1, 1, 7);
  Donation d;
  d.args = {true, true};
  d.params = {"w"};
  {
    // The caller keeps a copy of the state and of the param: both stay as
    // they were.
    std::map<std::string, Tensor> params{{"w", w0}};
    const Tensor keptW = params.at("w");
    Update u(m0, g);
    std::vector<Tensor> r = makeJitEngine(paramContext(params), testOptions())->call(u.b.f, u.b.args, d);
    CHECK(r[0].raw() != w0.raw());
    CHECK(r[1].raw() != m0.raw());
    CHECK(w0.f32()[17] == randF32({kN}, -1, 1, 5).f32()[17]);
    CHECK(m0.f32()[17] == randF32({kN}, -1, 1, 6).f32()[17]);
  }
  {
    // sum(w) runs after w' is written: w is not w''s donor (nor g anyone's:
    // no result has its type and reads it as a leaf but m').
    Update u(m0, g, /*readLate=*/true);
    const std::vector<DonorInput> donors = jitPlannedDonors(u.b.f, testOptions());
    REQUIRE(donors.size() == 3);
    CHECK_FALSE(donors[0].valid());
    CHECK(donors[1].arg == 0);
    CHECK_FALSE(donors[2].valid());
    std::map<std::string, Tensor> params{{"w", Tensor::fromF32({kN}, std::vector<float>(w0.f32(), w0.f32() + kN))}};
    std::vector<Tensor> args{Tensor::fromF32({kN}, std::vector<float>(m0.f32(), m0.f32() + kN)), g};
    std::map<std::string, Tensor> ref{{"w", w0}};
    std::vector<Tensor> want = interpret(u.b.f, {m0, g}, paramContext(ref));
    std::vector<Tensor> got = makeJitEngine(paramContext(params), testOptions())->call(u.b.f, args, d);
    CHECK(got[0].raw() != params.at("w").raw());
    for (size_t i = 0; i < want.size(); ++i) compareTensors(got[i], want[i], "result " + std::to_string(i));
  }
  {
    // x + broadcast(row 1 of x): the row is read through a slice (an alias
    // of x at another index), so writing the sum into x's buffer would
    // overwrite row 1 before rows 2 and 3 read it: x is not donated.
    Builder b;
    const Tensor x0 = randF32({4, kN / 4}, -1, 1, 8);
    Value* x = b.arg(x0);
    Value* row = b.op(OpKind::Slice, {x}, attrs({{"axis", int64_t(0)}, {"start", int64_t(1)}, {"end", int64_t(2)}}));
    Value* z = b.op(OpKind::Add, {x, b.op(OpKind::Broadcast, {row}, attrs({{"shape", Ints{4, kN / 4}}}))});
    b.f.results = {z};
    const std::vector<DonorInput> donors = jitPlannedDonors(b.f, testOptions());
    REQUIRE(donors.size() == 1);
    CHECK_FALSE(donors[0].valid());
    Donation dx;
    dx.args = {true};
    std::vector<Tensor> args{Tensor::fromF32({4, kN / 4}, std::vector<float>(x0.f32(), x0.f32() + kN))};
    const Tensor want = interpret(b.f, {x0}, {}).at(0);
    const Tensor got = makeJitEngine({}, testOptions())->call(b.f, args, dx).at(0);
    CHECK(got.raw() != args[0].raw());
    compareTensors(got, want, "x + broadcast(x[1])");
  }
}

// Side outputs (BufferPlan::sideOutput): Adam's m' and v' are stored by the
// loop of p' = p - lr m' / (sqrt(v') + eps), which reads both: one loop for
// the three results, the interpreter's numbers, and donation into p, m and
// v as before. A result read by an op of another shape (a broadcast), or
// by two ops, keeps its own loop.
TEST_CASE("jit memory: an Adam update's three results in one loop") {
  const TensorType s{DType::F32, {}};
  Builder b;
  Value* mv = b.arg(randF32({kN}, -1, 1, 11));
  Value* vv = b.arg(randF32({kN}, 0, 1, 12));
  Value* gv = b.arg(randF32({kN}, -1, 1, 13));
  Value* w = b.typed(OpKind::Param, attrs({{"name", std::string("w")}}), mv->type);
  auto c = [&](double x) { return b.constant(x, s); };
  Value* m2 = b.op(OpKind::Add, {b.op(OpKind::Mul, {c(0.9), mv}), b.op(OpKind::Mul, {c(0.1), gv})});
  Value* v2 = b.op(OpKind::Add, {b.op(OpKind::Mul, {c(0.999), vv}),
                                 b.op(OpKind::Mul, {c(0.001), b.op(OpKind::Mul, {gv, gv})})});
  Value* den = b.op(OpKind::Add, {b.op(OpKind::Sqrt, {v2}), c(1e-8)});
  Value* w2 = b.op(OpKind::Sub, {w, b.op(OpKind::Mul, {c(0.01), b.op(OpKind::Div, {m2, den})})});
  b.f.results = {w2, m2, v2};
  std::map<std::string, Tensor> params{{"w", randF32({kN}, -1, 1, 14)}};
  const KernelContext ctx = paramContext(params);
  b.check(b.f.results, ctx);
  const backend::jit::BufferPlan p = backend::jit::planBuffers(b.f, testOptions());
  size_t loops = 0;
  for (size_t i = 0; i < b.f.ops.size(); ++i) {
    const ir::Op& op = *b.f.ops[i];
    if (op.result == m2 || op.result == v2) CHECK(p.sideOutput[i]);
    if (p.live[i] && !p.fused[i] && !p.sideOutput[i] && op.kind != OpKind::Param && op.kind != OpKind::Constant) loops++;
  }
  CHECK(loops == 1);
  const std::vector<DonorInput> donors = jitPlannedDonors(b.f, testOptions());
  REQUIRE(donors.size() == 3);
  CHECK(donors[0].param == "w");
  CHECK(donors[1].arg == 0);
  CHECK(donors[2].arg == 1);

  // The only reader is a reduction, or an op of another shape (a
  // broadcast): no side outputs.
  for (int variant = 0; variant < 2; ++variant) {
    Builder b2;
    Value* m = b2.arg(randF32({64, 32}, -1, 1, 15));
    Value* z = b2.arg(randF32({2, 64, 32}, -1, 1, 16));
    Value* m2b = b2.op(OpKind::Mul, {m, m});
    Value* r = variant == 0 ? b2.op(OpKind::Sum, {m2b}, attrs({{"axis", Ints{0}}}))
                            : b2.op(OpKind::Add, {b2.op(OpKind::Broadcast, {m2b}, attrs({{"shape", Ints{2, 64, 32}}})), z});
    b2.check({r, m2b});
    const backend::jit::BufferPlan p2 = backend::jit::planBuffers(b2.f, testOptions());
    for (size_t i = 0; i < b2.f.ops.size(); ++i) CHECK_FALSE(p2.sideOutput[i]);
  }
}
