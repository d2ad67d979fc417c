// The GShard MoE layer (stdlib/moe.gsl) against a dense FFN of equal FLOPs,
// and its all_to_all traffic under weak scaling.
//
// 1. Forward + backward time per token of the MoE layer (E experts, top-2,
//    capacity factor 2, expert hidden HE) and of a dense ReLU FFN with
//    hidden 2 * HE (the same multiply-adds per token: each token visits two
//    experts), both through grad(...) on the JIT, at -np 1 and, expert
//    parallel, at -np 4. The reference is the dense FFN in the same run:
//    ratio MoE / dense. Step time = (time of K + 1 steps - time of 1 step)
//    / K, after a warm-up run, so compilation is not counted. The MoE layer
//    also pays for gating and for the dispatch and combine einsums
//    (G*S*E*C*M multiply-adds each, about S / HE times the expert FFN's),
//    which the paper keeps small with groups of S << H tokens.
// 2. all_to_all bytes one rank sends per training step (forward +
//    backward) as NP = 2..64 grows with E = 2 NP experts and 4 groups of
//    64 tokens per rank (weak scaling), from the cost model of the
//    partitioned program. Ideal: constant per rank; the ring volume
//    (n-1)/n of the local tensor approaches it from below.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>

#include "frontend/Frontend.h"
#include "passes/CostModel.h"
#include "passes/Pipeline.h"
#include "runtime/Host.h"

namespace {

const char* kProgram = R"(
import "moe.gsl"
const GS = 64             # tokens per group
const G = 4 * NP          # 4 groups (256 tokens) per rank
const M = 64
const EPR = 2
const E = EPR * NP
const HE = 128
const H = 2 * HE
const C = ceil(2.0 * GS / E)
const STEPS = 1
const MOE = 1
mesh m = [expert: NP]
param wg: f32[M, E] = normal(0.1)
param wi: f32[E, M, HE] @shard(m, [expert, _, _]) = glorot
param wo: f32[E, HE, M] @shard(m, [expert, _, _]) = glorot
param scale: f32[M] = ones
param w1: f32[M, H] = glorot
param w2: f32[H, M] = glorot

fn moe_loss(x: f32[G, GS, M] @shard(m, [expert, _, _])) -> f32 {
  let (y, aux, dropped, usage) = moe_layer(x * scale, wg, wi, wo, 1, MOE_RANDOM, 0.2, 0.01, true, C=C)
  return mean(y * y) + aux
}

fn dense_loss(x: f32[G, GS, M] @shard(m, [expert, _, _])) -> f32 {
  let t = reshape(x * scale, [G * GS, M])
  let y = relu(t @ w1) @ w2
  return mean(y * y)
}

fn main() {
  let x = random_uniform([G, GS, M], 3) - 0.5
  let acc = 0.0
  for i in 0..STEPS {
    if MOE == 1 {
      let (a, b, c, d) = grad(moe_loss, x)
      acc = acc + sum(a) + sum(b) + sum(c) + sum(d)
    } else {
      let (a, b, c) = grad(dense_loss, x)
      acc = acc + sum(a) + sum(b) + sum(c)
    }
  }
  print(acc)
}
)";

std::unique_ptr<gsl::frontend::CheckedProgram> compile(int64_t np, int64_t steps, int64_t moe, gsl::SourceManager& sm,
                                                        gsl::Diagnostics& diags) {
  gsl::frontend::Options o;
  o.np = np;
  o.defines = {{"STEPS", steps}, {"MOE", moe}};
  o.importPath = gsl::frontend::defaultImportPath();
  auto prog = gsl::frontend::compileSource(GSL_SOURCE_DIR "/bench/moe_bench.gsl", kProgram, o, sm, diags);
  if (!prog) {
    diags.print(std::cerr);
    std::exit(1);
  }
  gsl::passes::runGlobalPipeline(*prog->module);
  return prog;
}

double seconds(int64_t np, int64_t steps, int64_t moe) {
  gsl::SourceManager sm;
  gsl::Diagnostics diags(sm);
  auto prog = compile(np, steps, moe, sm, diags);
  gsl::runtime::RunOptions ro;
  ro.engine = gsl::runtime::Engine::Jit;
  std::ostringstream out;
  ro.out = &out;
  ro.progress = false;
  auto t0 = std::chrono::steady_clock::now();
  if (!gsl::runtime::runMain(*prog, ro, diags)) {
    diags.print(std::cerr);
    std::exit(1);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The first run compiles (the JIT's cache is process-wide and keyed by the
// per-rank program, which STEPS does not change); the timed ones do not.
double stepSeconds(int64_t np, int64_t k, int64_t moe) {
  seconds(np, 1, moe);
  double one = seconds(np, 1, moe);
  return (seconds(np, k + 1, moe) - one) / (double)k;
}

// all_to_all calls and bytes per rank of the MoE training step at `np`.
gsl::passes::CollectiveCost allToAll(int64_t np) {
  gsl::SourceManager sm;
  gsl::Diagnostics diags(sm);
  auto prog = compile(np, 1, 1, sm, diags);
  gsl::ir::Module& mod = *prog->module;
  for (auto& f : mod.functions) {
    if (!f->train) continue;
    auto copy = f->clone();
    auto local = gsl::passes::buildPerRankProgram(mod, *copy, false);
    auto cost = gsl::passes::estimateCost(mod, *local);
    auto it = cost.collectives.find(gsl::ir::OpKind::AllToAll);
    if (it != cost.collectives.end() && it->second.calls) return it->second;
  }
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  int64_t k = quick ? 2 : 500;
  std::printf("MoE layer (top-2, capacity factor 2, M=64, expert hidden 128, 2 experts/rank, groups of 64 tokens,\n"
              "256 tokens/rank) vs dense ReLU FFN of equal FLOPs (hidden 256); forward + backward (grad), JIT,\n"
              "%lld steps\n", (long long)k);
  for (int64_t np : {1, 4}) {
    double moe = stepSeconds(np, k, 1), dense = stepSeconds(np, k, 0);
    double tokens = 256.0 * (double)np;
    std::printf("  -np %lld (E=%lld): MoE %8.2f us/token   dense %8.2f us/token   ratio MoE/dense = %.2f\n",
                (long long)np, (long long)(2 * np), moe * 1e6 / tokens, dense * 1e6 / tokens, moe / dense);
  }
  std::printf("\nall_to_all per rank per training step (forward + backward), weak scaling E = 2 NP:\n");
  std::printf("  %4s %5s %4s %6s %14s %16s\n", "NP", "E", "C", "calls", "bytes/rank", "ratio vs NP=2");
  uint64_t base = 0;
  for (int64_t np : {2, 4, 8, 16, 32, 64}) {
    if (quick && np > 8) break;
    auto c = allToAll(np);
    if (!base) base = c.bytes;
    int64_t e = 2 * np;
    int64_t cap = (2 * 64 + e - 1) / e;
    std::printf("  %4lld %5lld %4lld %6llu %14llu %16.3f\n", (long long)np, (long long)e, (long long)cap,
                (unsigned long long)c.calls, (unsigned long long)c.bytes, base ? (double)c.bytes / (double)base : 0.0);
  }
  return 0;
}
