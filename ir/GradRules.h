// Gradient rules: the reverse-mode derivative of every differentiable op,
// the `grad` column of the op table (ir/OpTable.h).
//
// A rule gets the adjoint `g` of an op's result (same type as the result)
// and appends, through a GradBuilder, the ops that compute the adjoint of
// each operand (same type as that operand), or leaves nullptr where an
// operand has no gradient (where's condition, take's indices, a cast from a
// non-f32 type). The rules use only ops of the table, so the gradient is
// ordinary IR: shape inference, sharding propagation, the SPMD partitioner
// and every engine handle it like any forward op. The autodiff pass
// (passes/Autodiff.h) visits the forward ops in reverse order, calls each
// op's rule and accumulates adjoints.
//
// Semantics follow the reference kernels (backend/Kernels.cpp): gelu is the
// tanh approximation (gelu_exact the erf form), layer_norm has no affine parameters, maximum/minimum
// send the gradient of a tie to the first operand, max/min reductions split
// it evenly among the tied positions, relu/abs have derivative 0 at 0.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ir/Function.h"

namespace gsl::ir {

// Appends typed ops to a function: every op's result type comes from the op
// table's type rule (ir::inferType); a failing rule is an internal error (a
// bug in a gradient rule). Helpers skip ops that would be the identity
// (a reshape to the same shape, a sum over no axes, ...).
class GradBuilder {
 public:
  explicit GradBuilder(Function& f) : f_(f) {}

  Function& function() { return f_; }
  // Source location given to the ops appended from now on (the pass sets
  // it to the forward op's location, so errors point at the user's code).
  void setLoc(SourceLoc l) { loc_ = l; }
  // Which operands of the op being differentiated need a gradient (set by
  // the pass before it calls a rule; all of them when unset). Rules may
  // skip the ops of an operand that is not wanted.
  void setWanted(std::vector<bool> w) { wanted_ = std::move(w); }
  bool wants(size_t operand) const { return operand >= wanted_.size() || wanted_[operand]; }

  // Any op, typed by the op table (attrs canonicalised by the rule).
  Value* op(OpKind k, std::vector<Value*> operands, AttrMap attrs = {});

  // A constant of the given dtype and shape: one scalar constant (reused
  // within this builder) broadcast to `shape` (no broadcast for a scalar).
  Value* constant(double value, DType dt, const Shape& shape = {});
  // A scalar of the float dtype of the adjoint being propagated (f32, or
  // bf16 in a bf16 region: setFloatDType), as a weakly typed literal.
  Value* scalar(double value) { return constant(value, floatDType_); }
  void setFloatDType(DType d) { floatDType_ = d; }
  Value* zerosLike(const Value* v) { return constant(0.0, v->type.dtype, v->type.shape); }

  // Elementwise (NumPy broadcasting, as the ops).
  Value* add(Value* a, Value* b) { return op(OpKind::Add, {a, b}); }
  Value* sub(Value* a, Value* b) { return op(OpKind::Sub, {a, b}); }
  Value* mul(Value* a, Value* b) { return op(OpKind::Mul, {a, b}); }
  Value* div(Value* a, Value* b) { return op(OpKind::Div, {a, b}); }
  Value* neg(Value* a) { return op(OpKind::Neg, {a}); }
  Value* where(Value* c, Value* a, Value* b) { return op(OpKind::Where, {c, a, b}); }
  Value* cast(Value* a, DType dt);

  // Shape manipulation.
  Value* reshape(Value* v, const Shape& shape);      // no-op if the shape is already `shape`
  Value* broadcast(Value* v, const Shape& shape);    // no-op if the shape is already `shape`
  Value* transpose(Value* v, const std::vector<int64_t>& perm);  // no-op for the identity
  Value* transposeLast2(Value* v);                   // swaps the last two dims (rank >= 2)
  // sum over `axes` (sorted, non-negative); no-op for no axes.
  Value* sum(Value* v, const std::vector<int64_t>& axes, bool keepdims);
  // NumPy "unbroadcast": the adjoint of broadcasting a value of shape
  // `shape` to v's shape. Sums over the leading dims v has in addition and
  // over the dims where `shape` has 1 and v does not, then reshapes.
  Value* sumTo(Value* v, const Shape& shape);
  // The adjoint of a reduction over `axes` of a value of shape `inShape`:
  // `g` (the reduced shape, with or without kept dims) broadcast back.
  Value* unreduce(Value* g, const Shape& inShape, const std::vector<int64_t>& axes);
  // g reshaped so the reduced `axes` of `inShape` are kept as size 1.
  Value* keepDims(Value* g, const Shape& inShape, const std::vector<int64_t>& axes);

 private:
  Function& f_;
  SourceLoc loc_;
  std::vector<bool> wanted_;
  std::map<std::pair<double, DType>, Value*> scalars_;
  DType floatDType_ = DType::F32;
};

// The rules (one per differentiable op; the table's `grad` column). Each
// has the signature ir::GradRule.
#define GSL_GRAD_RULES(X)                                                      \
  X(gradCopy) X(gradNeg) X(gradExp) X(gradLog) X(gradSqrt) X(gradRsqrt)       \
  X(gradTanh) X(gradRelu) X(gradGelu) X(gradErf) X(gradGeluExact)            \
  X(gradSigmoid) X(gradAbs) X(gradCast)                                       \
  X(gradAdd) X(gradSub) X(gradMul) X(gradDiv) X(gradPow) X(gradMaximum)       \
  X(gradMinimum) X(gradWhere) X(gradMatMul) X(gradEinsum) X(gradSum)          \
  X(gradMean) X(gradMaxMin) X(gradSoftmax) X(gradLogSoftmax) X(gradLayerNorm) \
  X(gradCumSum) X(gradReshape) X(gradTranspose) X(gradConcat) X(gradSlice)    \
  X(gradBroadcast) X(gradTake) X(gradDropout)
#define GSL_DECLARE_GRAD_RULE(name) \
  void name(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& operandGrads);
GSL_GRAD_RULES(GSL_DECLARE_GRAD_RULE)
#undef GSL_DECLARE_GRAD_RULE

}  // namespace gsl::ir
