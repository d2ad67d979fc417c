// What a name given to a command means in a build, for the commands that
// look one up (:sharding, :show, :plans, :spmd, :cost, :try): a
// function's values by name (also in its loop bodies), the hint for a
// param group's name, and the words the REPL uses for a loop and for the
// training step.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "ir/Module.h"
#include "repl/Session.h"

namespace gsl::repl {

// A copy of `f` partitioned: its per-rank program.
std::unique_ptr<ir::Function> perRank(const ir::Module& m, const ir::Function& f);

// Values of `f` named `name` (args first, then lets in order).
std::vector<ir::Value*> valuesNamed(ir::Function& f, const std::string& name);

// A value of a loop body named as the user wrote it (a let inside the
// `for`, a carried name reassigned there), with the loop it is in.
struct LoopValue {
  ir::Value* value;
  const ir::Op* loop;                    // the innermost loop op holding it
  std::vector<const ir::Op*> enclosing;  // the loops around that one, outermost first
};

// Values named `name` in the bodies of `f`'s loops (recursively, outer
// loops first). In a body, the values its statements define; only when
// none has the name, its arguments (the loop index, a carried value as it
// enters an iteration).
std::vector<LoopValue> loopValuesNamed(ir::Function& f, const std::string& name,
                                       const std::vector<const ir::Op*>& enclosing = {});

// Whether the program declares a tensor function `name` (generic or not).
bool isFunctionDecl(const Build& b, const std::string& name);

// For a name of a param group itself (GROUP) or of a member it does not
// have (GROUP.NOPE): what to say instead; "" for every other name.
std::string groupHint(const Build& b, const std::string& name);

// How :cost, :spmd and :try title the training step.
std::string stepTitle(const Build& b, const Step& st);

// "the loop over l (3 iterations, at FILE:L:C)": how the REPL names a loop.
std::string loopText(const Build& b, const ir::Op& loop);

}  // namespace gsl::repl
