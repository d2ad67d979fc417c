// Reverse-mode automatic differentiation as an IR pass.
//
// appendGradient appends to a function, in place, the reverse sweep from a
// scalar f32 `loss`: the adjoint of the loss is seeded with 1.0, the forward
// ops are visited in reverse program order, and each op's gradient rule (the
// `grad` column of the op table, ir/GradRules.h) turns the adjoint of its
// result into adjoints of its operands; a value read by several ops gets the
// sum (an `add`) of their contributions.
//
// Only ops on a path from a differentiated input to the loss are visited:
// an op's result is "active" when some operand is active and the op has a
// gradient rule and an f32 result; the sources are the `param` ops naming a
// param in `params` (f32) and, with `wrtArgs`, the f32 arguments of `f`.
// Ops without a rule (comparisons, argmax, one_hot, mod, random_uniform,
// constants, collectives, ...) are constants to the sweep; where's
// condition and take's indices get no gradient.
//
// A `loop` op is differentiated by the pass itself: its backward pass is a
// reverse loop that recomputes the body from the carried values the
// forward loop saved (docs/loops.md). The forward ops are not changed,
// except that a differentiated loop gets more results (its carried inputs
// of every iteration, stacked). The appended values have no sharding:
// sharding propagation gives them one later (GSPMD-style), like any value
// the user did not annotate. Neither `f.results` nor the value numbering is
// touched: the caller adds the gradients it wants to the results (and may
// call f.renumber()).
#pragma once
#include <string>
#include <vector>

#include "ir/Module.h"

namespace gsl::passes {

struct Gradients {
  // One per name in `params`, in order: d loss / d param, of the param's
  // type. A param read by several `param` ops gets the sum of their
  // adjoints; a param the loss does not depend on gets zeros.
  std::vector<ir::Value*> params;
  // With wrtArgs, one per argument of `f`: d loss / d arg for an f32
  // argument (zeros if the loss does not depend on it), nullptr for an i32
  // or bool argument. Empty without wrtArgs.
  std::vector<ir::Value*> args;
};

// Appends to `f` the gradient of `loss` (an f32 scalar computed in `f`)
// with respect to the named params of `m` and, with `wrtArgs`, to f's f32
// arguments. Every name must be a param of `m` and `loss` a value of `f`
// (an internal error otherwise: callers check user input first).
Gradients appendGradient(const ir::Module& m, ir::Function& f, ir::Value* loss,
                         const std::vector<std::string>& params, bool wrtArgs);

}  // namespace gsl::passes
