// A tensor function: arguments, a straight-line list of ops in SSA order,
// and the returned values. Calls are inlined when the IR is built, so a
// function is one flat graph (as GSPMD partitions one HLO module), except
// for `loop` ops, whose body is a Function of its own owned by the op
// (docs/loops.md).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/Op.h"
#include "ir/ValueNames.h"

namespace gsl::ir {

// A host thunk that asks for training (set by the front end, expanded by
// the pipeline's autodiff stage, read by the runtime).
struct TrainRequest {
  enum Kind { Grad, Minimize } kind = Grad;
  std::vector<std::string> params;  // differentiated params, declaration order
  std::string optimizer;            // Minimize: the optimizer's name
  std::string loss;                 // the loss function's name (for the REPL)
  // Minimize: how many auxiliary outputs the loss function returns after
  // the loss (`fn loss(...) -> (f32, T1, ...)`, JAX's has_aux): the thunk
  // returns (loss, aux...) before the expansion; only the loss is
  // differentiated.
  size_t aux = 0;
  // Filled by the expansion (Minimize): after the thunk's own arguments
  // come the step counter (i32 scalar, the step being taken, from 1), one
  // f32 scalar per entry of `scalars` (computed by the host for each step
  // in double: passes::stepScalars) and one argument per optimizer state
  // slot; results are the loss, the new params (in `params` order), the
  // new states (in `states` order) and the `aux` auxiliary outputs (as
  // they lie after propagation).
  struct State {
    std::string param, slot;  // e.g. "w1", "m"
    TensorType type;
  };
  // Per-step scalars: the scheduled lr, Adam's lr / (1 - beta1^t) and
  // sqrt(1 - beta2^t), Adafactor's beta2_t = 1 - t^-decay and 1 - beta2_t,
  // the decoupled decay lr * weight_decay.
  enum class Scalar { Lr, AdamStepSize, AdamBc2Sqrt, AdafactorBeta, AdafactorKeep, DecayRate };
  std::vector<Scalar> scalars;
  std::vector<State> states;
  bool expanded = false;
};

struct Function {
  std::string name;
  std::vector<Value*> args;
  std::vector<std::unique_ptr<Op>> ops;  // in execution order
  std::vector<Value*> results;
  std::vector<std::optional<Sharding>> resultShardings;  // from `-> T @shard(...)`
  // How the function wants argument i to lie: the first `@shard` the front
  // end put on the argument itself (a callee's annotated parameter inlined
  // into a host thunk, or `@shard` on the name), in op order. The IR keeps
  // that annotation as a `copy` of the argument; this is the same sharding,
  // typed, for the runtime (a batch is read as its thunk wants it) and the
  // weight-update sharding pass (the data-parallel axes), so neither
  // pattern-matches copies. Shorter than args when later args want nothing.
  std::vector<std::optional<Sharding>> argWants;
  const std::optional<Sharding>& wantedSharding(size_t i) const;
  void wantSharding(size_t i, const Sharding& s);
  SourceLoc loc;
  std::optional<TrainRequest> train;
  // The source names of this function's own values (its arguments and op
  // results; a loop body's are in the body's table), for the REPL: set by
  // the front end and passes/Training, never printed (ir/ValueNames.h).
  ValueNames names;

  Value* addArg(const TensorType& t);
  // Appends an op with an already computed result type.
  Op* append(OpKind k, std::vector<Value*> operands, AttrMap attrs, const TensorType& type,
             SourceLoc loc = {});
  // Appends an op with several results (a loop) and, for a loop, its body.
  Op* appendMulti(OpKind k, std::vector<Value*> operands, AttrMap attrs,
                  const std::vector<TensorType>& types, std::unique_ptr<Function> body,
                  SourceLoc loc = {});
  // Adds one more result of type `t` to `op` (an op of this function).
  Value* addResult(Op* op, const TensorType& t);
  // Appends a copy of `src` (an op of any function) reading `operands`:
  // same kind, attrs, location, result types and shardings, and a deep
  // copy of its body.
  Op* appendClone(const Op& src, std::vector<Value*> operands);
  // Renumbers values 0..N-1 in text order: args first, then each op's
  // results followed by its body's values (recursively).
  void renumber();
  // A deep copy (same ops, attrs, types and shardings; fresh values,
  // without names).
  std::unique_ptr<Function> clone() const;
  // The names of this function's values and of its loop bodies' values
  // (recursively) in one table, valid while those values live.
  ValueNames namesWithBodies() const;

 private:
  int renumberFrom(int id);
  Value* newValue(Op* def, const TensorType& t);

  std::vector<std::unique_ptr<Value>> values_;
  int nextId_ = 0;
};

// What a compile-time constant decides: the value of a scalar `constant`
// op (bool, int or float attribute; a bool as 1 or 0), or of a comparison
// of two such (`DENSE == 1` before the simplifier folds it); none
// otherwise. Read by the simplifier and by `where`'s gradient rule.
std::optional<double> scalarConstant(const Value* v);

}  // namespace gsl::ir
