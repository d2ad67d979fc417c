// The JIT engine as a whole: fusion and buffer planning, the process-wide
// compile cache under threads, per-rank programs with collectives, and the
// results an engine hands back.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstring>
#include <thread>

#include "jit_test_util.h"

using namespace jittest;

namespace {

// x -> tanh(exp(x) * y + 1.5) - x: five elementwise ops (and a constant).
Value* chain(Builder& b, Value* x, Value* y) {
  Value* e = b.op(OpKind::Exp, {x});
  Value* m = b.op(OpKind::Mul, {e, y});
  Value* a = b.op(OpKind::Add, {m, b.constant(1.5, {DType::F32, {}})});
  Value* t = b.op(OpKind::Tanh, {a});
  return b.op(OpKind::Sub, {t, x});
}

// Ranks as threads of this process; collectives over the whole world with
// std::barrier (enough for the JIT's tests; runtime/ has the real one).
class BarrierWorld {
 public:
  explicit BarrierWorld(int n) : n_(n), sync_(n), posted_(n) {}
  int size() const { return n_; }
  void sync() { sync_.arrive_and_wait(); }
  std::vector<const void*>& posted() { return posted_; }

 private:
  int n_;
  std::barrier<> sync_;
  std::vector<const void*> posted_;
};

class BarrierComm : public Communicator {
 public:
  BarrierComm(BarrierWorld& w, int rank) : w_(w), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return w_.size(); }
  void runAllGather(const std::vector<int>& group, const void* send, size_t bytes, void* recv) override {
    w_.posted()[rank_] = send;
    w_.sync();
    for (size_t i = 0; i < group.size(); ++i)
      std::memcpy((char*)recv + i * bytes, w_.posted()[group[i]], bytes);
    w_.sync();
  }
  void runAllReduce(const std::vector<int>& group, void* data, size_t count, DType dt, ReduceOp op) override {
    REQUIRE(op == ReduceOp::Sum);
    std::vector<float> mine((const float*)data, (const float*)data + count);
    w_.posted()[rank_] = mine.data();
    w_.sync();
    for (size_t k = 0; k < count; ++k) {
      float s = 0;
      for (int r : group) s += ((const float*)w_.posted()[r])[k];
      ((float*)data)[k] = s;
    }
    w_.sync();
  }
  void runReduceScatter(const std::vector<int>& group, const void* send, size_t count, DType dt, void* recv) override {
    w_.posted()[rank_] = send;
    w_.sync();
    const size_t me = index(group);
    for (size_t k = 0; k < count; ++k) {
      float fs = 0;
      uint32_t is = 0;  // i32 sums wrap (as the kernels'); f32 bits read as i32 would overflow
      for (int r : group) {
        if (dt == DType::F32) fs += ((const float*)w_.posted()[r])[me * count + k];
        else is += (uint32_t)((const int32_t*)w_.posted()[r])[me * count + k];
      }
      if (dt == DType::F32) ((float*)recv)[k] = fs;
      else ((int32_t*)recv)[k] = (int32_t)is;
    }
    w_.sync();
  }
  void runAllToAll(const std::vector<int>& group, const void* send, size_t bytes, void* recv) override {
    w_.posted()[rank_] = send;
    w_.sync();
    const size_t me = index(group);
    for (size_t i = 0; i < group.size(); ++i)
      std::memcpy((char*)recv + i * bytes, (const char*)w_.posted()[group[i]] + me * bytes, bytes);
    w_.sync();
  }
  void runPermute(const std::vector<int>& group, const std::vector<int64_t>& perm, const void* send, size_t bytes,
               void* recv) override {
    w_.posted()[rank_] = send;
    w_.sync();
    std::memcpy(recv, w_.posted()[group[(size_t)perm[index(group)]]], bytes);
    w_.sync();
  }
  void barrier() override { w_.sync(); }
  void abort(const std::string&) override {}


 private:
  size_t index(const std::vector<int>& group) const {
    return (size_t)(std::find(group.begin(), group.end(), rank_) - group.begin());
  }
  BarrierWorld& w_;
  int rank_;
};

class FailingComm : public BarrierComm {
 public:
  using BarrierComm::BarrierComm;

 protected:
  void run(const CollectiveCall& c) override {
    if (c.kind == ir::OpKind::AllReduce) throw CommError("rank 1 failed: test");
    BarrierComm::run(c);
  }
};

ir::Mesh lineMesh(int n) {
  ir::Mesh m;
  m.name = "m";
  m.axes = {{"x", n}};
  return m;
}

}  // namespace

TEST_CASE("jit: a 5-op elementwise chain is one loop with no intermediate buffers") {
  Builder b;
  Value* x = b.arg(randF32({33, 65}));
  Value* y = b.arg(randF32({65}, -1, 1, 5));
  b.check1(chain(b, x, y));
  CHECK(jitPeakBytes(b.f, testOptions()) == 0);
  // One function, exp inlined as arithmetic (its range reduction's floor),
  // no workspace traffic, and the optimised loop is vectorised.
  std::string ll = jitEmitLLVM(b.f, /*optimized=*/false, testOptions());
  CHECK(ll.find("@llvm.floor.f32") != std::string::npos);
  CHECK(ll.find("@llvm.exp.f32") == std::string::npos);
  CHECK(ll.find("gsl_rt_") == std::string::npos);  // nothing called
  std::string opt = jitEmitLLVM(b.f, /*optimized=*/true, testOptions());
  CHECK(opt.find("x float>") != std::string::npos);  // vector code
}

TEST_CASE("jit: a large elementwise result is streamed with non-temporal stores") {
  // 16 MiB of result: the loop has a copy for an aligned buffer, whose
  // vector stores are non-temporal (x86), followed by a store fence.
  Builder b;
  Value* x = b.arg(randF32({1024, 4096}));
  Value* y = b.arg(randF32({4096}, -1, 1, 5));
  b.check1(b.op(OpKind::Gelu, {b.op(OpKind::Add, {b.op(OpKind::Mul, {x, y}), y})}));
  std::string opt = jitEmitLLVM(b.f, /*optimized=*/true, testOptions());
#if defined(__x86_64__)
  CHECK(opt.find("x float>") != std::string::npos);
  CHECK(opt.find("!nontemporal") != std::string::npos);
  CHECK(opt.find("@llvm.x86.sse.sfence") != std::string::npos);
#endif
  // A small result is not.
  Builder s;
  Value* sx = s.arg(randF32({33, 65}));
  s.check1(s.op(OpKind::Gelu, {sx}));
  CHECK(jitEmitLLVM(s.f, true, testOptions()).find("!nontemporal") == std::string::npos);
}

TEST_CASE("jit: a reduction of a fused chain reads no intermediate buffer") {
  Builder b;
  Value* x = b.arg(randF32({16, 100}));
  Value* y = b.arg(randF32({100}, -1, 1, 5));
  Value* c = chain(b, x, y);
  Value* sq = b.op(OpKind::Mul, {c, c});  // c has two uses: materialised
  Value* s = b.op(OpKind::Mean, {b.op(OpKind::Sqrt, {b.op(OpKind::Abs, {sq})})}, attrs({{"axis", Ints{-1}}}));
  b.check1(s);
  // The chain's result (16 x 100 f32) and mean's double accumulators (16 x 8).
  CHECK(jitPeakBytes(b.f, testOptions()) == 16 * 100 * 4 + 128);
}

TEST_CASE("jit: dead values' buffers are reused") {
  Builder b;
  Value* v = b.arg(randF32({64, 64}));
  for (int i = 0; i < 6; ++i) v = b.op(OpKind::Transpose, {v}, attrs({{"perm", Ints{1, 0}}}));
  b.check1(v);
  // Five intermediates, at most two alive at once.
  CHECK(jitPeakBytes(b.f, testOptions()) == 2 * 64 * 64 * 4);
}

TEST_CASE("jit: results that are arguments, repeated values, views, params and constants") {
  Tensor w = randF32({2, 3});
  KernelContext ctx;
  ctx.param = [&](const std::string&) -> const Tensor& { return w; };
  Builder b;
  Value* x = b.arg(randF32({2, 3}));
  Value* r = b.op(OpKind::Reshape, {x}, attrs({{"shape", Ints{3, 2}}}));
  Value* p = b.typed(OpKind::Param, attrs({{"name", std::string("w")}}), w.type());
  Value* c = b.constant(-1.0, {DType::I32, {4}});
  Value* s = b.op(OpKind::Add, {x, p});
  auto res = b.check({x, s, r, s, p, c, x}, ctx);
  CHECK(res[0].raw() == b.args[0].raw());  // as the interpreter: the argument itself
  CHECK(res[3].raw() == res[1].raw());
  CHECK(res[2].raw() != b.args[0].raw());  // a view is copied out
  CHECK(res[4].raw() != w.raw());
}

TEST_CASE("jit: unused ops are skipped, but a failing take still fails") {
  Builder b;
  Value* x = b.arg(randF32({4, 3}));
  Value* idx = b.arg(i32({2}, {0, 9}));
  b.op(OpKind::Exp, {x});  // dead
  b.op(OpKind::Take, {x, idx});  // dead, but it fails
  b.f.results = {b.op(OpKind::Neg, {x})};
  CHECK_THROWS_AS(makeJitEngine({}, testOptions())->call(b.f, b.args), RuntimeError);
  CHECK_THROWS_AS(interpret(b.f, b.args, {}), RuntimeError);
}

TEST_CASE("jit: 64 threads calling one function compile it exactly once") {
  // A function no other test compiles.
  auto build = [](Builder& b) {
    Value* x = b.arg(randF32({7, 3, 11}, -1, 1, 77));
    Value* s = b.op(OpKind::Softmax, {chain(b, x, x)}, attrs({{"axis", int64_t(1)}}));
    b.f.results = {b.op(OpKind::Sum, {s}, attrs({{"axis", Ints{0}}}))};
  };
  Builder ref;
  build(ref);
  Tensor expect = interpret(ref.f, ref.args, {}).at(0);
  const uint64_t before = jitCompileCount();
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  std::barrier<> start(64);
  for (int t = 0; t < 64; ++t)
    threads.emplace_back([&, t] {
      Builder b;  // an equal function (same text), built by each thread
      build(b);
      KernelContext ctx;
      ctx.rank = t;
      auto engine = makeJitEngine(ctx, testOptions());
      start.arrive_and_wait();
      for (int rep = 0; rep < 5; ++rep) {
        Tensor got = engine->call(b.f, b.args).at(0);
        bool same = got.type() == expect.type();
        for (int64_t i = 0; same && i < got.size(); ++i) same = close(got.f32()[i], expect.f32()[i]);
        if (same && rep == 4) ok++;
      }
    });
  for (auto& th : threads) th.join();
  CHECK(ok == 64);
  CHECK(jitCompileCount() - before == 1);
}

TEST_CASE("jit: different functions compile at once on different threads; compile ahead") {
  // Eight different functions (a chain scaled by a different constant),
  // each compiled on its own thread at the same moment: each right.
  const int n = 8;
  auto build = [](Builder& b, int k, const Tensor& x, const Tensor& y) {
    Value* c = chain(b, b.arg(x), b.arg(y));
    b.f.results = {b.op(OpKind::Mul, {c, b.constant(1.0 + k, {DType::F32, {}})})};
  };
  Tensor x = randF32({33, 17}), y = randF32({33, 17}, -1, 1, 7);
  std::vector<Tensor> expect(n), got(n);
  for (int k = 0; k < n; ++k) {
    Builder ref;
    build(ref, k, x, y);
    expect[k] = interpret(ref.f, ref.args, {}).at(0);
  }
  const uint64_t before = jitCompileCount();
  std::vector<std::thread> threads;
  std::barrier<> start(n);
  for (int k = 0; k < n; ++k)
    threads.emplace_back([&, k] {
      Builder b;
      build(b, k, x, y);
      auto engine = makeJitEngine({}, testOptions());
      start.arrive_and_wait();
      got[k] = engine->call(b.f, b.args).at(0);
    });
  for (auto& th : threads) th.join();
  CHECK(jitCompileCount() - before == n);
  for (int k = 0; k < n; ++k) compareTensors(got[k], expect[k], "function " + std::to_string(k));

  // jitCompileAhead compiles a function not seen yet, once; a call then
  // finds it compiled, and compiling it ahead again does nothing.
  Builder b;
  build(b, 100, x, y);
  const uint64_t c0 = jitCompileCount();
  jitCompileAhead(b.f, testOptions());
  CHECK(jitCompileCount() - c0 == 1);
  Tensor r = makeJitEngine({}, testOptions())->call(b.f, b.args).at(0);
  jitCompileAhead(b.f, testOptions());
  CHECK(jitCompileCount() - c0 == 1);
  Builder ref;
  build(ref, 100, x, y);
  compareTensors(r, interpret(ref.f, ref.args, {}).at(0), "compiled ahead");
}

TEST_CASE("jit: one compiled per-rank program serves every rank (shard_slice, all_reduce, all_gather)") {
  const int n = 4;
  ir::Mesh mesh = lineMesh(n);
  BarrierWorld world(n);
  auto build = [&](Builder& b, const Tensor& x) {
    Value* v = b.arg(x);
    AttrMap at = attrs({{"mesh", std::string("m")}, {"axes", Ints{0}}, {"n", int64_t(n)}, {"dim", int64_t(1)}});
    Value* local = b.op(OpKind::ShardSlice, {v}, at);                       // [6, 2]
    Value* y = b.op(OpKind::Mul, {local, local});
    Value* red = b.op(OpKind::AllReduce, {y}, attrs({{"mesh", std::string("m")}, {"axes", Ints{0}},
                                                      {"n", int64_t(n)}, {"reduce", ir::ReduceOp::Sum}}));
    Value* g = b.op(OpKind::AllGather, {b.op(OpKind::Exp, {local})}, at);  // [6, 8]
    b.f.results = {local, red, g};
  };
  Tensor x = randF32({6, 8});
  // Expected, per rank: the interpreter on the same world.
  std::vector<std::vector<Tensor>> expect(n), got(n);
  auto runAll = [&](bool useJit, std::vector<std::vector<Tensor>>& out) {
    std::vector<std::thread> ts;
    for (int r = 0; r < n; ++r)
      ts.emplace_back([&, r] {
        Builder b;
        b.mesh = &mesh;
        build(b, x);
        BarrierComm comm(world, r);
        KernelContext ctx;
        ctx.rank = r;
        ctx.comm = &comm;
        ctx.mesh = [&](const std::string&) -> const ir::Mesh& { return mesh; };
        out[r] = useJit ? makeJitEngine(ctx, testOptions())->call(b.f, b.args) : interpret(b.f, b.args, ctx);
      });
    for (auto& t : ts) t.join();
  };
  runAll(false, expect);
  const uint64_t before = jitCompileCount();
  runAll(true, got);
  CHECK(jitCompileCount() - before == 1);
  for (int r = 0; r < n; ++r)
    for (size_t j = 0; j < expect[r].size(); ++j)
      compareTensors(got[r][j], expect[r][j], "rank " + std::to_string(r) + " result " + std::to_string(j));
  // Ranks differ where they should: rank r holds columns 2r, 2r+1.
  CHECK(got[1][0].f32()[0] == x.f32()[2]);
}

TEST_CASE("jit: reduce_scatter, all_to_all and collective_permute on 2 x 2 ranks") {
  ir::Mesh mesh;
  mesh.name = "m";
  mesh.axes = {{"a", 2}, {"b", 2}};
  const int n = 4;
  BarrierWorld world(n);
  auto run = [&](bool useJit, std::vector<std::vector<Tensor>>& out) {
    std::vector<std::thread> ts;
    for (int r = 0; r < n; ++r)
      ts.emplace_back([&, r] {
        Builder b;
        b.mesh = &mesh;
        Value* v = b.arg(randF32({4, 8}, -5, 5, 60 + r));  // every rank its own block
        auto common = [](Ints axes, int64_t size) {
          return attrs({{"mesh", std::string("m")}, {"axes", axes}, {"n", size}});
        };
        AttrMap rs = common({1}, 2);
        rs.set("dim", int64_t(0));
        Value* y = b.op(OpKind::ReduceScatter, {b.op(OpKind::Mul, {v, v})}, rs);  // [2, 8]
        AttrMap a2a = common({0, 1}, 4);
        a2a.set("split_dim", int64_t(1));
        a2a.set("concat_dim", int64_t(0));
        Value* z = b.op(OpKind::AllToAll, {b.op(OpKind::Exp, {v})}, a2a);  // [16, 2]
        AttrMap cp = common({0}, 2);
        cp.set("perm", Ints{1, 0});
        Value* w = b.op(OpKind::CollectivePermute, {b.op(OpKind::Cast, {v}, attrs({{"dtype", DType::I32}}))}, cp);
        b.f.results = {y, z, w};
        BarrierComm comm(world, r);
        KernelContext ctx;
        ctx.rank = r;
        ctx.comm = &comm;
        ctx.mesh = [&](const std::string&) -> const ir::Mesh& { return mesh; };
        out[r] = useJit ? makeJitEngine(ctx, testOptions())->call(b.f, b.args) : interpret(b.f, b.args, ctx);
      });
    for (auto& t : ts) t.join();
  };
  std::vector<std::vector<Tensor>> expect(n), got(n);
  run(false, expect);
  const uint64_t before = jitCompileCount();
  run(true, got);
  CHECK(jitCompileCount() - before == 1);  // the ranks' functions differ in argument values only
  for (int r = 0; r < n; ++r)
    for (size_t j = 0; j < expect[r].size(); ++j)
      compareTensors(got[r][j], expect[r][j], "rank " + std::to_string(r) + " result " + std::to_string(j));
}

TEST_CASE("jit: a communication failure is rethrown by the engine") {
  ir::Mesh mesh = lineMesh(1);
  BarrierWorld world(1);
  FailingComm comm(world, 0);
  KernelContext ctx;
  ctx.comm = &comm;
  ctx.mesh = [&](const std::string&) -> const ir::Mesh& { return mesh; };
  Builder b;
  b.mesh = &mesh;
  Value* v = b.arg(randF32({3}));
  b.f.results = {b.op(OpKind::AllReduce, {v}, attrs({{"mesh", std::string("m")}, {"axes", Ints{0}},
                                                      {"n", int64_t(1)}, {"reduce", ir::ReduceOp::Sum}}))};
  CHECK_THROWS_AS(makeJitEngine(ctx, testOptions())->call(b.f, b.args), CommError);
}

TEST_CASE("jit: --emit llvm text") {
  Builder b;
  Value* x = b.arg(randF32({8, 8}));
  b.f.results = {b.op(OpKind::MatMul, {x, x})};
  std::string raw = jitEmitLLVM(b.f, false, testOptions()), opt = jitEmitLLVM(b.f, true, testOptions());
  CHECK(raw.find("define i32 @gsl_t(ptr") != std::string::npos);
  CHECK(opt.find("@gsl_t(ptr") != std::string::npos);
  CHECK(opt.find(" x float>") != std::string::npos);  // vectorised for the host
}

TEST_CASE("jit: GEMM code choice (generated kernel, Eigen)") {
  auto ll = [](const char* spec, Shape a, Shape b) {
    Builder bl;
    Value* x = bl.arg(randF32(a));
    Value* y = bl.arg(randF32(b));
    bl.f.results = {bl.op(OpKind::Einsum, {x, y}, attrs({{"spec", ir::einsumSpec(spec, 2)}}))};
    return jitEmitLLVM(bl.f, false, testOptions());
  };
  // Contiguous rows of B and C: the generated kernel, even when large.
  CHECK(ll("ij,jk->ik", {300, 200}, {200, 100}).find("gsl_rt_sgemm") == std::string::npos);
  CHECK(ll("ij,jk->ik", {300, 200}, {200, 100}).find("llvm.fmuladd.v") != std::string::npos);
  // B transposed and C row-major, large: the kernel on packed panels of B.
  CHECK(ll("bqd,bkd->bqk", {3, 50, 20}, {3, 60, 20}).find("gsl_rt_sgemm") == std::string::npos);
  CHECK(ll("bqd,bkd->bqk", {3, 50, 20}, {3, 60, 20}).find("llvm.fmuladd.v") != std::string::npos);
  // The layouts of stdlib/nn.gsl's attention that fell back to Eigen at
  // D = 256 (the output projection's gradient, scores at longer sequences).
  CHECK(ll("bqd,nhd->bnqh", {16, 16, 256}, {8, 32, 256}).find("gsl_rt_sgemm") == std::string::npos);
  CHECK(ll("bnqh,bnkh->bnqk", {2, 8, 64, 32}, {2, 8, 64, 32}).find("gsl_rt_sgemm") == std::string::npos);
  // A batch label innermost in the result: computed in temp space by the kernel.
  CHECK(ll("bij,bjk->ikb", {3, 50, 20}, {3, 20, 60}).find("gsl_rt_sgemm") == std::string::npos);
}

// Random graphs of ops (fusion, aliasing views, buffer reuse, repeated and
// argument results) against the interpreter.
TEST_CASE("jit: random op graphs match the interpreter") {
  std::mt19937 rng(2024);
  auto pick = [&](size_t n) { return (size_t)(rng() % n); };
  for (int trial = 0; trial < 60; ++trial) {
    Builder b;
    std::vector<Value*> pool = {b.arg(randF32({4, 6}, -1, 1, 10 + trial)), b.arg(randF32({6}, -1, 1, 500 + trial)),
                                b.arg(randF32({4, 1}, -1, 1, 900 + trial))};
    auto withShape = [&](const Shape& s) {
      std::vector<Value*> r;
      for (Value* v : pool)
        if (v->type.shape == s) r.push_back(v);
      return r;
    };
    for (int step = 0; step < 14; ++step) {
      Value* x = pool[pick(pool.size())];
      const Shape& s = x->type.shape;
      Value* y = nullptr;
      switch (pick(11)) {
        case 0: y = b.op(OpKind::Tanh, {x}); break;
        case 1: y = b.op(OpKind::Sigmoid, {b.op(OpKind::Neg, {x})}); break;
        case 2: {  // binary with any broadcast-compatible partner
          Value* z = pool[pick(pool.size())];
          Shape out;
          if (!ir::broadcastShapes(s, z->type.shape, out)) z = x;
          OpKind ks[] = {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Maximum};
          y = b.op(ks[pick(4)], {x, z});
          break;
        }
        case 3:
          if (s.size() == 2) y = b.op(OpKind::Transpose, {x}, attrs({{"perm", Ints{1, 0}}}));
          break;
        case 4: y = b.op(OpKind::Reshape, {x}, attrs({{"shape", Ints{-1}}})); break;
        case 5:
          if (s.size() == 1 && s[0] == 24) y = b.op(OpKind::Reshape, {x}, attrs({{"shape", Ints{4, 6}}}));
          else if (s.size() == 2) y = b.op(OpKind::Sum, {x}, attrs({{"axis", Ints{1}}, {"keepdims", true}}));
          break;
        case 6:
          if (s.size() >= 1 && s[0] >= 2)
            y = b.op(OpKind::Slice, {x}, attrs({{"axis", int64_t(0)}, {"start", int64_t(1)}, {"end", s[0]}}));
          break;
        case 7:
          if (s == Shape{4, 6} && !withShape({6, 4}).empty())
            y = b.op(OpKind::MatMul, {x, withShape({6, 4})[0]});
          break;
        case 8:
          if (s.size() == 2) y = b.op(OpKind::Concat, {x, x}, attrs({{"axis", int64_t(1)}}));
          break;
        case 9:
          if (s.size() >= 1) y = b.op(OpKind::Softmax, {x}, attrs({{"axis", int64_t(-1)}}));
          break;
        case 10: {
          Value* c = b.op(OpKind::Gt, {x, b.constant(0.1, {DType::F32, {}})});
          y = b.op(OpKind::Where, {c, x, b.op(OpKind::Exp, {x})});
          break;
        }
      }
      if (y) pool.push_back(y);
    }
    std::vector<Value*> results;
    for (int k = 0, n = 1 + (int)pick(3); k < n; ++k) results.push_back(pool[pick(pool.size())]);
    results.push_back(pool.back());
    INFO("trial " << trial);
    b.check(results, {}, /*normwise=*/true);
  }
}

// Count of non-overlapping occurrences of `needle` in `s`.
static size_t countOf(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + needle.size())) ++n;
  return n;
}

TEST_CASE("jit: one function per kernel, identical kernels emitted once") {
  // Three identical layers h = gelu(h @ w + b), each with its own weights:
  // per layer a GEMM kernel and a fused add + gelu kernel, the same
  // function in every layer.
  Builder b;
  Value* h = b.arg(randF32({16, 32}));
  for (int l = 0; l < 3; ++l) {
    Value* w = b.arg(randF32({32, 32}, -1, 1, 10 + l));
    Value* bias = b.arg(randF32({32}, -1, 1, 20 + l));
    Value* bb = b.op(OpKind::Broadcast, {bias}, attrs({{"shape", Ints{16, 32}}}));
    h = b.op(OpKind::Gelu, {b.op(OpKind::Add, {b.op(OpKind::MatMul, {h, w}), bb})});
  }
  b.check1(h, {}, /*normwise=*/true);  // three chained GEMMs: summation order differs
  const std::string ll = jitEmitLLVM(b.f, /*optimized=*/false, testOptions());
  CHECK(countOf(ll, "define i32 @gsl_t(") == 1);
  CHECK(countOf(ll, "define internal i32 @gsl_t.k") == 2);
  CHECK(countOf(ll, "call i32 @gsl_t.k") == 6);
}
