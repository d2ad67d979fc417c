// The scalar math library of generated code (ScalarMath.h): each function
// appends its instructions at the builder's position.
#include "backend/jit/ScalarMath.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/Intrinsics.h>

#include <cmath>

namespace gsl::backend::jit {

ScalarMath::ScalarMath(llvm::IRBuilder<>& b) : b_(b), f32_(b.getFloatTy()), i32_(b.getInt32Ty()) {}

llvm::Value* ScalarMath::f32c(float v) { return llvm::ConstantFP::get(f32_, v); }

// Only inside the polynomials and range reductions below: the user's own
// mul and add are never contracted, so they round as the interpreter's.
llvm::Value* ScalarMath::fma(llvm::Value* a, llvm::Value* b, llvm::Value* c) {
  return b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {a->getType()}, {a, b, c});
}
llvm::Value* ScalarMath::fma(llvm::Value* a, float b, float c) { return fma(a, f32c(b), f32c(c)); }

// exp(x) in straight-line arithmetic, so loops that use it vectorise
// (llvm.exp.f32 becomes a scalar expf call per element): Cephes' range
// reduction x = n ln2 + r, |r| <= ln2/2, a degree-6 polynomial for e^r
// (relative error about 2e-7). expCore returns e^r and n (as f32) for x
// already clamped to the f32 range.
std::pair<llvm::Value*, llvm::Value*> ScalarMath::expCore(llvm::Value* xc) {
  llvm::Value* fx = b_.CreateUnaryIntrinsic(llvm::Intrinsic::floor, fma(xc, 1.44269504088896341f, 0.5f));
  llvm::Value* r = fma(fx, f32c(-0.693359375f), xc);
  r = fma(fx, f32c(2.12194440e-4f), r);
  llvm::Value* p = f32c(1.9875691500e-4f);
  for (float c : {1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f})
    p = fma(p, r, f32c(c));
  llvm::Value* y = b_.CreateFAdd(fma(p, b_.CreateFMul(r, r), r), f32c(1.0f));
  return {y, fx};
}

llvm::Value* ScalarMath::pow2i(llvm::Value* k) {
  return b_.CreateBitCast(b_.CreateShl(b_.CreateAdd(k, b_.getInt32(127)), 23), f32_);
}

// exp(x), the Exp op: 2^n built from exponent bits in two factors so
// results down to the denormals are right. Beyond the f32 range: +inf
// above 88.7228, 0 below -103.98; NaN stays NaN.
llvm::Value* ScalarMath::exp(llvm::Value* x) {
  llvm::Value* xc = b_.CreateBinaryIntrinsic(llvm::Intrinsic::minnum, x, f32c(89.0f));
  xc = b_.CreateBinaryIntrinsic(llvm::Intrinsic::maxnum, xc, f32c(-104.0f));
  auto [y, fx] = expCore(xc);
  llvm::Value* n = b_.CreateFPToSI(fx, i32_);
  llvm::Value* n1 = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax,
                                             b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, n, b_.getInt32(127)),
                                             b_.getInt32(-126));
  llvm::Value* res = b_.CreateFMul(b_.CreateFMul(y, pow2i(n1)), pow2i(b_.CreateSub(n, n1)));
  res = b_.CreateSelect(b_.CreateFCmpOGT(x, f32c(88.72283935546875f)),
                        llvm::ConstantFP::getInfinity(f32_), res);
  res = b_.CreateSelect(b_.CreateFCmpOLT(x, f32c(-103.97208404541015625f)), f32c(0.0f), res);
  return b_.CreateSelect(isNan(x), x, res);
}

// exp(x) saturated, for formulas that only need 1 + exp(x) (gelu): x
// clamped to [-87.3, 88.7] (one compare and select each way, as vminps
// and vmaxps), so 2^n is one factor in [2^-126, +inf]: no denormal
// results (below x = -87.3 about 2^-126), +inf from x = 88.38 on. A NaN
// x gives a finite value: the caller must propagate NaN through its
// other operands.
llvm::Value* ScalarMath::expSaturated(llvm::Value* x) {
  llvm::Value* xc = b_.CreateSelect(b_.CreateFCmpOLT(x, f32c(88.7f)), x, f32c(88.7f));
  xc = b_.CreateSelect(b_.CreateFCmpOGT(xc, f32c(-87.3f)), xc, f32c(-87.3f));
  auto [y, fx] = expCore(xc);
  return b_.CreateFMul(y, pow2i(b_.CreateFPToSI(fx, i32_)));
}

llvm::Value* ScalarMath::isNan(llvm::Value* x) { return b_.CreateFCmpUNO(x, x); }

// tanh from exp (above): sign(x) (1 - e) / (1 + e), e = exp(-2|x|); below
// |x| = 1/8 (where 1 - e cancels) its Taylor series to x^9.
llvm::Value* ScalarMath::tanh(llvm::Value* x) {
  llvm::Value* ax = b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  llvm::Value* e = exp(b_.CreateFMul(ax, f32c(-2.0f)));
  llvm::Value* t = b_.CreateFDiv(b_.CreateFSub(f32c(1.0f), e), b_.CreateFAdd(f32c(1.0f), e));
  t = b_.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, t, x);
  llvm::Value* x2 = b_.CreateFMul(x, x);
  llvm::Value* p = f32c(62.0f / 2835.0f);
  for (float c : {-17.0f / 315.0f, 2.0f / 15.0f, -1.0f / 3.0f, 1.0f}) p = fma(p, x2, f32c(c));
  p = b_.CreateFMul(x, p);
  return b_.CreateSelect(b_.CreateFCmpOLT(ax, f32c(0.125f)), p, t);
}

// One exp(-|x|) for both branches.
llvm::Value* ScalarMath::sigmoid(llvm::Value* x) {
  llvm::Value* e = exp(b_.CreateFNeg(b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x)));
  llvm::Value* d = b_.CreateFAdd(f32c(1.0f), e);
  return b_.CreateSelect(b_.CreateFCmpOGE(x, f32c(0.0f)), b_.CreateFDiv(f32c(1.0f), d), b_.CreateFDiv(e, d));
}

// 0.5 x (1 + tanh(u)), u = c (x + 0.044715 x^3), c = sqrt(2 / pi), as
// the reference kernel; with tanh(u) = 2 / (1 + e^-2u) - 1 that is
// x / (1 + e^-2u): one exp, one division, no branch to select. Its
// difference from the reference is largest in the negative tail,
// where the reference's 1 + tanh(u) cancels (absolute about 2^-25 |x|,
// and 0 once tanh(u) rounds to -1, near x = -5.3); the tests bound it.
llvm::Value* ScalarMath::gelu(llvm::Value* x) {
  const double c = std::sqrt(2.0 / M_PI);
  llvm::Value* m2u = b_.CreateFMul(x, fma(b_.CreateFMul(x, x), (float)(-2 * c * 0.044715), (float)(-2 * c)));
  return b_.CreateFDiv(x, b_.CreateFAdd(f32c(1.0f), expSaturated(m2u)));
}

}  // namespace gsl::backend::jit
