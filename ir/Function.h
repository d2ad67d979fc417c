// A tensor function: arguments, a straight-line list of ops in SSA order,
// and the returned values. Calls are inlined when the IR is built, so a
// function is one flat graph (as GSPMD partitions one HLO module).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/Op.h"

namespace gsl::ir {

// A host thunk that asks for training (set by the front end, expanded by
// the pipeline's autodiff stage, read by the runtime).
struct TrainRequest {
  enum Kind { Grad, Minimize } kind = Grad;
  std::vector<std::string> params;  // differentiated params, declaration order
  std::string optimizer;            // Minimize: the optimizer's name
  // Filled by the expansion (Minimize): after the thunk's own arguments
  // come the step counter (i32 scalar, the step being taken, from 1) and
  // one argument per optimizer state slot; results are the loss, the new
  // params (in `params` order) and the new states (in `states` order).
  struct State {
    std::string param, slot;  // e.g. "w1", "m"
    TensorType type;
  };
  std::vector<State> states;
  bool expanded = false;
};

struct Function {
  std::string name;
  std::vector<Value*> args;
  std::vector<std::unique_ptr<Op>> ops;  // in execution order
  std::vector<Value*> results;
  std::vector<std::optional<Sharding>> resultShardings;  // from `-> T @shard(...)`
  SourceLoc loc;
  std::optional<TrainRequest> train;

  Value* addArg(const TensorType& t);
  // Appends an op with an already computed result type.
  Op* append(OpKind k, std::vector<Value*> operands, AttrMap attrs, const TensorType& type,
             SourceLoc loc = {});
  // Renumbers values 0..N-1 in definition order (args first).
  void renumber();
  // A deep copy (same ops, attrs, types and shardings; fresh values).
  std::unique_ptr<Function> clone() const;

 private:
  std::vector<std::unique_ptr<Value>> values_;
  int nextId_ = 0;
};

}  // namespace gsl::ir
