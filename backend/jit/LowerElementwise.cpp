// How is an elementwise op emitted? One loop nest over its result, in
// which the op and the producers the buffer plan fused into it are
// evaluated as an expression tree per element (OpLowering's elementwise
// part, Lowering.h).
#include <llvm/IR/BasicBlock.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/Intrinsics.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/jit/Lowering.h"
#include "support/BF16.h"
#include "support/Diagnostics.h"

namespace gsl::backend::jit {

using ir::DType;
using ir::OpClass;
using ir::OpKind;
using ir::Shape;

// Materialised values read by the inline evaluation of `op` (fused
// operands expanded, constants skipped), in first-seen order.
void OpLowering::treeLeaves(const ir::Op& op, std::vector<IRValue>& leaves) {
  for (IRValue v : op.operands) treeLeavesOf(v, leaves);
}

void OpLowering::treeLeavesOf(IRValue v, std::vector<IRValue>& leaves) {
  if (v->def && v->def->kind == OpKind::Constant) return;
  if (v->def && isFused(v)) {
    treeLeaves(*v->def, leaves);
    return;
  }
  if (std::find(leaves.begin(), leaves.end(), v) == leaves.end()) leaves.push_back(v);
}

bool OpLowering::isFused(IRValue v) {
  auto it = defIndex_.find(v);
  return it != defIndex_.end() && (plan_.fused[it->second] || plan_.sideOutput[it->second]);
}

bool OpLowering::isSideOutput(IRValue v) {
  auto it = defIndex_.find(v);
  return it != defIndex_.end() && plan_.sideOutput[it->second];
}

// The side outputs in `op`'s fused tree.
void OpLowering::sideOutputsOf(const ir::Op& op, std::vector<IRValue>& out) {
  for (IRValue v : op.operands) {
    if (!v->def || !isFused(v)) continue;
    if (isSideOutput(v)) out.push_back(v);
    sideOutputsOf(*v->def, out);
  }
}

llvm::Value* OpLowering::evalValue(IRValue v, const LeafOffsets& offs) {
  if (v->def && v->def->kind == OpKind::Constant) {
    if (v->type.dtype == DType::F32) return f32c((float)constantValue(*v->def));
    if (v->type.dtype == DType::BF16) return f32c(roundBF16((float)constantValue(*v->def)));
    return b_.getInt32(constantWord(*v->def, v->type.dtype));
  }
  auto it = offs.find(v);
  if (it != offs.end() && v->type.dtype == DType::BF16) return widenBF16(loadIn(i16_, ptr(v), it->second));
  if (it != offs.end()) return loadIn(elemType(v->type.dtype), ptr(v), it->second);
  GSL_ASSERT(v->def && isFused(v), "jit: tree operand is neither a leaf nor fused");
  llvm::Value* r = evalOp(*v->def, offs);
  if (isSideOutput(v)) {
    GSL_ASSERT(treeOutOffset_, "jit: a side output outside an elementwise loop");
    store(r, ptr(v), treeOutOffset_);
  }
  return r;
}

// The value of a tree's op at the current index. bf16 values are carried
// as f32 (widened exactly); an op with a bf16 operand computes in f32 as
// the reference kernel does, and a bf16 result is rounded once (so a
// fused chain rounds after each op, as the interpreter does).
llvm::Value* OpLowering::evalOp(const ir::Op& op, const LeafOffsets& offs) {
  std::vector<llvm::Value*> in;
  for (IRValue v : op.operands) in.push_back(evalValue(v, offs));
  bool bf16 = op.result->type.dtype == DType::BF16;
  for (IRValue v : op.operands) bf16 |= v->type.dtype == DType::BF16;
  if (bf16) {
    llvm::Value* r = evalBF16(op, in);
    return op.result->type.dtype == DType::BF16 ? widenBF16(narrowBF16(r)) : r;
  }
  const DType dt = op.operands[0]->type.dtype;
  switch (ir::opInfo(op.kind).cls) {
    case OpClass::Unary: return unary(op, dt, in[0]);
    case OpClass::Binary: return binary(op.kind, dt, in[0], in[1]);
    case OpClass::Ternary: return b_.CreateSelect(b_.CreateICmpNE(in[0], b_.getInt32(0)), in[1], in[2]);
    default: break;
  }
  if (op.kind == OpKind::Broadcast) return in[0];  // the leaves' strides broadcast
  GSL_ASSERT(false, std::string("jit: not an elementwise op: ") + op.info().mnemonic);
  return nullptr;
}

// An elementwise op with a bf16 operand or result (BufferPlan's
// generatedBF16 lists which), its operands as f32 (bf16 widened, i32 and
// bool as words), in f32. exp, tanh, log and pow call the C library's
// expf, tanhf, logf and powf, and gelu and sigmoid the reference kernel's
// own functions, so that the f32 values, and so the rounded bf16 ones,
// are the interpreter's bit for bit (the f32 path's inline exp differs
// from expf by an ulp or so); sqrt, rsqrt, erf, exact gelu, the
// comparisons and the rest are the f32 path's, which already are.
llvm::Value* OpLowering::evalBF16(const ir::Op& op, const std::vector<llvm::Value*>& in) {
  switch (op.kind) {
    case OpKind::Exp: return callPureF32("expf", in[0]);
    case OpKind::Tanh: return callPureF32("tanhf", in[0]);
    case OpKind::Gelu: return callPureF32("gsl_rt_gelu", in[0]);
    case OpKind::Log: return callPureF32("logf", in[0]);
    case OpKind::Sigmoid: return callPureF32("gsl_rt_sigmoid", in[0]);
    case OpKind::Pow: return callPureF32("powf", in[0], in[1]);
    case OpKind::Cast: {
      const DType from = op.operands[0]->type.dtype, to = op.attrs.getDType("dtype");
      if (from == DType::BF16 && to == DType::BF16) return in[0];
      if (to == DType::BF16) return from == DType::F32 ? in[0] : b_.CreateSIToFP(in[0], f32_);  // i32, bool
      // From bf16 (widened): as a cast from f32.
      return unary(op, DType::F32, in[0]);
    }
    case OpKind::Where: return b_.CreateSelect(b_.CreateICmpNE(in[0], b_.getInt32(0)), in[1], in[2]);
    case OpKind::Broadcast: return in[0];
    default: break;
  }
  if (ir::opInfo(op.kind).cls == OpClass::Unary) return unary(op, DType::F32, in[0]);
  return binary(op.kind, DType::F32, in[0], in[1]);
}

// The kinds unary, binary and evalOp below generate (each on the dtypes
// its type rule admits); keep in step with their switches.
bool lowersElementwise(OpKind k) {
  switch (k) {
    case OpKind::Copy: case OpKind::Neg: case OpKind::Abs: case OpKind::Relu: case OpKind::Exp: case OpKind::Log:
    case OpKind::Sqrt: case OpKind::Rsqrt: case OpKind::Tanh: case OpKind::Gelu: case OpKind::Erf:
    case OpKind::GeluExact: case OpKind::Sigmoid: case OpKind::Not: case OpKind::Cast:
    case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Div: case OpKind::Pow: case OpKind::Mod:
    case OpKind::FloorDiv: case OpKind::Maximum: case OpKind::Minimum: case OpKind::Eq: case OpKind::Ne:
    case OpKind::Lt: case OpKind::Le: case OpKind::Gt: case OpKind::Ge: case OpKind::And: case OpKind::Or:
    case OpKind::Where: case OpKind::Broadcast:
      return true;
    default: return false;
  }
}

// fn(x) (or fn(x, y)) for a C function of f32s to f32 without side
// effects (declared so, which lets LLVM hoist and vectorise around the
// call).
llvm::Value* OpLowering::callPureF32(const char* fn, llvm::Value* x, llvm::Value* y) {
  std::vector<llvm::Type*> params{f32_};
  std::vector<llvm::Value*> args{x};
  if (y) params.push_back(f32_), args.push_back(y);
  llvm::FunctionCallee c = helper(fn, f32_, params);
  if (auto* f = llvm::dyn_cast<llvm::Function>(c.getCallee())) {
    f->setDoesNotAccessMemory();
    f->setWillReturn();
  }
  return b_.CreateCall(c, args);
}

llvm::Value* OpLowering::unary(const ir::Op& op, DType dt, llvm::Value* x) {
  const bool f = dt == DType::F32;
  switch (op.kind) {
    case OpKind::Copy: return x;
    case OpKind::Neg: return f ? b_.CreateFNeg(x) : b_.CreateSub(b_.getInt32(0), x);
    case OpKind::Abs:
      return f ? b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x)
               : b_.CreateSelect(b_.CreateICmpSLT(x, b_.getInt32(0)), b_.CreateSub(b_.getInt32(0), x), x);
    case OpKind::Relu:  // v > 0 || isnan(v) ? v : 0
      return f ? b_.CreateSelect(b_.CreateFCmpUGT(x, f32c(0.0f)), x, f32c(0.0f))
               : b_.CreateSelect(b_.CreateICmpSGT(x, b_.getInt32(0)), x, b_.getInt32(0));
    case OpKind::Exp: return math_.exp(x);
    case OpKind::Log: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::log, x);
    case OpKind::Sqrt: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x);
    case OpKind::Rsqrt: return b_.CreateFDiv(f32c(1.0f), b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x));
    case OpKind::Tanh: return math_.tanh(x);
    case OpKind::Gelu: return math_.gelu(x);
    case OpKind::Erf: return callPureF32("erff", x);  // the C library's erff, as the reference kernel (std::erf)
    case OpKind::GeluExact: {  // 0.5 x (1 + erff(x / sqrt(2))), as the reference kernel
      llvm::Value* e = callPureF32("erff", b_.CreateFMul(x, f32c((float)M_SQRT1_2)));
      return b_.CreateFMul(b_.CreateFMul(f32c(0.5f), x), b_.CreateFAdd(f32c(1.0f), e));
    }
    case OpKind::Sigmoid: return math_.sigmoid(x);  // one exp(-|x|)
    case OpKind::Not: return boolWord(b_.CreateICmpEQ(x, b_.getInt32(0)));
    case OpKind::Cast: {
      DType to = op.attrs.getDType("dtype");
      if (to == dt) return x;
      if (dt == DType::F32) {
        if (to == DType::Bool) return boolWord(b_.CreateFCmpUNE(x, f32c(0.0f)));
        // Truncation toward zero, saturating, NaN -> 0 (as castF32ToI32).
        return b_.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {i32_, f32_}, {x});
      }
      if (to == DType::F32) return b_.CreateSIToFP(x, f32_);
      return to == DType::Bool ? boolWord(b_.CreateICmpNE(x, b_.getInt32(0))) : x;
    }
    default: break;
  }
  GSL_ASSERT(false, std::string("jit: not a unary op: ") + op.info().mnemonic);
  return nullptr;
}

llvm::Value* OpLowering::binary(OpKind k, DType dt, llvm::Value* a, llvm::Value* b) {
  llvm::Value* zero = b_.getInt32(0);
  switch (k) {
    case OpKind::And: return boolWord(b_.CreateAnd(b_.CreateICmpNE(a, zero), b_.CreateICmpNE(b, zero)));
    case OpKind::Or: return boolWord(b_.CreateOr(b_.CreateICmpNE(a, zero), b_.CreateICmpNE(b, zero)));
    default: break;
  }
  if (dt == DType::F32) {
    switch (k) {
      case OpKind::Add: return b_.CreateFAdd(a, b);
      case OpKind::Sub: return b_.CreateFSub(a, b);
      case OpKind::Mul: return b_.CreateFMul(a, b);
      case OpKind::Div: return b_.CreateFDiv(a, b);
      case OpKind::Pow: return b_.CreateBinaryIntrinsic(llvm::Intrinsic::pow, a, b);
      case OpKind::Mod: {  // floor-mod: fmod, then the sign of the divisor
        llvm::Value* r = b_.CreateFRem(a, b);
        llvm::Value* fix = b_.CreateICmpNE(b_.CreateFCmpOLT(r, f32c(0.0f)), b_.CreateFCmpOLT(b, f32c(0.0f)));
        llvm::Value* adj = b_.CreateSelect(fix, b_.CreateFAdd(r, b), r);
        llvm::Value* signedZero = b_.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, f32c(0.0f), b);
        return b_.CreateSelect(b_.CreateFCmpOEQ(r, f32c(0.0f)), signedZero, adj);
      }
      case OpKind::Maximum: case OpKind::Minimum: {  // NaN if either is NaN, else std::max/min
        llvm::Value* pick = k == OpKind::Maximum ? b_.CreateSelect(b_.CreateFCmpOLT(a, b), b, a)
                                                 : b_.CreateSelect(b_.CreateFCmpOLT(b, a), b, a);
        llvm::Value* nan = b_.CreateFCmpUNO(a, b);
        return b_.CreateSelect(nan, f32c(std::numeric_limits<float>::quiet_NaN()), pick);
      }
      case OpKind::Eq: return boolWord(b_.CreateFCmpOEQ(a, b));
      case OpKind::Ne: return boolWord(b_.CreateFCmpUNE(a, b));
      case OpKind::Lt: return boolWord(b_.CreateFCmpOLT(a, b));
      case OpKind::Le: return boolWord(b_.CreateFCmpOLE(a, b));
      case OpKind::Gt: return boolWord(b_.CreateFCmpOGT(a, b));
      case OpKind::Ge: return boolWord(b_.CreateFCmpOGE(a, b));
      default: break;
    }
  } else {
    switch (k) {
      case OpKind::Add: return b_.CreateAdd(a, b);  // wrapping
      case OpKind::Sub: return b_.CreateSub(a, b);
      case OpKind::Mul: return b_.CreateMul(a, b);
      case OpKind::Pow: return b_.CreateCall(helper("gsl_rt_pow_i32", i32_, {i32_, i32_}), {a, b});
      case OpKind::Mod: {  // floor-mod; 0 for b == 0 and b == -1 (never traps)
        llvm::Value* trivial = b_.CreateOr(b_.CreateICmpEQ(b, zero), b_.CreateICmpEQ(b, b_.getInt32(-1)));
        llvm::Value* d = b_.CreateSelect(trivial, b_.getInt32(1), b);
        llvm::Value* r = b_.CreateSRem(a, d);
        llvm::Value* fix = b_.CreateAnd(b_.CreateICmpNE(r, zero),
                                        b_.CreateICmpNE(b_.CreateICmpSLT(r, zero), b_.CreateICmpSLT(d, zero)));
        r = b_.CreateSelect(fix, b_.CreateAdd(r, d), r);
        return b_.CreateSelect(trivial, zero, r);
      }
      case OpKind::FloorDiv: {  // floor division; 0 for b == 0, wrapping -a for b == -1 (as floorDivI32)
        llvm::Value* byZero = b_.CreateICmpEQ(b, zero);
        llvm::Value* byMinus1 = b_.CreateICmpEQ(b, b_.getInt32(-1));
        llvm::Value* d = b_.CreateSelect(b_.CreateOr(byZero, byMinus1), b_.getInt32(1), b);
        llvm::Value* q = b_.CreateSDiv(a, d);
        llvm::Value* r = b_.CreateSRem(a, d);
        llvm::Value* fix = b_.CreateAnd(b_.CreateICmpNE(r, zero),
                                        b_.CreateICmpNE(b_.CreateICmpSLT(r, zero), b_.CreateICmpSLT(d, zero)));
        q = b_.CreateSelect(fix, b_.CreateSub(q, b_.getInt32(1)), q);
        q = b_.CreateSelect(byMinus1, b_.CreateSub(zero, a), q);
        return b_.CreateSelect(byZero, zero, q);
      }
      case OpKind::Maximum: return b_.CreateSelect(b_.CreateICmpSLT(a, b), b, a);
      case OpKind::Minimum: return b_.CreateSelect(b_.CreateICmpSLT(b, a), b, a);
      case OpKind::Eq: return boolWord(b_.CreateICmpEQ(a, b));
      case OpKind::Ne: return boolWord(b_.CreateICmpNE(a, b));
      case OpKind::Lt: return boolWord(b_.CreateICmpSLT(a, b));
      case OpKind::Le: return boolWord(b_.CreateICmpSLE(a, b));
      case OpKind::Gt: return boolWord(b_.CreateICmpSGT(a, b));
      case OpKind::Ge: return boolWord(b_.CreateICmpSGE(a, b));
      default: break;
    }
  }
  GSL_ASSERT(false, std::string("jit: ") + ir::opName(k) + " is not defined on " + ir::dtypeName(dt));
  return nullptr;
}

// An elementwise op and the fused ops under it: one loop nest over the
// result, leaves read with broadcast strides.
void OpLowering::emitElementwise(const ir::Op& op) {
  IRValue r = op.result;
  Shape space = r->type.shape;
  std::vector<IRValue> leaves;
  treeLeaves(op, leaves);
  std::vector<Strides> st;
  for (IRValue v : leaves) st.push_back(bcastStrides(v->type.shape, space));
  st.push_back(rowMajorStrides(space));
  std::vector<Strides*> sp;
  for (auto& s : st) sp.push_back(&s);
  collapse(space, sp);
  llvm::Value* out = ptr(r);
  auto body = [&] {
    map(space, st, [&](const std::vector<llvm::Value*>&, const std::vector<llvm::Value*>& offs) {
      LeafOffsets lo;
      for (size_t k = 0; k < leaves.size(); ++k) lo[leaves[k]] = offs[k];
      treeOutOffset_ = offs.back();
      llvm::Value* v = evalOp(op, lo);
      treeOutOffset_ = nullptr;
      store(r->type.dtype == DType::BF16 ? narrowBF16(v) : v, out, offs.back());
    });
  };
  // Side outputs are results too: streamed alike when all are aligned.
  std::vector<IRValue> sides;
  sideOutputsOf(op, sides);
  // A large result of the function, written once: when its buffer is
  // 64-byte aligned (results are, unless a loop writes a row of one), a
  // copy of the loop that knows it, whose vector stores become
  // non-temporal (markStreamingStores): the result's cache lines are not
  // read from memory before they are overwritten.
  if (plan_.storage.at(r).kind != Storage::Output || bytesOf(r) < kStreamBytes) return body();
  auto* aligned = llvm::BasicBlock::Create(c_, "stream", fn_);
  auto* other = llvm::BasicBlock::Create(c_, "stream.unaligned", fn_);
  auto* done = llvm::BasicBlock::Create(c_, "stream.end", fn_);
  llvm::Value* bits = b_.CreatePtrToInt(out, i64_);
  for (IRValue sv : sides) bits = b_.CreateOr(bits, b_.CreatePtrToInt(ptr(sv), i64_));
  b_.CreateCondBr(b_.CreateICmpEQ(b_.CreateAnd(bits, i64c(63)), i64c(0)), aligned, other);
  b_.SetInsertPoint(aligned);
  b_.CreateAlignmentAssumption(m_.getDataLayout(), out, 64);
  for (IRValue sv : sides) b_.CreateAlignmentAssumption(m_.getDataLayout(), ptr(sv), 64);
  llvm::MDNode* scope = scope_;
  newScope(/*stream=*/true);
  body();
  scope_ = scope;
  b_.CreateBr(done);
  b_.SetInsertPoint(other);
  body();
  b_.CreateBr(done);
  b_.SetInsertPoint(done);
}

}  // namespace gsl::backend::jit
