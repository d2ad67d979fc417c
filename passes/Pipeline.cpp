#include "passes/Pipeline.h"

#include "ir/Verifier.h"
#include "passes/ShapeInference.h"
#include "support/Diagnostics.h"

namespace gsl::passes {

void runPipeline(ir::Module& m) {
  // 1. The front end's output must be well-formed IR.
  ir::verifyOrDie(m, "the front end");
  // 2. Shape inference: types are exact and attributes canonical.
  std::string e = inferShapes(m);
  GSL_ASSERT(e.empty(), "shape inference failed after the front end: " + e);
  ir::verifyOrDie(m, "shape inference");
}

}  // namespace gsl::passes
