#include "passes/Pipeline.h"

#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/Autocast.h"
#include "passes/CombineAllReduce.h"
#include "passes/ShapeInference.h"
#include "passes/ShardingPropagation.h"
#include "passes/Simplify.h"
#include "passes/SpmdPartitioner.h"
#include "passes/Training.h"
#include "passes/UpdateSharding.h"
#include "support/Diagnostics.h"
#include "support/Trace.h"

namespace gsl::passes {

const char* emitKindName(EmitKind k) {
  switch (k) {
    case EmitKind::Ast: return "ast";
    case EmitKind::Ir: return "ir";
    case EmitKind::Sharded: return "sharded";
    case EmitKind::Spmd: return "spmd";
    case EmitKind::Llvm: return "llvm";
  }
  GSL_ASSERT(false, "emitKindName: not an EmitKind");
  return "";
}

std::optional<EmitKind> parseEmitKind(std::string_view s) {
  for (EmitKind k : kEmitKinds)
    if (s == emitKindName(k)) return k;
  return std::nullopt;
}

namespace {

bool wants(const PrintAfter* p, const char* pass) {
  return p && p->os && (p->passes.count("all") || p->passes.count(pass));
}

void printAfter(const PrintAfter* p, const char* pass, ir::Module& m) {
  if (wants(p, pass)) *p->os << "// ----- IR after " << pass << " -----\n" << ir::printModule(m);
}

void printAfter(const PrintAfter* p, const char* pass, ir::Function& f) {
  if (wants(p, pass)) *p->os << "// ----- IR after " << pass << " (@" << f.name << ") -----\n" << ir::printFunction(f);
}

}  // namespace

// Each pass is timed as a "pass" event (global passes) or a "rank pass"
// event (per-rank passes) of the calling thread's trace recorder, if any
// (support/Trace.h: `gsl compile --time-passes`, `gsl run --trace`); the
// verifier after it counts as "verify".

void runGlobalPipeline(ir::Module& m, const PrintAfter* print) {
  // 1. The front end's output must be well-formed IR.
  {
    trace::Scope t("pass", "verify");
    ir::verifyOrDie(m, "the front end");
  }
  // 2. Shape inference: types are exact and attributes canonical.
  {
    trace::Scope t("pass", "shape-inference");
    std::string e = inferShapes(m);
    GSL_ASSERT(e.empty(), "shape inference failed after the front end: " + e);
  }
  {
    trace::Scope t("pass", "verify");
    ir::verifyOrDie(m, "shape inference");
  }
  printAfter(print, "shape-inference", m);
  // 2b. Mixed precision, only with --autocast (Module::autocast): f32
  //     contractions run in bf16 (passes/Autocast.h), before autodiff so
  //     the backward contractions are bf16 too.
  if (m.autocast) {
    {
      trace::Scope t("pass", "autocast");
      autocast(m, *m.autocast);
    }
    {
      trace::Scope t("pass", "verify");
      ir::verifyOrDie(m, "autocast");
    }
    printAfter(print, "autocast", m);
  }
  // 3. Training: grad(...) and opt.minimize(...) thunks get their reverse
  //    sweep (autodiff) and optimizer update, on the global IR.
  {
    trace::Scope t("pass", "training");
    expandTraining(m);
  }
  {
    trace::Scope t("pass", "verify");
    ir::verifyOrDie(m, "training expansion");
  }
  printAfter(print, "training", m);
}

std::unique_ptr<ir::Function> buildPerRankProgram(const ir::Module& m, ir::Function& f, bool gather,
                                                  const PrintAfter* print) {
  // 0. Weight-update sharding: a training step's update of a param
  //    replicated over the data-parallel axes is split over them (its
  //    gradient reduce_scattered, its new value all_gathered).
  {
    trace::Scope t("rank pass", "update-sharding");
    shardWeightUpdates(m, f);
  }
  printAfter(print, "update-sharding", f);
  // 1. Sharding propagation from the annotations and the inputs' shardings.
  {
    trace::Scope t("rank pass", "propagation");
    propagateShardings(m, f);
  }
  if (gather)
    for (size_t i = 0; i < f.results.size(); ++i) {
      f.resultShardings.resize(f.results.size());
      f.resultShardings[i] = ir::Sharding::replicated("", f.results[i]->type.rank());
    }
  printAfter(print, "propagation", f);
  // 2. SPMD partitioning into the one per-rank program.
  std::unique_ptr<ir::Function> local;
  {
    trace::Scope t("rank pass", "partition");
    local = partitionFunction(m, f);
  }
  printAfter(print, "partition", *local);
  // 2b. One all_reduce for the tagged scalar sums of a group (clip_norm's
  //     squared gradient sums), instead of one each.
  {
    trace::Scope t("rank pass", "combine-all-reduce");
    combineAllReduces(*local);
  }
  printAfter(print, "combine-all-reduce", *local);
  // 3. Simplification: one copy of each computation (a reshard the forward
  //    pass did is not repeated by the backward pass), no dead ops.
  {
    trace::Scope t("rank pass", "simplify");
    simplify(*local);
  }
  printAfter(print, "simplify", *local);
  // 4. The per-rank program must be well-formed.
  trace::Scope t("rank pass", "verify");
  std::string e = ir::verifyFunction(m, *local);
  GSL_ASSERT(e.empty(), "invalid per-rank program for @" + f.name + ": " + e);
  return local;
}

}  // namespace gsl::passes
