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

struct Function {
  std::string name;
  std::vector<Value*> args;
  std::vector<std::unique_ptr<Op>> ops;  // in execution order
  std::vector<Value*> results;
  std::vector<std::optional<Sharding>> resultShardings;  // from `-> T @shard(...)`
  SourceLoc loc;

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
