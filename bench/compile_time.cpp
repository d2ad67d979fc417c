// Compile-time scaling of the SPMD pipeline: GSL builds ONE per-rank
// program, so compiling for -np 2048 should cost about the same as for
// -np 8. Prints both times and their ratio (reference: the -np 8 run, in
// the same process).
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>

#include "frontend/Frontend.h"
#include "passes/Pipeline.h"

static const char* kModel = R"(
# A 12-layer MLP stack, data parallel over `data`, tensor parallel over `model`.
const B = 2048
const D = 1024
const H = 4096
const MP = 8
mesh m = [data: NP / MP, model: MP]
param w1: f32[12, D, H] @shard(m, [_, _, model]) = normal(0.02)
param w2: f32[12, H, D] @shard(m, [_, model, _]) = normal(0.02)

fn layer(x: f32[B, D], a: f32[D, H], b: f32[H, D]) -> f32[B, D] {
  return x + gelu(x @ a) @ b
}

fn stack(x: f32[B, D] @shard(m, [data, _])) -> f32[B, D] @shard(m, [data, _]) {
  let a = reshape(w1, [12 * D, H])
  let b = reshape(w2, [12 * H, D])
  let h1 = layer(x, slice(a, 0, 0, D), slice(b, 0, 0, H))
  let h2 = layer(h1, slice(a, 0, D, 2 * D), slice(b, 0, H, 2 * H))
  let h3 = layer(h2, slice(a, 0, 2 * D, 3 * D), slice(b, 0, 2 * H, 3 * H))
  let h4 = layer(h3, slice(a, 0, 3 * D, 4 * D), slice(b, 0, 3 * H, 4 * H))
  let h5 = layer(h4, slice(a, 0, 4 * D, 5 * D), slice(b, 0, 4 * H, 5 * H))
  let h6 = layer(h5, slice(a, 0, 5 * D, 6 * D), slice(b, 0, 5 * H, 6 * H))
  return layer(h6, slice(a, 0, 6 * D, 7 * D), slice(b, 0, 6 * H, 7 * H))
}
)";

// Seconds to compile the model for `np` ranks (front end, global pipeline,
// per-rank program of every function), best of `reps`.
static double compileSeconds(int64_t np, int reps, size_t* ops) {
  double best = 1e9;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    gsl::SourceManager sm;
    gsl::Diagnostics diags(sm);
    gsl::frontend::Options o;
    o.np = np;
    auto prog = gsl::frontend::compileSource("bench.gsl", kModel, o, sm, diags);
    if (!prog) {
      diags.print(std::cerr);
      std::exit(1);
    }
    gsl::passes::runGlobalPipeline(*prog->module);
    *ops = 0;
    for (auto& f : prog->module->functions) {
      auto copy = f->clone();
      auto local = gsl::passes::buildPerRankProgram(*prog->module, *copy, false);
      *ops += local->ops.size();
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, s);
  }
  return best;
}

int main(int argc, char** argv) {
  int reps = argc > 1 && std::string(argv[1]) == "--quick" ? 1 : 5;
  size_t ops8 = 0, ops2048 = 0;
  double t8 = compileSeconds(8, reps, &ops8);
  double t2048 = compileSeconds(2048, reps, &ops2048);
  std::printf("compile time, 12-layer MLP stack (best of %d)\n", reps);
  std::printf("  -np 8    : %8.2f ms  (%zu per-rank ops)\n", t8 * 1e3, ops8);
  std::printf("  -np 2048 : %8.2f ms  (%zu per-rank ops)\n", t2048 * 1e3, ops2048);
  std::printf("  ratio np2048 / np8 = %.2f\n", t2048 / t8);
  return 0;
}
