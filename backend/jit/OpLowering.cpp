// Op lowering: the LLVM IR of each op kind, emitted into straight-line
// code of loop nests built with IRBuilder. This file walks the planned ops
// and dispatches on their kind (OpLowering::emitOp; which kinds have code:
// hasLowering); Lowering.h lists the files that emit each kind.
//
// What is generated and what is called:
//   generated: every elementwise op (unary, binary, where, cast, compare,
//     broadcast) with NumPy broadcasting as stride-0 loads, together with
//     the producers the buffer plan fused into it (LowerElementwise.cpp);
//     reductions (sum/mean/max/min/argmax); softmax, log_softmax,
//     layer_norm, cumsum (LowerReduction.cpp); transpose, concat, slice,
//     one_hot, take (with its bounds check), iota (LowerDataMovement.cpp);
//     constants; matmul and einsum: a vectorised GEMM kernel (batched over
//     any strides; GemmKernel.cpp), or a loop nest for einsums that are not
//     a GEMM (LowerReduction.cpp).
//   loops (LowerLoop.cpp): the body compiled once as a function of its
//     own, run once per iteration by gsl_rt_loop; dynamic_index and
//     dynamic_update as row copies.
//   aliased (no code, no buffer; BufferPlan.h): reshape, slice of a
//     contiguous block, params (read in place from the param store).
//   called (extern "C", Runtime.cpp): param lookup, random_uniform, dropout
//     (Philox, backend/Random.h), collectives (backend::evalCollective),
//     take's error report, integer pow, Eigen for large GEMMs whose
//     layout the kernel cannot read (see the measurement in
//     Contraction.cpp), and backend::evalOp (the reference kernel, through
//     gsl_rt_eval_op) for every op without a lowering: an op added to the
//     op table without one keeps working, at interpreter speed.
//
// Numerics follow backend/Kernels.cpp: f32 sums and means accumulate in
// double, max/min propagate NaN, casts saturate, i32 arithmetic wraps, and
// the same formula for sigmoid (gelu: an equal one). log, sqrt and pow are
// LLVM intrinsics; exp, tanh, sigmoid and gelu are straight-line arithmetic
// (ScalarMath.h); erf calls the C library's erff, as the reference kernel.
#include "backend/jit/OpLowering.h"

#include <llvm/IR/BasicBlock.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/Function.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "backend/jit/Lowering.h"
#include "backend/jit/LowerLoop.h"
#include "support/Diagnostics.h"

namespace gsl::backend::jit {

using ir::DType;
using ir::OpClass;
using ir::OpKind;

namespace {

// Kinds whose lowering a test hides (ScopedHiddenLowering).
std::vector<OpKind>& hiddenKinds() {
  static std::vector<OpKind> kinds;
  return kinds;
}

}  // namespace

double constantValue(const ir::Op& op) {
  const ir::Attr* v = op.attrs.get("value");
  GSL_ASSERT(v, "jit: constant without a value");
  double d = 0;
  if (auto* b = std::get_if<bool>(v)) d = *b ? 1 : 0;
  else d = op.attrs.getFloat("value");
  return d;
}

int32_t constantWord(const ir::Op& op, DType dt) {
  double d = constantValue(op);
  if (dt == DType::Bool) return d != 0 ? 1 : 0;
  if (std::isnan(d)) return 0;
  if (d >= 2147483647.0) return std::numeric_limits<int32_t>::max();
  if (d <= -2147483648.0) return std::numeric_limits<int32_t>::min();
  return (int32_t)d;
}

// The kinds emitOp dispatches (keep the two in step: a kind listed here
// and not dispatched there is an internal error, the other way round the
// op runs the reference kernel).
bool hasLowering(OpKind k) {
  if (std::find(hiddenKinds().begin(), hiddenKinds().end(), k) != hiddenKinds().end()) return false;
  switch (k) {
    case OpKind::Param: case OpKind::Constant: case OpKind::Reshape: case OpKind::Slice:
    case OpKind::Sum: case OpKind::Mean: case OpKind::Max: case OpKind::Min: case OpKind::ArgMax:
    case OpKind::Softmax: case OpKind::LogSoftmax: case OpKind::LayerNorm: case OpKind::CumSum:
    case OpKind::Transpose: case OpKind::Concat: case OpKind::OneHot: case OpKind::Take:
    case OpKind::RandomUniform: case OpKind::Iota: case OpKind::Dropout: case OpKind::Loop:
    case OpKind::DynamicIndex: case OpKind::DynamicUpdate: case OpKind::MatMul: case OpKind::Einsum:
      return true;
    default: break;
  }
  if (ir::opInfo(k).cls == OpClass::Collective) return true;
  return isElementwise(k) && lowersElementwise(k);
}

ScopedHiddenLowering::ScopedHiddenLowering(OpKind k) : kind_(k) { hiddenKinds().push_back(k); }

ScopedHiddenLowering::~ScopedHiddenLowering() {
  auto& h = hiddenKinds();
  h.erase(std::find(h.begin(), h.end(), kind_));
}

std::string hiddenLoweringsKey() {
  std::string s;
  for (OpKind k : hiddenKinds()) s += std::to_string(int(k)) + ",";
  return s.empty() ? s : ";hidden=" + s;
}

OpLowering::OpLowering(const ir::Function& f, const BufferPlan& plan, const JitOptions& opts, llvm::Module& m)
    : GemmEmitter(f, plan, opts, m) {
  for (size_t i = 0; i < f_.ops.size(); ++i) defIndex_[f_.ops[i]->result] = i;
}

void OpLowering::lower(const std::string& symbol) {
  symbol_ = symbol;
  beginFunction(symbol);
  for (size_t i = 0; i < f_.ops.size(); ++i) {
    if (!plan_.live[i] || plan_.fused[i]) continue;
    if (plan_.sideOutput[i]) {  // stored by the loop it is fused into
      bindStorage(f_.ops[i]->result);
      continue;
    }
    opIndex_ = (int64_t)i;
    newScope();
    const ir::Op& op = *f_.ops[i];
    bindStorage(op.result);
    const bool kernel = inKernel(op);
    llvm::Value* t0 = timed(op, kernel) ? b_.CreateIntrinsic(llvm::Intrinsic::readcyclecounter, {}, {}) : nullptr;
    if (kernel) emitKernelCall(op);
    else emitOp(op);
    if (t0) {
      llvm::Value* t1 = b_.CreateIntrinsic(llvm::Intrinsic::readcyclecounter, {}, {});
      b_.CreateCall(helper("gsl_rt_profile", b_.getVoidTy(), {ptr_, i64_, i64_}),
                    {ctx_, i64c(opIndex_), b_.CreateSub(t1, t0)});
    }
  }
  finishFunction();
}

// Whether the op timer (JitOptions::profileKernels) times `op`: every op
// with code of its own (a kernel, or a helper call: collectives, the
// fallback, random numbers), but not a param (a pointer lookup) or a loop
// (its body's ops are timed).
bool OpLowering::timed(const ir::Op& op, bool kernel) const {
  if (!opts_.profileKernels) return false;
  switch (op.kind) {
    case OpKind::Param: case OpKind::Loop: return false;
    case OpKind::Constant: case OpKind::Reshape: case OpKind::Slice: case OpKind::Transpose:
    case OpKind::DynamicIndex:
      return kernel;
    default: return true;
  }
}

// The code of `op` at the builder's position (its result's storage
// already bound).
void OpLowering::emitOp(const ir::Op& op) {
  IRValue r = op.result;
  const Storage& s = plan_.storage.at(r);
  if (plan_.fallback[opIndex_]) return emitFallback(op);
  switch (op.kind) {
    case OpKind::Param: return emitParam(op, s);
    case OpKind::Constant:
      if (s.kind != Storage::None)
        fill(ptr(r), r->type.numElements(),
             r->type.dtype == DType::F32 ? f32c((float)constantValue(op))
                                         : b_.getInt32(constantWord(op, r->type.dtype)));
      return;
    case OpKind::Reshape:
      if (s.kind != Storage::Alias) copyWords(ptr(r), ptr(op.operands[0]), {r->type.numElements()}, {1}, {1});
      return;
    case OpKind::Slice:
      if (s.kind != Storage::Alias) emitSlice(op);
      return;
    case OpKind::Sum: case OpKind::Mean: case OpKind::Max: case OpKind::Min: return emitReduce(op);
    case OpKind::ArgMax: return emitArgMax(op);
    case OpKind::Softmax: case OpKind::LogSoftmax: return emitSoftmax(op);
    case OpKind::LayerNorm: return emitLayerNorm(op);
    case OpKind::CumSum: return emitCumSum(op);
    case OpKind::Transpose:  // folded into the GEMMs that read it (BufferPlan::strided): no code
      if (s.kind != Storage::Alias) emitTranspose(op);
      return;
    case OpKind::Concat: return emitConcat(op);
    case OpKind::OneHot: return emitOneHot(op);
    case OpKind::Take: return emitTake(op);
    case OpKind::RandomUniform: return emitRandom(op);
    case OpKind::Iota: return emitIota(op);
    case OpKind::Dropout: return emitDropout(op);
    case OpKind::Loop: return LoopLowering::emitLoop(*this, op);
    case OpKind::DynamicIndex: return LoopLowering::emitDynamicIndex(*this, op);
    case OpKind::DynamicUpdate: return LoopLowering::emitDynamicUpdate(*this, op);
    case OpKind::MatMul: return emitGemm(op, *plan_.gemm[opIndex_]);
    case OpKind::Einsum:
      if (plan_.gemm[opIndex_]) return emitGemm(op, *plan_.gemm[opIndex_]);
      return emitEinsumLoops(op);
    default: break;
  }
  if (op.info().cls == OpClass::Collective) return emitCollective(op);
  // hasLowering lists no other kind (an op without generated code is
  // planned as a fallback, above).
  GSL_ASSERT(isElementwise(op.kind), std::string("jit: hasLowering claims code for ") + op.info().mnemonic +
                                         ", which emitOp does not dispatch");
  emitElementwise(op);
}

// An op the buffer plan sends to the reference kernel (no lowering,
// JitOptions::fallbackOps, a dtype the generated code does not handle):
// backend::evalOp, through gsl_rt_eval_op, on the operands' buffers.
void OpLowering::emitFallback(const ir::Op& op) {
  if (op.kind == OpKind::MatMul && op.result->type.dtype == DType::BF16 && opts_.bf16Dot) {
    // bf16 @ bf16 by vdpbf16ps (BF16Gemm.h); chosen at JIT time.
    llvm::Value* st =
        b_.CreateCall(helper("gsl_rt_bf16_matmul", i32_, {ptr_, i64_, ptr_, ptr_, ptr_}),
                      {ctx_, i64c(opIndex_), ptr(op.operands[0]), ptr(op.operands[1]), ptr(op.result)});
    return checkStatus(st);
  }
  llvm::Value* ins = entryAlloca(op.operands.size());
  for (size_t i = 0; i < op.operands.size(); ++i)
    b_.CreateStore(ptr(op.operands[i]), b_.CreateConstInBoundsGEP1_64(ptr_, ins, i));
  llvm::Value* st = b_.CreateCall(helper("gsl_rt_eval_op", i32_, {ptr_, i64_, ptr_, ptr_}),
                                  {ctx_, i64c(opIndex_), ins, ptr(op.result)});
  checkStatus(st);
}

// An array of n pointers in the entry block's stack frame.
llvm::Value* OpLowering::entryAlloca(size_t n) {
  llvm::IRBuilder<> eb(entry_, entry_->begin());
  return eb.CreateAlloca(ptr_, b_.getInt64(std::max<size_t>(n, 1)));
}

void OpLowering::emitParam(const ir::Op& op, const Storage& s) {
  llvm::Value* p = b_.CreateCall(helper("gsl_rt_param", ptr_, {ptr_, i64_}), {ctx_, i64c(opIndex_)});
  auto* ok = llvm::BasicBlock::Create(c_, "param.ok", fn_);
  b_.CreateCondBr(b_.CreateIsNull(p), error_, ok);
  b_.SetInsertPoint(ok);
  if (s.kind == Storage::Param) ptrs_[op.result] = p;
  else b_.CreateMemCpy(ptr(op.result), llvm::Align(4), p, llvm::Align(4), bytesOf(op.result));
}

void OpLowering::emitRandom(const ir::Op& op) {
  llvm::Value* seed = loadIn(i32_, ptr(op.operands[0]), i64c(0));
  b_.CreateCall(helper("gsl_rt_random_uniform", b_.getVoidTy(), {ptr_, i32_, ptr_, i64_}),
                {ctx_, seed, ptr(op.result), i64c(op.result->type.numElements())});
}

// dropout: one helper call (the reference kernel's loop, no copies);
// without a key, a copy.
void OpLowering::emitDropout(const ir::Op& op) {
  if (op.operands.size() < 2)
    return copyWords(ptr(op.result), ptr(op.operands[0]), {op.result->type.numElements()}, {1}, {1});
  b_.CreateCall(helper("gsl_rt_dropout", b_.getVoidTy(), {ptr_, i64_, ptr_, ptr_, ptr_}),
                {ctx_, i64c(opIndex_), ptr(op.operands[0]), ptr(op.operands[1]), ptr(op.result)});
}

void OpLowering::emitCollective(const ir::Op& op) {
  llvm::Value* st = b_.CreateCall(helper("gsl_rt_collective", i32_, {ptr_, i64_, ptr_, ptr_}),
                                  {ctx_, i64c(opIndex_), ptr(op.operands[0]), ptr(op.result)});
  checkStatus(st);
}

KernelCounts lowerOps(const ir::Function& f, const BufferPlan& plan, const JitOptions& opts,
                      const std::string& symbol, llvm::Module& m) {
  OpLowering l(f, plan, opts, m);
  l.lower(symbol);
  return {l.kernelsEmitted(), l.kernelCalls(), l.takeOrigins()};
}

}  // namespace gsl::backend::jit
