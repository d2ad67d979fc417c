#include "passes/Pipeline.h"
#include "passes/Pipelining.h"

#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/Autocast.h"
#include "passes/CombineAllReduce.h"
#include "passes/ResolveGroups.h"
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

// The global stage's passes, in order. `verifyAs` names the pass in the
// verifier's internal error; `enabled` (null: always) skips a pass the
// module did not ask for.
struct GlobalPass {
  const char* name;
  const char* verifyAs;
  void (*run)(ir::Module&);
  bool (*enabled)(const ir::Module&) = nullptr;
};

const GlobalPass kGlobalPasses[] = {
    // 1. Shape inference: types are exact and attributes canonical.
    {"shape-inference", "shape inference",
     [](ir::Module& m) {
       std::string e = inferShapes(m);
       GSL_ASSERT(e.empty(), "shape inference failed after the front end: " + e);
     }},
    // 2. Pipelining, only for a loop over a param group split over a stage
    //    axis (the front end's microbatch loop): the pipeline's schedule
    //    (passes/Pipelining.h), before autodiff so the backward pass is a
    //    pipeline too.
    {"pipeline", "pipelining", pipelineLoops, hasPipelines},
    // 3. Mixed precision, only with --autocast (Module::autocast): f32
    //    contractions run in bf16 (passes/Autocast.h), before autodiff so
    //    the backward contractions are bf16 too.
    {"autocast", "autocast", [](ir::Module& m) { autocast(m, *m.autocast); },
     [](const ir::Module& m) { return m.autocast.has_value(); }},
    // 4. Training: grad(...) and opt.minimize(...) thunks get their reverse
    //    sweep (autodiff) and optimizer update, on the global IR.
    {"training", "training expansion", expandTraining},
};

// One function on its way to the per-rank program: `global` until the
// partitioner made `local`. `provenance`: the gradients weight-update
// sharding split, which propagation treats as propagated, not annotated.
struct RankProgram {
  const ir::Module& m;
  ir::Function& global;
  bool gather;
  std::unique_ptr<ir::Function> local;
  ShardingProvenance provenance;
  ir::Function& current() { return local ? *local : global; }
};

struct RankPass {
  const char* name;
  void (*run)(RankProgram&);
};

const RankPass kRankPasses[] = {
    // 0. Weight-update sharding: a training step's update of a param
    //    replicated over the data-parallel axes is split over them (its
    //    gradient reduce_scattered, its new value all_gathered).
    {"update-sharding", [](RankProgram& p) { shardWeightUpdates(p.m, p.global, &p.provenance); }},
    // 1. Sharding propagation from the annotations and the inputs'
    //    shardings; with `gather`, every result is made replicated.
    {"propagation",
     [](RankProgram& p) {
       propagateShardings(p.m, p.global, &p.provenance);
       // A pipeline's rows of state, one per stage, on their stages.
       shardPipelineStages(p.m, p.global);
       if (!p.gather) return;
       ir::Function& f = p.global;
       for (size_t i = 0; i < f.results.size(); ++i) {
         f.resultShardings.resize(f.results.size());
         f.resultShardings[i] = ir::Sharding::replicated("", f.results[i]->type.rank());
       }
     }},
    // 2. SPMD partitioning into the one per-rank program.
    {"partition", [](RankProgram& p) { p.local = partitionFunction(p.m, p.global); }},
    // 3. Simplification: one copy of each computation (a reshard the
    //    forward pass did is not repeated by the backward pass), no dead ops.
    {"simplify", [](RankProgram& p) { simplify(*p.local); }},
    // 4. All-reduce combining, on the simplified program (no dead or
    //    repeated all_reduce is packed): one all_reduce for the tagged
    //    scalar sums of a group (clip_norm's squared gradient sums), and one
    //    for each run of small all_reduces that can go together (a layer's
    //    weight gradients), instead of one each.
    {"combine-all-reduce", [](RankProgram& p) { combineAllReduces(*p.local); }},
    // 5. Group resolution: each collective's groups over its mesh axes,
    //    for every rank, worked out once here instead of in every call.
    {"resolve-groups", [](RankProgram& p) { resolveGroups(p.m, *p.local); }},
};

}  // namespace

std::vector<std::string> passNames() {
  std::vector<std::string> names;
  for (const GlobalPass& p : kGlobalPasses) names.push_back(p.name);
  for (const RankPass& p : kRankPasses) names.push_back(p.name);
  return names;
}

// Each pass is timed as a "pass" event (global passes) or a "rank pass"
// event (per-rank passes) of the calling thread's trace recorder, if any
// (support/Trace.h: `gsl compile --time-passes`, `gsl run --trace`); the
// verifier after it counts as "verify".

void runGlobalPipeline(ir::Module& m, const PrintAfter* print) {
  // The front end's output must be well-formed IR.
  {
    trace::Scope t("pass", "verify");
    ir::verifyOrDie(m, "the front end");
  }
  for (const GlobalPass& pass : kGlobalPasses) {
    if (pass.enabled && !pass.enabled(m)) continue;
    {
      trace::Scope t("pass", pass.name);
      pass.run(m);
    }
    {
      trace::Scope t("pass", "verify");
      ir::verifyOrDie(m, pass.verifyAs);
    }
    if (wants(print, pass.name)) *print->os << "// ----- IR after " << pass.name << " -----\n" << ir::printModule(m);
  }
}

std::unique_ptr<ir::Function> buildPerRankProgram(const ir::Module& m, ir::Function& f, bool gather,
                                                  const PrintAfter* print) {
  RankProgram p{m, f, gather, nullptr, {}};
  for (const RankPass& pass : kRankPasses) {
    {
      trace::Scope t("rank pass", pass.name);
      pass.run(p);
    }
    if (wants(print, pass.name))
      *print->os << "// ----- IR after " << pass.name << " (@" << p.current().name << ") -----\n"
                 << ir::printFunction(p.current());
  }
  // The per-rank program must be well-formed.
  trace::Scope t("rank pass", "verify");
  GSL_ASSERT(p.local, "internal error: no pass made the per-rank program of @" + f.name);
  std::string e = ir::verifyFunction(m, *p.local);
  GSL_ASSERT(e.empty(), "invalid per-rank program for @" + f.name + ": " + e);
  return std::move(p.local);
}

}  // namespace gsl::passes
