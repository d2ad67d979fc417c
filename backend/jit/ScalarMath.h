// What are exp, tanh, sigmoid and gelu as LLVM IR? The f32 functions the
// generated code computes in straight-line arithmetic (no library call
// per element), so that loops using them vectorise: exp is Cephes' range
// reduction and polynomial, the others are built from it. Used by the
// elementwise ops (LowerElementwise.cpp) and softmax (LowerReduction.cpp).
//
// Their values are not the C library's bit for bit (exp: about 2e-7
// relative); the bf16 path, which must round as the interpreter does,
// calls expf and tanhf instead (LowerElementwise.cpp, evalBF16).
#pragma once
#include <llvm/IR/IRBuilder.h>

#include <utility>

namespace gsl::backend::jit {

class ScalarMath {
 public:
  // Emits at `b`'s insertion point (the builder is shared with the caller).
  explicit ScalarMath(llvm::IRBuilder<>& b);

  // e^x: +inf above 88.7228, 0 below -103.98, NaN stays NaN, denormal
  // results right.
  llvm::Value* exp(llvm::Value* x);
  // e^x for formulas that only need 1 + e^x: x clamped to [-87.3, 88.7],
  // so no denormal results; a NaN x gives a finite value (the caller must
  // propagate NaN through its other operands).
  llvm::Value* expSaturated(llvm::Value* x);
  llvm::Value* tanh(llvm::Value* x);
  // The reference kernel's formula: x >= 0 ? 1 / (1 + e^-x) : e^x / (1 + e^x).
  llvm::Value* sigmoid(llvm::Value* x);
  // The tanh approximation of gelu, in an equal form with one exp.
  llvm::Value* gelu(llvm::Value* x);
  llvm::Value* isNan(llvm::Value* x);

 private:
  llvm::Value* f32c(float v);
  // a * b + c, fused where the host has FMA (llvm.fmuladd).
  llvm::Value* fma(llvm::Value* a, llvm::Value* b, llvm::Value* c);
  llvm::Value* fma(llvm::Value* a, float b, float c);
  // e^r and n (as f32) of x = n ln2 + r, for x already clamped.
  std::pair<llvm::Value*, llvm::Value*> expCore(llvm::Value* xc);
  // 2^k for i32 k in [-126, 127] (128: +inf).
  llvm::Value* pow2i(llvm::Value* k);

  llvm::IRBuilder<>& b_;
  llvm::Type *f32_, *i32_;
};

}  // namespace gsl::backend::jit
