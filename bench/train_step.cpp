// Training step time of examples/transformer.gsl (forward + backward +
// Adam), per token, on one rank, and at -np 4 the share of the step spent
// in collectives, on the JIT after a compiling warm-up run. The reference
// is the same run's -np 1 step time.
//
// `bench_train_step width D NH HD H N1 N2`: the example at -np 1 with that
// width (the rest as the example), on the JIT: runs of N1 and N2 steps
// after a compiling run; prints the process CPU seconds per step of the
// difference, so that start-up and checkpoint costs cancel and time other
// processes hold the cores is not counted (bench/train_step_torch.sh
// compares it with PyTorch).
//
// `bench_train_step profile D NH HD H L N1 N2`: where the time of such a
// step goes (bench/step_profile.sh). The f32 GEMM's peak (a 1024^3 matmul
// through the JIT, median thread CPU time of 9 runs) and the step's rate
// against it: 3 x the forward FLOPs (passes/CostModel, as `gsl compile
// --stats json`) over the process CPU time per step of N2 - N1 steps
// (untimed code), in three rounds (medians); then, from a run of N2 steps with
// the op timer on (JitOptions::profileKernels, backend/jit/KernelProfile.h),
// the time per step of each kernel class and of each GEMM shape, of the
// training step's function only (the accuracy's forward passes left out);
// "runtime" is the rest of that function's wall time (loop carries, the
// engine's call, buffer set-up).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "backend/jit/JitEngine.h"
#include "backend/jit/KernelProfile.h"
#include "ir/Function.h"
#include "passes/CostModel.h"
#include "frontend/Frontend.h"
#include "passes/Pipeline.h"
#include "runtime/Host.h"

struct Result {
  double secondsPerStep, commShare, cpuSeconds;
  double forwardFlops = 0;  // the loss function's (passes/CostModel)
  double trainSeconds = 0;  // wall time in calls of the training step's function
  int64_t trainCalls = 0;
  std::vector<double> stepWalls;  // each call's wall time
};

static double processSeconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static gsl::runtime::Engine engine = gsl::runtime::Engine::Jit;

static std::map<std::string, int64_t> extraDefines;
static gsl::backend::JitOptions jitOptions;

// The training step's function: the trace's `function` events of calls
// with a train_step argument (runtime/Trace.h), summed.
static std::set<std::string> trainFunctions;  // their names
static bool tracing = false;  // profile mode: every run traced
static void trainTime(const std::string& tracePath, Result& r);

static Result run(int64_t np, int64_t dp, int64_t steps) {
  gsl::SourceManager sm;
  gsl::Diagnostics diags(sm);
  gsl::frontend::Options o;
  o.np = np;
  o.defines = {{"STEPS", steps}, {"DP", dp}};
  for (auto& [k, v] : extraDefines) o.defines[k] = v;
  o.importPath = gsl::frontend::defaultImportPath();
  auto prog = gsl::frontend::compileFile(GSL_SOURCE_DIR "/examples/transformer.gsl", o, sm, diags);
  if (!prog) {
    diags.print(std::cerr);
    std::exit(1);
  }
  gsl::passes::runGlobalPipeline(*prog->module);
  double forwardFlops = 0;
  for (auto& f : prog->module->functions)
    if (f->name == "loss") forwardFlops = (double)gsl::passes::estimateCost(*prog->module, *f).flops;
  gsl::runtime::RunOptions ro;
  ro.engine = engine;
  ro.jit = jitOptions;
  const std::string trace = "/tmp/gsl_step_profile_" + std::to_string(::getpid()) + ".json";
  if (tracing) ro.tracePath = trace;
  std::ostringstream out;
  ro.out = &out;
  ro.progress = false;
  double comm = 0;
  ro.commSeconds = &comm;
  auto t0 = std::chrono::steady_clock::now();
  const double c0 = processSeconds();
  if (!gsl::runtime::runMain(*prog, ro, diags)) {
    diags.print(std::cerr);
    std::exit(1);
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  Result r{s / (double)steps, comm / s, processSeconds() - c0, forwardFlops};
  if (tracing) {
    trainTime(trace, r);
    std::remove(trace.c_str());
  }
  return r;
}

static void trainTime(const std::string& tracePath, Result& r) {
  std::ifstream in(tracePath);
  const nlohmann::json t = nlohmann::json::parse(in);
  for (const nlohmann::json& e : t.at("traceEvents"))
    if (e.value("cat", "") == "function" && e.contains("args") && e["args"].contains("train_step")) {
      r.trainSeconds += e.at("dur").get<double>() * 1e-6;
      r.stepWalls.push_back(e.at("dur").get<double>() * 1e-6);
      trainFunctions.insert(e.at("name").get<std::string>());
      r.trainCalls++;
    }
}

static double threadSeconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

// GFLOP/s of the JIT's f32 matmul [n, n] @ [n, n] on this thread: the
// median thread CPU time of 9 calls after a compiling one.
static double gemmPeak(int64_t n, double& bestWall) {
  using namespace gsl;
  ir::Function f;
  f.name = "peak";
  ir::Value* a = f.addArg({ir::DType::F32, {n, n}});
  ir::Value* b = f.addArg({ir::DType::F32, {n, n}});
  ir::AttrMap at;
  ir::TensorType out;
  ir::inferType(ir::OpKind::MatMul, {a->type, b->type}, at, out);
  f.results = {f.append(ir::OpKind::MatMul, {a, b}, at, out)->result};
  backend::Tensor A = backend::Tensor::uninitialized(a->type), B = backend::Tensor::uninitialized(b->type);
  for (int64_t i = 0; i < n * n; ++i) A.f32()[i] = B.f32()[i] = (float)((i * 7919) % 1000) * 1e-3f - 0.5f;
  backend::KernelContext ctx;
  auto jit = backend::makeJitEngine(ctx, backend::JitOptions{});
  jit->call(f, {A, B});
  std::vector<double> ts;
  double best = 1e30;
  for (int r = 0; r < 9; ++r) {
    const double t0 = threadSeconds();
    const auto w0 = std::chrono::steady_clock::now();
    jit->call(f, {A, B});
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count());
    ts.push_back(threadSeconds() - t0);
  }
  std::sort(ts.begin(), ts.end());
  bestWall = 2.0 * (double)(n * n * n) / best * 1e-9;
  return 2.0 * (double)(n * n * n) / ts[ts.size() / 2] * 1e-9;
}

// Rows of the op timer's table that belong to the training step, summed
// by `key` (kind, or kind and GEMM shape): seconds, calls, FLOPs.
struct Sum {
  double seconds = 0, calls = 0, flops = 0;
};

enum class By { Kind, GemmShape, OtherOp };

static std::map<std::string, Sum> profileBy(By by) {
  std::map<std::string, Sum> out;
  for (const gsl::backend::KernelProfileRow& r : gsl::backend::jitKernelProfile()) {
    if (!trainFunctions.count(r.function)) continue;
    const bool gemm = r.kind == "gemm";
    const std::string key = by == By::Kind        ? r.kind
                            : by == By::GemmShape ? (gemm ? r.shape : "")
                                                  : (gemm ? "" : r.kind + " " + r.op + " " + r.shape);
    if (key.empty()) continue;
    Sum& s = out[key];
    s.seconds += r.seconds;
    s.calls += (double)r.calls;
    s.flops += r.flops * (double)r.calls;
  }
  return out;
}

// `bench_train_step profile D NH HD H L N1 N2` (see the top of the file).
static int profile(char** argv) {
  const char* names[] = {"D", "NH", "HD", "H", "L"};
  for (int i = 0; i < 5; ++i) extraDefines[names[i]] = std::atoll(argv[2 + i]);
  const int64_t n1 = std::atoll(argv[7]), n2 = std::atoll(argv[8]);
  // Three rounds, each the peak then runs of N1 and N2 steps: the medians
  // of the peaks, of the step times and of the rounds' ratios (a round's
  // step and peak are measured close together on a shared machine).
  tracing = true;
  run(1, 1, 1);
  std::vector<double> peaks, stepTimes, ratios;
  double stepFlops = 0, bestPeak = 0, bestStep = 1e30;
  for (int round = 0; round < 3; ++round) {
    double w = 0;
    peaks.push_back(gemmPeak(1024, w));
    bestPeak = std::max(bestPeak, w);
    const Result u1 = run(1, 1, n1), u2 = run(1, 1, n2);
    for (const Result* u : {&u1, &u2})
      for (double t : u->stepWalls) bestStep = std::min(bestStep, t);
    stepTimes.push_back((u2.cpuSeconds - u1.cpuSeconds) / (double)(n2 - n1));
    stepFlops = 3 * u1.forwardFlops;
    ratios.push_back(stepFlops / stepTimes.back() * 1e-9 / peaks.back());
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double peak = median(peaks), stepCpu = median(stepTimes), ratio = median(ratios);
  // The op timer: one run of N2 steps (the steps' own rows divided by
  // the step count; a difference of two runs is at the mercy of the load).
  jitOptions.profileKernels = true;
  run(1, 1, 1);
  gsl::backend::jitKernelProfileReset();
  const Result p2 = run(1, 1, n2);
  const std::map<std::string, Sum> k2 = profileBy(By::Kind), g2 = profileBy(By::GemmShape),
                                   o2 = profileBy(By::OtherOp);
  const double steps = (double)p2.trainCalls;
  const double wall = p2.trainSeconds / steps;
  auto perStep = [&](const std::map<std::string, Sum>& b) {
    std::vector<std::pair<std::string, Sum>> rows;
    for (const auto& [k, s] : b) {
      Sum d = s;
      d.seconds /= steps, d.calls /= steps, d.flops /= steps;
      rows.push_back({k, d});
    }
    std::sort(rows.begin(), rows.end(), [](auto& x, auto& y) { return x.second.seconds > y.second.seconds; });
    return rows;
  };
  std::printf("training step of examples/transformer.gsl -np 1 -D DP=1, D=%s NH=%s HD=%s H=%s L=%s (B=16, S=16, V=16), f32, JIT\n",
              argv[2], argv[3], argv[4], argv[5], argv[6]);
  std::printf("f32 GEMM peak (1024^3 matmul, JIT, one thread, median of 9 calls; median of 3 rounds): %.1f GFLOP/s "
              "(rounds %.1f %.1f %.1f)\n",
              peak, peaks[0], peaks[1], peaks[2]);
  std::printf("step: %.2f GFLOP (3 x forward), %.2f ms CPU (%lld - %lld steps; median of 3 rounds) = %.1f GFLOP/s\n",
              stepFlops * 1e-9, stepCpu * 1e3, (long long)n2, (long long)n1, stepFlops / stepCpu * 1e-9);
  std::printf("step / peak: %.1f%% (median of the rounds' ratios: %.1f%% %.1f%% %.1f%%)\n", 100 * ratio,
              100 * ratios[0], 100 * ratios[1], 100 * ratios[2]);
  std::printf("best wall times (least disturbed by the load): peak %.1f GFLOP/s (best of 27 calls), step %.2f ms "
              "(fastest of the rounds' %lld step calls) = %.1f GFLOP/s = %.1f%% of the peak\n",
              bestPeak, bestStep * 1e3, (long long)(3 * (n1 + n2)), stepFlops / bestStep * 1e-9,
              100 * stepFlops / bestStep * 1e-9 / bestPeak);
  std::printf("\nop timer on: %.2f ms wall per step in the step's function (a run of %lld steps)\n", wall * 1e3,
              (long long)n2);
  std::printf("  %-20s %9s %7s %9s\n", "kind", "ms/step", "share", "GFLOP/s");
  double timed = 0;
  for (const auto& [k, s] : perStep(k2)) {
    timed += s.seconds;
    std::printf("  %-20s %9.3f %6.1f%%", k.c_str(), s.seconds * 1e3, 100 * s.seconds / wall);
    if (s.flops > 0) std::printf(" %9.1f", s.flops / s.seconds * 1e-9);
    std::printf("\n");
  }
  std::printf("  %-20s %9.3f %6.1f%%\n", "runtime (rest)", (wall - timed) * 1e3, 100 * (wall - timed) / wall);
  std::printf("\nGEMMs by shape (B x M x N x K; At/Bt: operand read transposed; copyX: copied first)\n");
  std::printf("  %-34s %7s %9s %6s %9s\n", "shape", "calls", "ms/step", "share", "GFLOP/s");
  for (const auto& [k, s] : perStep(g2))
    std::printf("  %-34s %7.0f %9.3f %5.1f%% %9.1f\n", k.c_str(), s.calls, s.seconds * 1e3, 100 * s.seconds / wall,
                s.flops / s.seconds * 1e-9);
  std::printf("\nthe other ops, the 12 slowest (kind, op:line, result type)\n");
  std::printf("  %-50s %7s %9s %6s\n", "op", "calls", "ms/step", "share");
  const auto others = perStep(o2);
  for (size_t i = 0; i < others.size() && i < 12; ++i)
    std::printf("  %-50s %7.0f %9.3f %5.1f%%\n", others[i].first.c_str(), others[i].second.calls,
                others[i].second.seconds * 1e3, 100 * others[i].second.seconds / wall);
  return 0;
}

int main(int argc, char** argv) {
  // GSL_PERF_MAP=1: the JIT's code named in /tmp/perf-PID.map for `perf
  // report` (as gsl run --perf-map, docs/trace.md).
  if (const char* e = std::getenv("GSL_PERF_MAP"); e && *e == '1') gsl::backend::jitWritePerfMap(true);
  if (argc == 9 && std::string(argv[1]) == "profile") return profile(argv);
  if (argc == 8 && std::string(argv[1]) == "width") {
    const char* names[] = {"D", "NH", "HD", "H"};
    for (int i = 0; i < 4; ++i) extraDefines[names[i]] = std::atoll(argv[2 + i]);
    const int64_t n1 = std::atoll(argv[6]), n2 = std::atoll(argv[7]);
    run(1, 1, 1);
    const double t1 = run(1, 1, n1).cpuSeconds, t2 = run(1, 1, n2).cpuSeconds;
    std::printf("gsl %.4f ms/step (process CPU time)\n", (t2 - t1) / (double)(n2 - n1) * 1e3);
    return 0;
  }
  bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  int64_t steps = quick ? 3 : 40;
  // --quick (ctest: it runs, nothing timed) skips the JIT's compilation.
  if (quick) engine = gsl::runtime::Engine::Interp;
  const int64_t tokens = 16 * 16;  // B * S of the example
  // A first run of each compiles its programs into the process-wide JIT
  // cache (keyed by the per-rank program, which STEPS does not change), so
  // the timed runs measure steps, not compilation.
  run(1, 1, 1);
  Result one = run(1, 1, steps);
  run(4, 2, 1);
  Result four = run(4, 2, steps);
  std::printf("Transformer example (B=16, S=16, D=32, 2 blocks), %lld steps, forward+backward+Adam\n",
              (long long)steps);
  std::printf("  -np 1 : %7.2f ms/step  %7.2f us/token\n", one.secondsPerStep * 1e3, one.secondsPerStep * 1e6 / tokens);
  std::printf("  -np 4 : %7.2f ms/step  %7.2f us/token  (data 2 x model 2 threads; %.0f%% of the time in collectives)\n",
              four.secondsPerStep * 1e3, four.secondsPerStep * 1e6 / tokens, four.commShare * 100);
  std::printf("  ratio np4/np1 step time = %.2f\n", four.secondsPerStep / one.secondsPerStep);
  return 0;
}
