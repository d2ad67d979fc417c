// Why a value has the sharding propagation gave it: a side table beside the
// IR, keyed by value, that sharding propagation (passes/ShardingPropagation.h)
// and weight-update sharding (passes/UpdateSharding.h) fill when given one.
// The REPL keeps one per function it propagates, to explain a value's
// sharding (:sharding, repl/Explain.h); propagation itself reads it to tell
// what it gave from what the user annotated. A value with no entry has its
// sharding from an annotation or an input, or has none.
//
// The keys are the values of one function (and of its loop bodies): the
// table is only meaningful while that function lives, and a table handed to
// propagation must hold entries for no other function's values.
#pragma once
#include <unordered_map>

namespace gsl::ir {
struct Op;
struct Value;
}  // namespace gsl::ir

namespace gsl::passes {

// Value v's sharding was derived through op `via` from value `source`: an
// operand of `via` when v is its result (forward), the result of `via` when
// v is its operand (backward). `source` is null when no one value gave it
// (a loop's carried value, given by the propagated body as a whole).
struct ShardingStep {
  const ir::Op* via = nullptr;
  const ir::Value* source = nullptr;
};

class ShardingProvenance {
 public:
  void record(const ir::Value* v, const ir::Op* via, const ir::Value* source) { steps_[v] = {via, source}; }
  // The step that gave `v` its sharding; null when no propagation step did.
  const ShardingStep* find(const ir::Value* v) const {
    auto it = steps_.find(v);
    return it == steps_.end() ? nullptr : &it->second;
  }
  bool propagated(const ir::Value* v) const { return steps_.count(v) > 0; }
  // Adds the entries of `other` (a loop body's, once the body is kept).
  void merge(const ShardingProvenance& other) {
    for (const auto& [v, s] : other.steps_) steps_[v] = s;
  }

 private:
  std::unordered_map<const ir::Value*, ShardingStep> steps_;
};

}  // namespace gsl::passes
