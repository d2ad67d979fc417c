// How are the ops that move elements emitted? slice, transpose, concat,
// one_hot, take and iota, as copies and gathers (OpLowering's data
// movement part, Lowering.h).
#include <llvm/IR/BasicBlock.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/Function.h>

#include "backend/jit/Lowering.h"

namespace gsl::backend::jit {

using ir::DType;
using ir::Shape;

void OpLowering::emitSlice(const ir::Op& op) {
  IRValue in = op.operands[0];
  const Shape& sh = in->type.shape;
  int64_t ax = op.attrs.getInt("axis"), outer = 1, inner = 1;
  for (int64_t d = 0; d < ax; ++d) outer *= sh[d];
  for (size_t d = ax + 1; d < sh.size(); ++d) inner *= sh[d];
  const int64_t inRow = sh[ax] * inner, outRow = op.result->type.shape[ax] * inner;
  llvm::Value* src = b_.CreateConstInBoundsGEP1_64(i32_, ptr(in), op.attrs.getInt("start") * inner);
  copyWords(ptr(op.result), src, {outer, outRow}, {outRow, 1}, {inRow, 1});
}

void OpLowering::emitTranspose(const ir::Op& op) {
  IRValue in = op.operands[0];
  Strides inSt = rowMajorStrides(in->type.shape), st;
  for (int64_t p : op.attrs.getInts("perm")) st.push_back(inSt[p]);
  copyWords(ptr(op.result), ptr(in), op.result->type.shape, rowMajorStrides(op.result->type.shape), st,
            in->type.dtype == DType::BF16 ? i16_ : i32_);
}

void OpLowering::emitConcat(const ir::Op& op) {
  const Shape& rs = op.result->type.shape;
  const int64_t axis = op.attrs.getInt("axis");
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= rs[d];
  for (size_t d = axis + 1; d < rs.size(); ++d) inner *= rs[d];
  const int64_t outRow = rs[axis] * inner;
  int64_t at = 0;
  for (IRValue v : op.operands) {
    const int64_t row = v->type.shape[axis] * inner;
    llvm::Value* dst = b_.CreateConstInBoundsGEP1_64(i32_, ptr(op.result), at);
    copyWords(dst, ptr(v), {outer, row}, {outRow, 1}, {row, 1});
    at += row;
  }
}

void OpLowering::emitOneHot(const ir::Op& op) {
  IRValue idx = op.operands[0];
  const int64_t n = op.attrs.getInt("n"), m = idx->type.numElements();
  llvm::Value *ix = ptr(idx), *out = ptr(op.result);
  map({m, n}, {{1, 0}, {n, 1}}, [&](const std::vector<llvm::Value*>& ivs, const std::vector<llvm::Value*>& o) {
    llvm::Value* i = b_.CreateSExt(loadIn(i32_, ix, o[0]), i64_);
    store(b_.CreateSelect(b_.CreateICmpEQ(i, ivs.size() > 1 ? ivs[1] : i64c(0)), f32c(1.0f), f32c(0.0f)), out,
          o[1]);
  });
}

// Row gather with a bounds check; an index out of range reports through
// gsl_rt_take_error and leaves the function.
void OpLowering::emitTake(const ir::Op& op) {
  IRValue table = op.operands[0], idx = op.operands[1];
  const int64_t rows = table->type.shape[0];
  const int64_t row = table->type.numElements() / rows;
  llvm::Value *src = ptr(table), *ix = ptr(idx), *out = ptr(op.result);
  auto err = helper("gsl_rt_take_error", i32_, {ptr_, i64_, i64_, i64_});
  loop(idx->type.numElements(), [&](llvm::Value* i) {
    llvm::Value* k = b_.CreateSExt(loadIn(i32_, ix, i), i64_);
    auto* bad = llvm::BasicBlock::Create(c_, "take.bad", fn_);
    auto* ok = llvm::BasicBlock::Create(c_, "take.ok", fn_);
    b_.CreateCondBr(b_.CreateICmpUGE(k, i64c(rows)), bad, ok);  // unsigned: also k < 0
    b_.SetInsertPoint(bad);
    b_.CreateCall(err, {ctx_, opIndexValue(), k, i64c(rows)});
    b_.CreateBr(error_);
    b_.SetInsertPoint(ok);
    llvm::Value* from = gep(i32_, src, b_.CreateMul(k, i64c(row), "", true, true));
    llvm::Value* to = gep(i32_, out, b_.CreateMul(i, i64c(row), "", true, true));
    if (row >= 16) {
      b_.CreateMemCpy(to, llvm::Align(4), from, llvm::Align(4), (uint64_t)row * 4);
    } else {
      for (int64_t e = 0; e < row; ++e) store(loadIn(i32_, from, i64c(e)), to, i64c(e));
    }
  });
}

// iota (arange): [outer, n, inner] around the axis; each element its
// index along the axis.
void OpLowering::emitIota(const ir::Op& op) {
  const Shape& s = op.result->type.shape;
  const int64_t axis = op.attrs.getInt("axis"), n = s[axis];
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= s[d];
  for (int64_t d = axis + 1; d < (int64_t)s.size(); ++d) inner *= s[d];
  llvm::Value* out = ptr(op.result);
  map({outer, n, inner}, {{n * inner, inner, 1}},
      [&](const std::vector<llvm::Value*>& ivs, const std::vector<llvm::Value*>& o) {
        store(b_.CreateTrunc(ivs[1], i32_), out, o[0]);
      });
}

}  // namespace gsl::backend::jit
