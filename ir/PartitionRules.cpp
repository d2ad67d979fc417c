#include "ir/PartitionRules.h"

namespace gsl::ir {

void partitionLocal(LocalBuilder& b, const Op& op) {
  LocalPlan p = b.plan(op);
  b.finish(op, p, b.emit(op.kind, p.operands, op.attrs));
}

void partitionLocalShape(LocalBuilder& b, const Op& op) {
  LocalPlan p = b.plan(op);
  AttrMap at = op.attrs;
  at.set("shape", p.localShape);
  b.finish(op, p, b.emit(op.kind, p.operands, at));
}

void partitionMean(LocalBuilder& b, const Op& op) {
  LocalPlan p = b.plan(op);
  Value* v = b.emit(op.kind, p.operands, op.attrs);
  if (!p.result.partial.empty()) {
    // mean over a split dim: each rank's local mean, weighted by its share
    // of the elements, sums to the global mean.
    AttrMap c;
    c.set("value", 1.0 / (double)p.partialGroup);
    Value* k = b.emitSource(OpKind::Constant, c, {DType::F32, {}});
    v = b.emit(OpKind::Mul, {v, k}, {});
  }
  b.finish(op, p, v);
}

void partitionParam(LocalBuilder& b, const Op& op) {
  const TensorType& t = op.result->type;
  Sharding storage = b.paramStorage(op.attrs.getString("name"));
  Value* v = b.emitSource(OpKind::Param, op.attrs, {t.dtype, b.localShape(t, storage)});
  b.setResult(b.tag({v, storage}));
}

void partitionConstant(LocalBuilder& b, const Op& op) {
  const TensorType& t = op.result->type;
  Value* v = b.emitSource(OpKind::Constant, op.attrs, {t.dtype, b.localShape(t, b.decided())});
  b.setResult(b.tag({v, b.decided()}));
}

void partitionCopy(LocalBuilder& b, const Op& op) {
  b.setResult(b.reshard(b.local(op.operands[0]), b.decided()));
}

void partitionRandom(LocalBuilder& b, const Op& op) {
  LocalValue seed = b.reshard(b.local(op.operands[0]), Sharding::replicated("", 0));
  Value* v = b.emit(OpKind::RandomUniform, {seed.v}, op.attrs);
  LocalValue whole = b.tag({v, Sharding::replicated("", op.result->type.rank())});
  b.setResult(b.reshard(whole, b.decided()));
}

}  // namespace gsl::ir
