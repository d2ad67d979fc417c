// The REPL's names for the values of the program as it runs.
//
// GSL inlines every call (a generic function exists only inlined), so a
// let of a called function is a value of its caller's IR. The front end
// records each let by its call path (the call paths of ir/ValueNames.h,
// in the table of the function the value is in); the REPL names
// it by that path from the function it is in:
//
//   loss.logits.trunk.block.attn.q    let q of fn attn, called by block,
//                                     called by trunk, by logits, by loss
//
// Roots: every user function with IR of its own (its names start with
// its name), and the training step, the thunk `opt.minimize(loss, ...)`
// runs in fn main (its names start at the loss function, which it replaces
// as a root: the step is how the loss runs). The step also names
// grad(w), the gradient of param w, and OPT.SLOT(w), state SLOT of
// optimizer OPT for w: opt.m(w) and opt.v(w) (Adam's moments),
// opt.velocity(w) (SGD momentum), opt.row(w) / opt.col(w) (Adafactor).
//
// A name picks values by the first of these rules that matches any:
//   1. the whole name                 loss.logits.trunk.block.attn.q
//   2. a suffix at a dot              attn.q, block.attn.q
//   3. a root's name and a suffix     loss.q (a q anywhere under loss)
// When the rule matches values of several names, the name is ambiguous:
// the REPL lists the names it could mean.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "frontend/Frontend.h"
#include "ir/Module.h"
#include "passes/ShardingProvenance.h"
#include "runtime/HostWalk.h"

namespace gsl::repl {

struct Build;

// Copies the names (let / argument names and call paths) of `f`'s values
// onto its clone `c`, loop bodies included (clone() keeps the order of
// args and ops, not names: ir/ValueNames.h).
void copyNames(const ir::Function& f, ir::Function& c);
// The loop ops of `f` in text order (a loop before the loops in its body).
void collectLoops(const ir::Function& f, std::vector<const ir::Op*>& out);
// Copies the names of the values of `from`'s loop bodies onto the same
// bodies of `to` (a later form of the same function: passes that rebuild a
// body, as propagation does, keep its values in order but not their
// names). A body whose values differ in number is left unnamed.
void copyBodyNames(const ir::Function& from, ir::Function& to);
// A copy of `f` (its arguments lying as they do), propagated, with names;
// with `provenance`, why its values have their shardings is recorded there
// (valid while the copy lives).
std::unique_ptr<ir::Function> propagated(const ir::Module& m, const ir::Function& f,
                                         passes::ShardingProvenance* provenance = nullptr);

// The training step of a build: the first `opt.minimize(...)` its fn main
// runs, found by the host-script walk (runtime/HostWalk.h) with the
// shardings the run gives its inputs.
struct Step {
  const frontend::Thunk* thunk = nullptr;
  std::vector<std::optional<ir::Sharding>> inputs;
  std::unique_ptr<runtime::PerRankPrograms> programs;  // owns perRank
  const ir::Function* perRank = nullptr;
  std::string loss;  // the loss function's name
};
// Null when the build's fn main runs no opt.minimize.
std::unique_ptr<Step> findStep(const Build& b);

// A named value of a root.
struct PathValue {
  std::string name;  // the whole name: loss.logits.trunk.block.attn.q
  ir::Value* value = nullptr;
  const ir::Op* loop = nullptr;          // the innermost loop whose body holds it
  std::vector<const ir::Op*> enclosing;  // the loops around that one, outermost first
};

// A function whose values are named: its propagated copy and the names.
struct PathRoot {
  const Build* build = nullptr;
  std::string fn;      // the user function ("" for the training step)
  std::string prefix;  // "loss." for fn loss, "" for the step
  const std::vector<frontend::HostLeaf>* leaves = nullptr;  // the step's inputs
  std::unique_ptr<ir::Function> ir;                         // propagated
  passes::ShardingProvenance provenance;                    // why ir's values lie as they do
  ir::ValueNames names;  // the names of ir's values, its loop bodies' included (ir->namesWithBodies())
  std::vector<PathValue> values;                            // in text order
};

// The roots of build `b` (its user functions with IR) and of its training
// step `step` (of build `stepBuild`; none when null).
std::vector<PathRoot> pathRoots(const Build& b, const Build* stepBuild, const Step* step);

// What a name picks: values of one name (several when a call or loop
// repeats it), or when ambiguous the names it could mean (sorted).
struct Resolved {
  std::vector<std::pair<const PathRoot*, const PathValue*>> values;
  std::vector<std::string> candidates;
};
Resolved resolvePath(const std::vector<PathRoot>& roots, const std::string& query);

// "'attn.q' could name any of: a, b (give more of the path)".
std::string ambiguousMessage(const std::string& query, const std::vector<std::string>& candidates);

}  // namespace gsl::repl
