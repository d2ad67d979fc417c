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
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <map>
#include <sstream>
#include <string>

#include "backend/jit/JitEngine.h"
#include "frontend/Frontend.h"
#include "passes/Pipeline.h"
#include "runtime/Host.h"

struct Result {
  double secondsPerStep, commShare, cpuSeconds;
};

static double processSeconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static gsl::runtime::Engine engine = gsl::runtime::Engine::Jit;

static std::map<std::string, int64_t> extraDefines;

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
  gsl::runtime::RunOptions ro;
  ro.engine = engine;
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
  return {s / (double)steps, comm / s, processSeconds() - c0};
}

int main(int argc, char** argv) {
  // GSL_PERF_MAP=1: the JIT's code named in /tmp/perf-PID.map for `perf
  // report` (as gsl run --perf-map, docs/trace.md).
  if (const char* e = std::getenv("GSL_PERF_MAP"); e && *e == '1') gsl::backend::jitWritePerfMap(true);
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
