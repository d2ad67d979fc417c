#include "passes/Pipeline.h"

#include "ir/Verifier.h"
#include "passes/ShapeInference.h"
#include "passes/ShardingPropagation.h"
#include "passes/Simplify.h"
#include "passes/SpmdPartitioner.h"
#include "passes/Training.h"
#include "support/Diagnostics.h"

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

void runGlobalPipeline(ir::Module& m) {
  // 1. The front end's output must be well-formed IR.
  ir::verifyOrDie(m, "the front end");
  // 2. Shape inference: types are exact and attributes canonical.
  std::string e = inferShapes(m);
  GSL_ASSERT(e.empty(), "shape inference failed after the front end: " + e);
  ir::verifyOrDie(m, "shape inference");
  // 3. Training: grad(...) and opt.minimize(...) thunks get their reverse
  //    sweep (autodiff) and optimizer update, on the global IR.
  expandTraining(m);
  ir::verifyOrDie(m, "training expansion");
}

std::unique_ptr<ir::Function> buildPerRankProgram(const ir::Module& m, ir::Function& f, bool gather) {
  // 1. Sharding propagation from the annotations and the inputs' shardings.
  propagateShardings(m, f);
  if (gather)
    for (size_t i = 0; i < f.results.size(); ++i) {
      f.resultShardings.resize(f.results.size());
      f.resultShardings[i] = ir::Sharding::replicated("", f.results[i]->type.rank());
    }
  // 2. SPMD partitioning into the one per-rank program.
  auto local = partitionFunction(m, f);
  // 3. Simplification: one copy of each computation (a reshard the forward
  //    pass did is not repeated by the backward pass), no dead ops.
  simplify(*local);
  // 4. The per-rank program must be well-formed.
  std::string e = ir::verifyFunction(m, *local);
  GSL_ASSERT(e.empty(), "invalid per-rank program for @" + f.name + ": " + e);
  return local;
}

}  // namespace gsl::passes
