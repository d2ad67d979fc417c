// JitOptions are values: each engine compiles with the options it was
// given (and the cache keeps one compiled function per options), and the
// GSL_JIT_* variables are read only where a caller asks for them.
#include <doctest/doctest.h>

#include <cstdlib>
#include <optional>

#include "jit_test_util.h"

using namespace jittest;

namespace {

constexpr auto npos = std::string::npos;

// Sets environment variables for one scope and restores them after.
class ScopedEnv {
 public:
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second) setenv(it->first.c_str(), it->second->c_str(), 1);
      else unsetenv(it->first.c_str());
    }
  }
  void set(const char* name, const char* value) {
    save(name);
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }

 private:
  void save(const char* name) {
    const char* old = std::getenv(name);
    saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

}  // namespace

TEST_CASE("jit options: fallback ops are chosen per engine, one compile per options") {
  Builder b;
  Value* x = b.arg(randF32({5, 9}, -1, 1, 31));
  Value* y = b.arg(randF32({9}, -1, 1, 32));
  b.f.results = {b.op(OpKind::Exp, {b.op(OpKind::Mul, {x, y})})};
  JitOptions plain;
  JitOptions viaKernel;
  viaKernel.fallbackOps = {OpKind::Mul};
  CHECK(jitEmitLLVM(b.f, false, plain).find("gsl_rt_eval_op") == npos);
  CHECK(jitEmitLLVM(b.f, false, viaKernel).find("gsl_rt_eval_op") != npos);

  const Tensor ref = interpret(b.f, b.args, {}).at(0);
  const uint64_t before = jitCompileCount();
  for (const JitOptions& o : {plain, viaKernel, plain, viaKernel})
    compareTensors(makeJitEngine({}, o)->call(b.f, b.args).at(0), ref, "exp(x * y)");
  CHECK(jitCompileCount() - before == 2);
}

TEST_CASE("jit options: the GEMM code follows JitOptions::gemm") {
  auto build = [](Builder& b, const char* spec, Shape sa, Shape sb) {
    Value* x = b.arg(randIntF32(sa, -4, 4, 41));
    Value* y = b.arg(randIntF32(sb, -4, 4, 42));
    b.f.results = {b.op(OpKind::Einsum, {x, y}, attrs({{"spec", ir::einsumSpec(spec, 2)}}))};
  };
  JitOptions eigen, loops;
  eigen.gemm = JitOptions::GemmCode::Eigen;
  loops.gemm = JitOptions::GemmCode::Loops;

  // Rows of B and C contiguous: the generated kernel, unless Eigen is asked for.
  Builder rows;
  build(rows, "ij,jk->ik", {48, 40}, {40, 36});
  CHECK(jitEmitLLVM(rows.f, false, {}).find("gsl_rt_sgemm") == npos);
  CHECK(jitEmitLLVM(rows.f, false, eigen).find("gsl_rt_sgemm") != npos);

  // B transposed, large: the generated kernel (on packed panels of B),
  // unless Eigen is asked for.
  Builder trans;
  build(trans, "bqd,bkd->bqk", {3, 50, 20}, {3, 60, 20});
  CHECK(jitEmitLLVM(trans.f, false, {}).find("gsl_rt_sgemm") == npos);
  CHECK(jitEmitLLVM(trans.f, false, eigen).find("gsl_rt_sgemm") != npos);
  CHECK(jitEmitLLVM(trans.f, false, loops).find("gsl_rt_sgemm") == npos);

  for (Builder* b : {&rows, &trans}) {
    const Tensor ref = interpret(b->f, b->args, {}).at(0);
    for (const JitOptions& o : {JitOptions{}, eigen, loops})
      compareTensors(makeJitEngine({}, o)->call(b->f, b->args).at(0), ref, "einsum");
  }
}

TEST_CASE("jit options: a narrower vector width builds a narrower kernel") {
  Builder b;
  Value* x = b.arg(randIntF32({64, 32}, -4, 4, 51));
  Value* y = b.arg(randIntF32({32, 64}, -4, 4, 52));
  b.f.results = {b.op(OpKind::MatMul, {x, y})};
  JitOptions w4;
  w4.vectorWidth = 4;
  std::string ll = jitEmitLLVM(b.f, false, w4);
  CHECK(ll.find("llvm.fmuladd.v4f32") != npos);
  CHECK(ll.find("llvm.fmuladd.v8f32") == npos);
  CHECK(ll.find("llvm.fmuladd.v16f32") == npos);
  compareTensors(makeJitEngine({}, w4)->call(b.f, b.args).at(0), interpret(b.f, b.args, {}).at(0), "matmul");
  // The packed B panel (kc 32 x nr 8) and A blocks (11 blocks of mr 6 rows
  // x kc 32) of 4 lanes; the result is written in place.
  CHECK(jitPeakBytes(b.f, w4) == (32 * 8 + 66 * 32) * 4);
  // The planner alone resolves the width as the compiler does.
  for (const JitOptions& o : {JitOptions{}, w4}) CHECK(jitPlannedPeakBytes(b.f, o) == jitPeakBytes(b.f, o));
}

TEST_CASE("jit options: the GSL_JIT_* variables, read at the edge") {
  (void)testOptions();  // the other tests' options, read before this test changes the environment
  ScopedEnv env;
  env.set("GSL_JIT_GEMM", "loops");
  env.set("GSL_JIT_FALLBACK", "einsum,no_such_op,mul");
  env.set("GSL_JIT_VECTOR_WIDTH", "4");
  env.set("GSL_JIT_PROFILE", "1");
  JitOptions o = jitOptionsFromEnvironment();
  CHECK(o.gemm == JitOptions::GemmCode::Loops);
  CHECK(o.fallbackOps == std::vector<OpKind>{OpKind::Einsum, OpKind::Mul});
  CHECK(o.vectorWidth == 4);
  CHECK(o.profileKernels);
  env.set("GSL_JIT_PROFILE", nullptr);

  env.set("GSL_JIT_GEMM", "eigen");
  env.set("GSL_JIT_FALLBACK", nullptr);
  env.set("GSL_JIT_VECTOR_WIDTH", "5");  // not a width: ignored
  o = jitOptionsFromEnvironment();
  CHECK(o.gemm == JitOptions::GemmCode::Eigen);
  CHECK(o.fallbackOps.empty());
  CHECK(o.vectorWidth == 0);

  env.set("GSL_JIT_GEMM", nullptr);
  env.set("GSL_JIT_VECTOR_WIDTH", nullptr);
  CHECK(jitOptionsFromEnvironment() == JitOptions{});
}

TEST_CASE("jit options: optimisation levels and code generation threads give the same results") {
  // Several kernels (a GEMM, an elementwise chain, a reduction, a softmax),
  // so that several threads each generate a share of the functions, which
  // then call each other across objects.
  Builder b;
  Value* x = b.arg(randIntF32({24, 16}, -4, 4, 61));
  Value* w = b.arg(randIntF32({16, 20}, -4, 4, 62));
  Value* mm = b.op(OpKind::MatMul, {x, w});
  Value* t = b.op(OpKind::Tanh, {b.op(OpKind::Mul, {mm, mm})});
  Value* s = b.op(OpKind::Sum, {mm}, attrs({{"axis", Ints{1}}}));
  Value* sm = b.op(OpKind::Softmax, {t}, attrs({{"axis", int64_t(1)}}));
  b.f.results = {mm, s, sm};
  const std::vector<Tensor> ref = makeJitEngine({}, JitOptions{})->call(b.f, b.args);
  const std::vector<Tensor> interp = interpret(b.f, b.args, {});
  for (size_t i = 0; i < ref.size(); ++i) compareTensors(ref[i], interp[i], "default options vs the interpreter");
  for (int threads : {1, 2, 3, 8})
    for (auto [opt, cg] : {std::pair{3, 3}, std::pair{2, 1}, std::pair{1, 0}}) {
      JitOptions o;
      o.compileThreads = threads;
      o.optLevel = opt;
      o.codegenLevel = cg;
      const std::vector<Tensor> got = makeJitEngine({}, o)->call(b.f, b.args);
      REQUIRE(got.size() == ref.size());
      // mm and its row sums are exact (small integers); the softmax
      // within the tests' tolerance.
      for (size_t i = 0; i < got.size(); ++i) compareTensors(got[i], ref[i], "threads/levels vs the default");
    }
}

TEST_CASE("jit options: GSL_JIT_OPT, GSL_JIT_CODEGEN and GSL_JIT_COMPILE_THREADS") {
  ScopedEnv env;
  env.set("GSL_JIT_OPT", "3");
  env.set("GSL_JIT_CODEGEN", "0");
  env.set("GSL_JIT_COMPILE_THREADS", "5");
  JitOptions o = jitOptionsFromEnvironment();
  CHECK(o.optLevel == 3);
  CHECK(o.codegenLevel == 0);
  CHECK(o.compileThreads == 5);
  env.set("GSL_JIT_OPT", "0");  // out of range: the defaults
  env.set("GSL_JIT_CODEGEN", "x");
  env.set("GSL_JIT_COMPILE_THREADS", "0");
  o = jitOptionsFromEnvironment();
  CHECK(o.optLevel == JitOptions{}.optLevel);
  CHECK(o.codegenLevel == JitOptions{}.codegenLevel);
  CHECK(o.compileThreads == 0);
}
