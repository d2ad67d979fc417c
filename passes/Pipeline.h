// The pass pipeline: the one ordered list of passes run on a checked module
// before it is executed or emitted. See Pipeline.cpp for the list.
#pragma once
#include "ir/Module.h"

namespace gsl::passes {

void runPipeline(ir::Module& m);

}  // namespace gsl::passes
