// JIT benchmarks, each against a reference measured in the same run:
//   1. single-thread GFLOP/s of the JIT's matmul at 256..2048 vs Eigen's
//      own product (ratio JIT/Eigen) and, when libopenblas.so.0 loads
//      (Debian's libopenblas0-pthread, the library NumPy's matmul calls),
//      vs OpenBLAS's cblas_sgemm on one thread: the time ratio JIT/OpenBLAS
//      is the median over pairs of alternating runs, timed in the calling
//      thread's CPU time (both run on it alone), so that on a shared
//      machine the time other processes hold the core is not counted;
//   2. a fused elementwise chain gelu(x * w + b) over 16M floats vs the
//      same chain as Eigen array expressions, and vs memcpy of the same
//      bytes (time ratios of the best runs, and the median ratio of
//      alternating pairs in thread CPU time); the page faults (getrusage
//      minflt) per call once warm;
//      (`bench_jit shape M K N`: this part alone, at one shape);
//   3. JIT compile time of the MLP and the Transformer training step.
// The JIT runs with the options the GSL_JIT_* variables ask for (JitOptions.h),
// e.g. GSL_JIT_GEMM=eigen to measure Eigen's GEMMs through the engine.
#include <Eigen/Dense>

#include <dlfcn.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/jit/JitEngine.h"
#include "frontend/Frontend.h"
#include "ir/Function.h"
#include "passes/Pipeline.h"

using namespace gsl;
using Clock = std::chrono::steady_clock;

template <class F>
static double best(int reps, F f) {
  double b = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    f();
    b = std::min(b, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return b;
}

static double threadSeconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

// The calling thread's CPU seconds in f.
template <class F>
static double once(F f) {
  const double t0 = threadSeconds();
  f();
  return threadSeconds() - t0;
}

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// OpenBLAS's cblas_sgemm, single-threaded, or null when the library is not
// installed (the JIT/OpenBLAS column is then left out).
using Sgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);
// OpenBLAS picks its kernels from the CPU's model number, and Debian's
// 0.3.21 takes CPUs it does not know (virtual ones among them) for a
// Prescott (SSE3): on an AVX-512 host that reference would be 4-5x slow.
// Unless OPENBLAS_CORETYPE says otherwise, it is asked for the kernels
// the host's vector units can run (SkylakeX with AVX-512, Haswell with
// AVX2 and FMA), and the kernels it uses are printed.
static Sgemm loadOpenBlas() {
  if (!std::getenv("OPENBLAS_CORETYPE")) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
      setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
      setenv("OPENBLAS_CORETYPE", "Haswell", 1);
  }
  void* h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
  if (!h) return nullptr;
  if (auto setThreads = (void (*)(int))dlsym(h, "openblas_set_num_threads")) setThreads(1);
  if (auto core = (char* (*)())dlsym(h, "openblas_get_corename")) std::printf("   (OpenBLAS kernels: %s)\n", core());
  return (Sgemm)dlsym(h, "cblas_sgemm");
}

static backend::Tensor randomTensor(const ir::Shape& s) {
  backend::Tensor t(ir::TensorType{ir::DType::F32, s});
  float* p = t.f32();
  uint32_t x = 12345;
  for (int64_t i = 0; i < t.size(); ++i) {
    x = x * 1664525u + 1013904223u;
    p[i] = (float)((x >> 8) * (1.0 / 16777216.0) - 0.5);
  }
  return t;
}

static ir::Value* op(ir::Function& f, ir::OpKind k, std::vector<ir::Value*> in, ir::AttrMap at = {}) {
  std::vector<ir::TensorType> ts;
  for (auto* v : in) ts.push_back(v->type);
  ir::TensorType out;
  std::string e = ir::inferType(k, ts, at, out);
  if (!e.empty()) {
    std::cerr << e << "\n";
    std::exit(1);
  }
  return f.append(k, in, at, out)->result;
}

static double compileMs(const std::string& path, int64_t np, std::map<std::string, int64_t> defines) {
  SourceManager sm;
  Diagnostics diags(sm);
  frontend::Options o;
  o.np = np;
  o.defines = defines;
  o.importPath = frontend::defaultImportPath();
  auto prog = frontend::compileFile(path, o, sm, diags);
  if (!prog) {
    diags.print(std::cerr);
    std::exit(1);
  }
  passes::runGlobalPipeline(*prog->module);
  backend::KernelContext ctx;
  const backend::JitOptions opts = backend::jitOptionsFromEnvironment();
  auto engine = backend::makeJitEngine(ctx, opts);
  auto t0 = Clock::now();
  uint64_t before = backend::jitCompileCount();
  for (auto& f : prog->module->functions) {
    auto copy = f->clone();
    auto local = passes::buildPerRankProgram(*prog->module, *copy, false);
    backend::jitEmitLLVM(*local, true, opts);  // compiles and optimises, as a run would
  }
  (void)before;
  return std::chrono::duration<double>(Clock::now() - t0).count() * 1e3;
}

int main(int argc, char** argv) {
  // GSL_PERF_MAP=1: the JIT's code named in /tmp/perf-PID.map for `perf
  // report` (as gsl run --perf-map, docs/trace.md).
  if (const char* e = std::getenv("GSL_PERF_MAP"); e && *e == '1') backend::jitWritePerfMap(true);
  bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  // `bench_jit elementwise`: part 2 only (for paired runs).
  const bool onlyElementwise = argc > 1 && std::string(argv[1]) == "elementwise";
  // `bench_jit matmul`: part 1 only, at 1024 and 2048.
  const bool onlyMatmul = argc > 1 && std::string(argv[1]) == "matmul";
  // `bench_jit shape M K N`: part 1 at that one shape (21 pairs).
  const bool onlyShape = argc == 5 && std::string(argv[1]) == "shape";
  Eigen::setNbThreads(1);
  backend::KernelContext ctx;
  auto jit = backend::makeJitEngine(ctx, backend::jitOptionsFromEnvironment());
  // The engine remembers compiled functions by address: every function
  // benchmarked lives as long as it, so no two share an address.
  std::vector<std::unique_ptr<ir::Function>> functions;

  std::printf("1. matmul, single thread, GFLOP/s (best of runs)\n");
  const Sgemm sgemm = quick ? nullptr : loadOpenBlas();
  if (!quick && !sgemm) std::printf("   (libopenblas.so.0 not found: no OpenBLAS reference)\n");
  // Square sizes n^3, or `bench_jit shape M K N`: C[M,N] = A[M,K] B[K,N] alone.
  struct Mkn {
    int64_t m, k, n;
  };
  std::vector<Mkn> sizes;
  for (int64_t n : quick ? std::vector<int64_t>{64} : std::vector<int64_t>{256, 512, 1024, 2048}) sizes.push_back({n, n, n});
  if (onlyElementwise) sizes.clear();
  if (onlyMatmul) sizes = {{1024, 1024, 1024}, {2048, 2048, 2048}};
  if (onlyShape) sizes = {{std::atoll(argv[2]), std::atoll(argv[3]), std::atoll(argv[4])}};
  for (auto [m, k, n] : sizes) {
    ir::Function& f = *functions.emplace_back(std::make_unique<ir::Function>());
    f.name = "mm" + std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n);
    auto* a = f.addArg({ir::DType::F32, {m, k}});
    auto* b = f.addArg({ir::DType::F32, {k, n}});
    f.results = {op(f, ir::OpKind::MatMul, {a, b})};
    auto A = randomTensor({m, k}), B = randomTensor({k, n});
    jit->call(f, {A, B});  // compile + warm up
    const bool big = m * k * n >= (int64_t)2048 * 2048 * 2048;
    int reps = big ? 3 : 5;
    double tj = best(reps, [&] { jit->call(f, {A, B}); });
    Eigen::Map<const Eigen::Matrix<float, -1, -1, Eigen::RowMajor>> EA(A.f32(), m, k), EB(B.f32(), k, n);
    Eigen::Matrix<float, -1, -1, Eigen::RowMajor> EC(m, n);
    EC.noalias() = EA * EB;
    double te = best(reps, [&] { EC.noalias() = EA * EB; });
    double fl = 2.0 * m * n * k;
    if (m == k && k == n)
      std::printf("   %5lld: JIT %7.1f   Eigen %7.1f   ratio JIT/Eigen = %.2f", (long long)n, fl / tj / 1e9,
                  fl / te / 1e9, te / tj);
    else
      std::printf("   %lldx%lldx%lld: JIT %7.1f   Eigen %7.1f   ratio JIT/Eigen = %.2f", (long long)m, (long long)k,
                  (long long)n, fl / tj / 1e9, fl / te / 1e9, te / tj);
    if (sgemm) {
      // Row-major C = A B (CblasRowMajor 101, CblasNoTrans 111).
      backend::Tensor C = randomTensor({m, n});
      auto blas = [&] {
        sgemm(101, 111, 111, (int)m, (int)n, (int)k, 1.0f, A.f32(), (int)k, B.f32(), (int)n, 0.0f, C.f32(), (int)n);
      };
      blas();
      const backend::Tensor J = jit->call(f, {A, B})[0];
      double maxRel = 0;
      for (int64_t i = 0; i < m * n; ++i)
        maxRel = std::max(maxRel, (double)std::fabs(J.f32()[i] - C.f32()[i]) / (1e-3 + std::fabs(C.f32()[i])));
      const int pairs = onlyShape ? 21 : big ? 7 : 11;
      std::vector<double> ratio, jt, bt;
      for (int r = 0; r < pairs; ++r) {
        jt.push_back(once([&] { jit->call(f, {A, B}); }));
        bt.push_back(once(blas));
        ratio.push_back(jt.back() / bt.back());
      }
      std::printf("\n          OpenBLAS %7.1f (median of %d pairs, CPU time: JIT %7.1f)   ratio JIT/OpenBLAS time = %.3f"
                  "   (max rel diff %.2g)",
                  fl / median(bt) / 1e9, pairs, fl / median(jt) / 1e9, median(ratio), maxRel);
    }
    std::printf("\n");
  }

  if (onlyMatmul || onlyShape) return 0;
  std::printf("2. fused elementwise gelu(x * w + b), f32\n");
  int64_t N = quick ? (1 << 16) : (1 << 24);
  {
    ir::Function& f = *functions.emplace_back(std::make_unique<ir::Function>());
    f.name = "chain";
    auto* x = f.addArg({ir::DType::F32, {N}});
    auto* w = f.addArg({ir::DType::F32, {N}});
    auto* b = f.addArg({ir::DType::F32, {N}});
    f.results = {op(f, ir::OpKind::Gelu, {op(f, ir::OpKind::Add, {op(f, ir::OpKind::Mul, {x, w}), b})})};
    auto X = randomTensor({N}), W = randomTensor({N}), Bv = randomTensor({N});
    jit->call(f, {X, W, Bv});
    auto minflt = [] {
      rusage u;
      getrusage(RUSAGE_SELF, &u);
      return (long)u.ru_minflt;
    };
    const long f0 = minflt();
    double tj = best(10, [&] { jit->call(f, {X, W, Bv}); });
    const double faults = double(minflt() - f0) / 10;
    Eigen::Map<const Eigen::ArrayXf> ex(X.f32(), N), ew(W.f32(), N), eb(Bv.f32(), N);
    Eigen::ArrayXf out(N);
    const float c = std::sqrt(2.0f / (float)M_PI);
    auto eigenChain = [&] {
      Eigen::ArrayXf z = ex * ew + eb;
      out = 0.5f * z * (1.0f + (c * (z + 0.044715f * z * z * z)).tanh());
    };
    eigenChain();
    double te = best(10, eigenChain);
    // The two must agree (a benchmark of a wrong result measures nothing).
    const backend::Tensor got = jit->call(f, {X, W, Bv})[0];
    double maxDiff = 0;
    for (int64_t i = 0; i < N; ++i) maxDiff = std::max(maxDiff, (double)std::fabs(got.f32()[i] - out[i]));
    // memcpy of the same bytes: 3 arrays read, 1 written.
    std::vector<float> src(3 * N), dst(3 * N);
    std::vector<float> src1(N), dst1(N);
    auto copyAll = [&] {
      std::memcpy(dst.data(), src.data(), 3 * N * 4);
      std::memcpy(dst1.data(), src1.data(), N * 4);
    };
    copyAll();
    double tm = best(10, copyAll);
    std::printf("   %lld elements: JIT %.2f ms   Eigen expressions %.2f ms   memcpy of the bytes %.2f ms\n",
                (long long)N, tj * 1e3, te * 1e3, tm * 1e3);
    std::printf("   ratio JIT/Eigen time = %.2f   ratio JIT/memcpy time = %.2f\n", tj / te, tj / tm);
    {  // Paired: alternating calls, the calling thread's CPU time (as part 1).
      std::vector<double> ratio;
      for (int r = 0; r < 11; ++r) {
        const double a = once([&] { jit->call(f, {X, W, Bv}); });
        ratio.push_back(a / once(copyAll));
      }
      std::printf("   median of 11 alternating pairs, CPU time: ratio JIT/memcpy time = %.2f\n", median(ratio));
    }
    std::printf("   page faults per JIT call once warm: %.1f (the result is %lld bytes); max |JIT - Eigen| = %.3g\n",
                faults, (long long)N * 4, maxDiff);
  }

  if (onlyElementwise) return 0;
  std::printf("3. JIT compile time (front end + partition + LLVM O3 of every function)\n");
  std::printf("   examples/mlp.gsl -np 4           : %8.1f ms\n", compileMs(GSL_SOURCE_DIR "/examples/mlp.gsl", 4, {}));
  std::printf("   examples/transformer.gsl -np 4   : %8.1f ms\n",
              compileMs(GSL_SOURCE_DIR "/examples/transformer.gsl", 4, {}));
  return 0;
}
