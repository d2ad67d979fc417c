// Compile time, two measurements:
//
// 1. Scaling of the SPMD pipeline: GSL builds ONE per-rank program, so
//    compiling for -np 2048 should cost about the same as for -np 8.
//    Prints both times and their ratio (reference: the -np 8 run, in the
//    same process).
// 2. Scaling with depth: a Transformer LM of examples/transformer.gsl's
//    width at 1, 2, 4, 8 and 16 layers (the programs are generated here),
//    each run cold by `gsl run --engine jit` for one training step. Prints
//    the time to the first step, the per-rank ops of the program and the
//    seconds per 1,000 ops, and the ratio 8 layers / 1 layer of the time
//    to the first step (reference: the 1-layer run, in the same bench run).
#include <fcntl.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <unistd.h>
#include <vector>

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

// A Transformer LM of examples/transformer.gsl's width (B 16, S 16, V 16,
// D 32, 4 heads of 8, FFN 64) with `layers` pre-norm blocks, whose main
// runs one training step.
static std::string transformer(int layers) {
  std::string p = R"(import "nn.gsl"
const B = 16
const S = 16
const V = 16
const D = 32
const NH = 4
const HD = 8
const H = 64
mesh m = [data: 1, model: NP]
param emb: f32[V, D] = normal(0.1)
param pos: f32[S, D] = normal(0.1)
param lnf_g: f32[D] = ones
param lnf_b: f32[D] = zeros
param unemb: f32[D, V] = glorot
)";
  for (int l = 0; l < layers; ++l) {
    const std::string i = std::to_string(l);
    p += "param la" + i + "_g: f32[D] = ones\n";
    p += "param la" + i + "_b: f32[D] = zeros\n";
    for (const char* w : {"wq", "wk", "wv"})
      p += std::string("param ") + w + i + ": f32[D, NH, HD] @shard(m, [_, model, _]) = glorot\n";
    p += "param wo" + i + ": f32[NH, HD, D] @shard(m, [model, _, _]) = glorot\n";
    p += "param lf" + i + "_g: f32[D] = ones\n";
    p += "param lf" + i + "_b: f32[D] = zeros\n";
    p += "param fw1" + i + ": f32[D, H] @shard(m, [_, model]) = glorot\n";
    p += "param fb1" + i + ": f32[H] @shard(m, [model]) = zeros\n";
    p += "param fw2" + i + ": f32[H, D] @shard(m, [model, _]) = glorot\n";
    p += "param fb2" + i + ": f32[D] = zeros\n";
  }
  p += R"(
optimizer opt = adam(lr=0.003)
dataset data = copy_task(batch=B, seq=S, vocab=V)

fn norm(h: f32[B, S, D], g: f32[D], b: f32[D]) -> f32[B, S, D] {
  return reshape(layer_norm_affine(reshape(h, [B * S, D]), g, b), [B, S, D])
}

fn mlp(h: f32[B, S, D], w1: f32[D, H], b1: f32[H], w2: f32[H, D], b2: f32[D]) -> f32[B, S, D] {
  return reshape(ffn(reshape(h, [B * S, D]), w1, b1, w2, b2), [B, S, D])
}

fn logits(tokens: i32[B, S]) -> f32[B * S, V] {
  let h0 = take(emb, tokens) + pos
)";
  for (int l = 0; l < layers; ++l) {
    const std::string i = std::to_string(l), a = "h" + std::to_string(2 * l), b = "h" + std::to_string(2 * l + 1),
                      c = "h" + std::to_string(2 * l + 2);
    p += "  let " + b + " = " + a + " + causal_attention(norm(" + a + ", la" + i + "_g, la" + i + "_b), wq" + i +
         ", wk" + i + ", wv" + i + ", wo" + i + ")\n";
    p += "  let " + c + " = " + b + " + mlp(norm(" + b + ", lf" + i + "_g, lf" + i + "_b), fw1" + i + ", fb1" + i +
         ", fw2" + i + ", fb2" + i + ")\n";
  }
  p += "  return reshape(norm(h" + std::to_string(2 * layers) + R"(, lnf_g, lnf_b), [B * S, D]) @ unemb
}

fn loss(tokens: i32[B, S], targets: i32[B, S]) -> f32 {
  return cross_entropy(logits(tokens), reshape(targets, [B * S]))
}

fn main() {
  let (x, y) = batch(data, 0)
  print("loss", opt.minimize(loss, x, y))
}
)";
  return p;
}

// Per-rank ops of every function of `src` at -np 1.
static size_t perRankOps(const std::string& src) {
  gsl::SourceManager sm;
  gsl::Diagnostics diags(sm);
  gsl::frontend::Options o;
  o.np = 1;
  o.importPath.push_back(GSL_SOURCE_DIR "/stdlib");
  auto prog = gsl::frontend::compileSource("bench.gsl", src, o, sm, diags);
  if (!prog) {
    diags.print(std::cerr);
    std::exit(1);
  }
  gsl::passes::runGlobalPipeline(*prog->module);
  size_t ops = 0;
  for (auto& f : prog->module->functions) {
    auto copy = f->clone();
    ops += gsl::passes::buildPerRankProgram(*prog->module, *copy, false)->ops.size();
  }
  return ops;
}

// Wall seconds of `gsl run --engine jit FILE` (a new process: a cold JIT).
static double runSeconds(const std::string& file) {
  auto t0 = std::chrono::steady_clock::now();
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", 1);
    if (devnull >= 0) dup2(devnull, 1);
    // GSL_BENCH_GSL: another gsl binary to measure (an older build, say).
    const char* bin = std::getenv("GSL_BENCH_GSL") ? std::getenv("GSL_BENCH_GSL") : GSL_BINARY;
    execl(bin, bin, "run", "--engine", "jit", "--no-progress", file.c_str(), (char*)nullptr);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "gsl run %s failed\n", file.c_str());
    std::exit(1);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

static void depthScaling(bool quick) {
  std::vector<int> depths = quick ? std::vector<int>{1, 2} : std::vector<int>{1, 2, 4, 8, 16};
  std::printf("time to the first step, Transformer LM of examples/transformer.gsl's width, -np 1, cold JIT\n");
  std::printf("  layers  per-rank ops  seconds  seconds per 1,000 ops\n");
  double t1 = 0, t8 = 0;
  for (int l : depths) {
    char path[] = "/tmp/gsl_bench_compile_XXXXXX.gsl";
    int fd = mkstemps(path, 4);
    if (fd < 0) std::exit(1);
    close(fd);
    const std::string src = transformer(l);
    std::ofstream(path) << src;
    const size_t ops = perRankOps(src);
    const double s = runSeconds(path);
    std::remove(path);
    std::printf("  %6d  %12zu  %7.2f  %21.3f\n", l, ops, s, s / (double)ops * 1000.0);
    if (l == 1) t1 = s;
    if (l == 8) t8 = s;
  }
  if (t8 > 0) std::printf("  ratio 8 layers / 1 layer = %.2f\n", t8 / t1);
}

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  int reps = quick ? 1 : 5;
  size_t ops8 = 0, ops2048 = 0;
  double t8 = compileSeconds(8, reps, &ops8);
  double t2048 = compileSeconds(2048, reps, &ops2048);
  std::printf("compile time, 12-layer MLP stack (best of %d)\n", reps);
  std::printf("  -np 8    : %8.2f ms  (%zu per-rank ops)\n", t8 * 1e3, ops8);
  std::printf("  -np 2048 : %8.2f ms  (%zu per-rank ops)\n", t2048 * 1e3, ops2048);
  std::printf("  ratio np2048 / np8 = %.2f\n", t2048 / t8);
  if (!(argc > 1 && std::string(argv[1]) == "--np-only")) depthScaling(quick);
  return 0;
}
