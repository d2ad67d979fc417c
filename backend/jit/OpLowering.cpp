// Op lowering: the LLVM IR of each op kind, emitted into straight-line
// code of loop nests built with IRBuilder.
//
// What is generated and what is called:
//   generated: every elementwise op (unary, binary, where, cast, compare,
//     broadcast) with NumPy broadcasting as stride-0 loads, together with
//     the producers the buffer plan fused into it; reductions
//     (sum/mean/max/min/argmax); softmax, log_softmax, layer_norm, cumsum;
//     transpose, concat, slice, one_hot, take (with its bounds check);
//     constants; matmul and einsum: a vectorised GEMM kernel (batched over
//     any strides; GemmKernel.cpp), or a loop nest for einsums that are not
//     a GEMM.
//   loops (LowerLoop.cpp): the body compiled once as a function of its
//     own, run once per iteration by gsl_rt_loop; dynamic_index and
//     dynamic_update as row copies.
//   aliased (no code, no buffer; BufferPlan.h): reshape, slice of a
//     contiguous block, params (read in place from the param store).
//   called (extern "C", Runtime.cpp): param lookup, random_uniform, dropout
//     (Philox, backend/Random.h), collectives (backend::evalCollective),
//     take's error report, integer pow, Eigen for large GEMMs whose
//     layout the kernel cannot read (see the measurement in
//     Contraction.cpp), and backend::evalOp for any op this file does not
//     know (ops added to the op table later keep working, at interpreter
//     speed).
//
// Numerics follow backend/Kernels.cpp: f32 sums and means accumulate in
// double, max/min propagate NaN, casts saturate, i32 arithmetic wraps, and
// the same formula for sigmoid (gelu: an equal one, 0.5 x (1 + tanh u) =
// x / (1 + e^-2u)). Transcendentals are LLVM intrinsics
// (llvm.log/sqrt/pow.f32); exp is a polynomial in straight-line arithmetic
// (evaluated by FMA where the host has it) and tanh, sigmoid and gelu are
// built from it; erf calls the C library's erff, as the reference kernel.
#include "backend/jit/OpLowering.h"

#include <llvm/IR/BasicBlock.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/StructuralHash.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Transforms/Utils/FunctionComparator.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <unordered_map>

#include "backend/jit/GemmKernel.h"
#include "backend/jit/LowerLoop.h"
#include "support/BF16.h"
#include "support/Diagnostics.h"

namespace gsl::backend::jit {

namespace {

using ir::DType;
using ir::OpClass;
using ir::OpKind;
using ir::Shape;

// The constant op's value converted to its element type, as Kernels.cpp.
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

class OpLowering : public GemmEmitter {
 public:
  OpLowering(const ir::Function& f, const BufferPlan& plan, const JitOptions& opts, llvm::Module& m)
      : GemmEmitter(f, plan, opts, m) {
    for (size_t i = 0; i < f_.ops.size(); ++i) defIndex_[f_.ops[i]->result] = i;
  }

  void lower(const std::string& symbol) {
    symbol_ = symbol;
    beginFunction(symbol);
    for (size_t i = 0; i < f_.ops.size(); ++i) {
      if (!plan_.live[i] || plan_.fused[i]) continue;
      opIndex_ = (int64_t)i;
      newScope();
      const ir::Op& op = *f_.ops[i];
      bindStorage(op.result);
      if (inKernel(op)) emitKernelCall(op);
      else emitOp(op);
    }
    finishFunction();
  }

  size_t kernelsEmitted() const { return kernelCount_; }
  size_t kernelCalls() const { return kernelCalls_; }
  std::vector<KernelOrigin> takeOrigins() { return std::move(origins_); }

 private:
  std::unordered_map<IRValue, size_t> defIndex_;  // op index of every op result

  // -------------------------------------------------------------- kernels
  //
  // Every op with a loop nest of its own (a fusion group: an op and the
  // producers fused into it; a GEMM; a reduction, ...) is generated as a
  // kernel function of its own,
  //
  //   internal i32 @symbol.kN(ptr %ctx, i64 %op, ptr %temp, ptr %buf0, ...)
  //
  // taking the base pointers of the buffers it reads and writes (in the
  // order the op first uses them), its temp space and its op index; the
  // top-level function binds the buffers and calls the kernels in order.
  // LLVM's optimiser then works on many small functions instead of one
  // function the size of the program (whose analyses grow faster than
  // linearly), and kernels that are the same function (the same ops,
  // shapes, attributes and plan: a Transformer's layers) are emitted once:
  // a new kernel is compared with the earlier ones of the same structural
  // hash (LLVM's FunctionComparator, the MergeFunctions pass's equality)
  // and dropped for the earlier one when equal.
  //
  // Kept in the top-level function: params (their pointer is bound for
  // later ops), collectives, random_uniform and fallback calls (one helper
  // call each), loops (a helper call running the body's function), and ops
  // that alias their operand (no code).

  bool inKernel(const ir::Op& op) {
    if (plan_.fallback[opIndex_]) return false;
    const Storage& s = plan_.storage.at(op.result);
    switch (op.kind) {
      case OpKind::Param: case OpKind::RandomUniform: case OpKind::Dropout: return false;
      // A loop has several results and its body is a function of its own
      // already (LowerLoop.cpp), run by a runtime helper.
      case OpKind::Loop: return false;
      case OpKind::Constant: return s.kind != Storage::None;
      case OpKind::Reshape: case OpKind::Slice: return s.kind != Storage::Alias;
      default: break;
    }
    return op.info().cls != OpClass::Collective;
  }

  // The materialised values a kernel of `op` reads (fused producers
  // expanded), then its result, each once.
  void kernelBuffers(IRValue v, std::vector<IRValue>& out) {
    if (std::find(out.begin(), out.end(), v) != out.end()) return;
    if (plan_.storage.at(v).kind != Storage::None) {
      out.push_back(v);
      return;
    }
    if (v->def && isFused(v))
      for (IRValue o : v->def->operands) kernelBuffers(o, out);
  }

  void emitKernelCall(const ir::Op& op) {
    std::vector<IRValue> bufs;
    for (IRValue v : op.operands) kernelBuffers(v, bufs);
    if (std::find(bufs.begin(), bufs.end(), op.result) == bufs.end()) bufs.push_back(op.result);

    // The kernel, built with the emitter's state switched to it.
    std::vector<llvm::Type*> params = {ptr_, i64_, ptr_};
    params.insert(params.end(), bufs.size(), ptr_);
    auto* fty = llvm::FunctionType::get(i32_, params, false);
    auto* k = llvm::Function::Create(fty, llvm::Function::InternalLinkage,
                                     symbol_ + ".k" + std::to_string(kernelCount_), m_);
    k->addFnAttr(llvm::Attribute::NoUnwind);
    k->addFnAttr(llvm::Attribute::NoInline);
    for (unsigned a = 0; a < params.size(); ++a)
      if (a != 1) k->addParamAttr(a, llvm::Attribute::NoCapture);

    llvm::Function* topFn = fn_;
    llvm::BasicBlock *topEntry = entry_, *topError = error_;
    llvm::Value* topCtx = ctx_;
    llvm::IRBuilderBase::InsertPoint ip = b_.saveIP();
    std::unordered_map<IRValue, llvm::Value*> topPtrs = std::move(ptrs_);
    ptrs_.clear();

    fn_ = k;
    entry_ = llvm::BasicBlock::Create(c_, "entry", k);
    error_ = llvm::BasicBlock::Create(c_, "error", k);
    b_.SetInsertPoint(error_);
    b_.CreateRet(b_.getInt32(1));
    b_.SetInsertPoint(entry_);
    ctx_ = k->getArg(0);
    opIndexArg_ = k->getArg(1);
    temp_ = k->getArg(2);
    for (size_t j = 0; j < bufs.size(); ++j) ptrs_[bufs[j]] = k->getArg(3 + (unsigned)j);
    emitOp(op);
    b_.CreateRet(b_.getInt32(0));
    {
      std::string err;
      llvm::raw_string_ostream os(err);
      GSL_ASSERT(!llvm::verifyFunction(*k, &os), "jit: generated invalid LLVM IR for a kernel of @" + f_.name + ": " + err);
    }

    fn_ = topFn;
    entry_ = topEntry;
    error_ = topError;
    ctx_ = topCtx;
    opIndexArg_ = nullptr;
    temp_ = nullptr;
    ptrs_ = std::move(topPtrs);
    b_.restoreIP(ip);

    llvm::Function* callee = dedupKernel(k);
    if (callee == k) {
      originOf_[k] = origins_.size();
      origins_.push_back({k->getName().str(), op.loc, op.kind, 0});
    } else {
      origins_[originOf_.at(callee)].sharedBy++;
    }
    std::vector<llvm::Value*> args = {ctx_, i64c(opIndex_), tempPtr(0)};
    for (IRValue v : bufs) args.push_back(ptr(v));
    checkStatus(b_.CreateCall(callee, args));
    kernelCalls_++;
  }

  // `k`, or an earlier kernel equal to it (then `k` is erased).
  llvm::Function* dedupKernel(llvm::Function* k) {
    const llvm::IRHash h = llvm::StructuralHash(*k, /*DetailedHash=*/true);
    std::vector<llvm::Function*>& same = kernels_[h];
    for (llvm::Function* earlier : same)
      if (llvm::FunctionComparator(earlier, k, &globalNumbers_).compare() == 0) {
        k->eraseFromParent();
        return earlier;
      }
    same.push_back(k);
    kernelCount_++;
    return k;
  }

  std::string symbol_;
  std::unordered_map<llvm::IRHash, std::vector<llvm::Function*>> kernels_;
  std::unordered_map<llvm::Function*, size_t> originOf_;  // kernel -> its row of origins_
  llvm::GlobalNumberState globalNumbers_;
  size_t kernelCount_ = 0, kernelCalls_ = 0;

  // -------------------------------------------------------------- expression trees

  // Materialised values read by the inline evaluation of `op` (fused
  // operands expanded, constants skipped), in first-seen order.
  void treeLeaves(const ir::Op& op, std::vector<IRValue>& leaves) {
    for (IRValue v : op.operands) treeLeavesOf(v, leaves);
  }
  void treeLeavesOf(IRValue v, std::vector<IRValue>& leaves) {
    if (v->def && v->def->kind == OpKind::Constant) return;
    if (v->def && isFused(v)) {
      treeLeaves(*v->def, leaves);
      return;
    }
    if (std::find(leaves.begin(), leaves.end(), v) == leaves.end()) leaves.push_back(v);
  }
  bool isFused(IRValue v) {
    auto it = defIndex_.find(v);
    return it != defIndex_.end() && plan_.fused[it->second];
  }

  // Element offsets of the leaves at the current index.
  using LeafOffsets = std::unordered_map<IRValue, llvm::Value*>;

  llvm::Value* evalValue(IRValue v, const LeafOffsets& offs) {
    if (v->def && v->def->kind == OpKind::Constant) {
      if (v->type.dtype == DType::F32) return f32c((float)constantValue(*v->def));
      if (v->type.dtype == DType::BF16) return f32c(roundBF16((float)constantValue(*v->def)));
      return b_.getInt32(constantWord(*v->def, v->type.dtype));
    }
    auto it = offs.find(v);
    if (it != offs.end() && v->type.dtype == DType::BF16) return widenBF16(loadIn(i16_, ptr(v), it->second));
    if (it != offs.end()) return loadIn(elemType(v->type.dtype), ptr(v), it->second);
    GSL_ASSERT(v->def && isFused(v), "jit: tree operand is neither a leaf nor fused");
    return evalOp(*v->def, offs);
  }

  // The value of a tree's op at the current index. bf16 values are carried
  // as f32 (widened exactly); an op with a bf16 operand computes in f32 as
  // the reference kernel does, and a bf16 result is rounded once (so a
  // fused chain rounds after each op, as the interpreter does).
  llvm::Value* evalOp(const ir::Op& op, const LeafOffsets& offs) {
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
  // bool as words), in f32. exp and tanh call the C library's expf and
  // tanhf and gelu the reference kernel's own function, so that the f32
  // values, and so the rounded bf16 ones, are the interpreter's bit for
  // bit (the f32 path's inline exp differs from expf by an ulp or so).
  llvm::Value* evalBF16(const ir::Op& op, const std::vector<llvm::Value*>& in) {
    auto call = [&](const char* fn) {
      llvm::FunctionCallee c = helper(fn, f32_, {f32_});
      if (auto* f = llvm::dyn_cast<llvm::Function>(c.getCallee())) {
        f->setDoesNotAccessMemory();
        f->setWillReturn();
      }
      return b_.CreateCall(c, {in[0]});
    };
    switch (op.kind) {
      case OpKind::Exp: return call("expf");
      case OpKind::Tanh: return call("tanhf");
      case OpKind::Gelu: return call("gsl_rt_gelu");
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

  llvm::Value* boolWord(llvm::Value* cond) { return b_.CreateZExt(cond, i32_); }
  // a * b + c, fused where the host has FMA (llvm.fmuladd). Only inside
  // the polynomials and range reductions of exp and tanh below: the user's
  // own mul and add are never contracted, so they round as the
  // interpreter's.
  llvm::Value* fma(llvm::Value* a, llvm::Value* b, llvm::Value* c) {
    return b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {a->getType()}, {a, b, c});
  }
  llvm::Value* fma(llvm::Value* a, float b, float c) { return fma(a, f32c(b), f32c(c)); }
  // exp(x) in straight-line arithmetic, so loops that use it vectorise
  // (llvm.exp.f32 becomes a scalar expf call per element): Cephes' range
  // reduction x = n ln2 + r, |r| <= ln2/2, a degree-6 polynomial for e^r
  // (relative error about 2e-7). expCore returns e^r and n (as f32) for x
  // already clamped to the f32 range.
  std::pair<llvm::Value*, llvm::Value*> expCore(llvm::Value* xc) {
    llvm::Value* fx = b_.CreateUnaryIntrinsic(llvm::Intrinsic::floor, fma(xc, 1.44269504088896341f, 0.5f));
    llvm::Value* r = fma(fx, f32c(-0.693359375f), xc);
    r = fma(fx, f32c(2.12194440e-4f), r);
    llvm::Value* p = f32c(1.9875691500e-4f);
    for (float c : {1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f})
      p = fma(p, r, f32c(c));
    llvm::Value* y = b_.CreateFAdd(fma(p, b_.CreateFMul(r, r), r), f32c(1.0f));
    return {y, fx};
  }
  // exp(x), the Exp op: 2^n built from exponent bits in two factors so
  // results down to the denormals are right. Beyond the f32 range: +inf
  // above 88.7228, 0 below -103.98; NaN stays NaN.
  llvm::Value* pow2i(llvm::Value* k) {  // 2^k for i32 k in [-126, 127] (128: +inf)
    return b_.CreateBitCast(b_.CreateShl(b_.CreateAdd(k, b_.getInt32(127)), 23), f32_);
  }
  llvm::Value* exp(llvm::Value* x) {
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
  llvm::Value* expSaturated(llvm::Value* x) {
    llvm::Value* xc = b_.CreateSelect(b_.CreateFCmpOLT(x, f32c(88.7f)), x, f32c(88.7f));
    xc = b_.CreateSelect(b_.CreateFCmpOGT(xc, f32c(-87.3f)), xc, f32c(-87.3f));
    auto [y, fx] = expCore(xc);
    return b_.CreateFMul(y, pow2i(b_.CreateFPToSI(fx, i32_)));
  }
  llvm::Value* isNan(llvm::Value* x) { return b_.CreateFCmpUNO(x, x); }

  // tanh from exp (above): sign(x) (1 - e) / (1 + e), e = exp(-2|x|); below
  // |x| = 1/8 (where 1 - e cancels) its Taylor series to x^9.
  llvm::Value* tanh(llvm::Value* x) {
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

  llvm::Value* unary(const ir::Op& op, DType dt, llvm::Value* x) {
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
      case OpKind::Exp: return exp(x);
      case OpKind::Log: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::log, x);
      case OpKind::Sqrt: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x);
      case OpKind::Rsqrt: return b_.CreateFDiv(f32c(1.0f), b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x));
      case OpKind::Tanh: return tanh(x);
      case OpKind::Gelu: {
        // 0.5 x (1 + tanh(u)), u = c (x + 0.044715 x^3), c = sqrt(2 / pi), as
        // the reference kernel; with tanh(u) = 2 / (1 + e^-2u) - 1 that is
        // x / (1 + e^-2u): one exp, one division, no branch to select. Its
        // difference from the reference is largest in the negative tail,
        // where the reference's 1 + tanh(u) cancels (absolute about 2^-25 |x|,
        // and 0 once tanh(u) rounds to -1, near x = -5.3); the tests bound it.
        const double c = std::sqrt(2.0 / M_PI);
        llvm::Value* m2u = b_.CreateFMul(x, fma(b_.CreateFMul(x, x), (float)(-2 * c * 0.044715), (float)(-2 * c)));
        return b_.CreateFDiv(x, b_.CreateFAdd(f32c(1.0f), expSaturated(m2u)));
      }
      case OpKind::Erf: {  // the C library's erff, as the reference kernel (std::erf)
        llvm::FunctionCallee erff = helper("erff", f32_, {f32_});
        if (auto* fn = llvm::dyn_cast<llvm::Function>(erff.getCallee())) {
          fn->setDoesNotAccessMemory();
          fn->setWillReturn();
        }
        return b_.CreateCall(erff, {x});
      }
      case OpKind::GeluExact: {  // 0.5 x (1 + erff(x / sqrt(2))), as the reference kernel
        llvm::FunctionCallee erff = helper("erff", f32_, {f32_});
        if (auto* fn = llvm::dyn_cast<llvm::Function>(erff.getCallee())) {
          fn->setDoesNotAccessMemory();
          fn->setWillReturn();
        }
        llvm::Value* e = b_.CreateCall(erff, {b_.CreateFMul(x, f32c((float)M_SQRT1_2))});
        return b_.CreateFMul(b_.CreateFMul(f32c(0.5f), x), b_.CreateFAdd(f32c(1.0f), e));
      }
      case OpKind::Sigmoid: {  // x >= 0 ? 1 / (1 + e^-x) : e^x / (1 + e^x), one exp(-|x|)
        llvm::Value* e = exp(b_.CreateFNeg(b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x)));
        llvm::Value* d = b_.CreateFAdd(f32c(1.0f), e);
        return b_.CreateSelect(b_.CreateFCmpOGE(x, f32c(0.0f)), b_.CreateFDiv(f32c(1.0f), d), b_.CreateFDiv(e, d));
      }
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

  llvm::Value* binary(OpKind k, DType dt, llvm::Value* a, llvm::Value* b) {
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

  // -------------------------------------------------------------- ops

  // The code of `op` at the builder's position (its result's storage
  // already bound).
  void emitOp(const ir::Op& op) {
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
      case OpKind::Transpose: return emitTranspose(op);
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
    if (isElementwise(op.kind)) return emitElementwise(op);
    emitFallback(op);
  }

  // An op without generated code (one added to the op table after this
  // generator): the reference kernel, through gsl_rt_eval_op.
  void emitFallback(const ir::Op& op) {
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
  llvm::Value* entryAlloca(size_t n) {
    llvm::IRBuilder<> eb(entry_, entry_->begin());
    return eb.CreateAlloca(ptr_, b_.getInt64(std::max<size_t>(n, 1)));
  }

  void emitParam(const ir::Op& op, const Storage& s) {
    llvm::Value* p = b_.CreateCall(helper("gsl_rt_param", ptr_, {ptr_, i64_}), {ctx_, i64c(opIndex_)});
    auto* ok = llvm::BasicBlock::Create(c_, "param.ok", fn_);
    b_.CreateCondBr(b_.CreateIsNull(p), error_, ok);
    b_.SetInsertPoint(ok);
    if (s.kind == Storage::Param) ptrs_[op.result] = p;
    else b_.CreateMemCpy(ptr(op.result), llvm::Align(4), p, llvm::Align(4), bytesOf(op.result));
  }

  // An elementwise op and the fused ops under it: one loop nest over the
  // result, leaves read with broadcast strides.
  void emitElementwise(const ir::Op& op) {
    IRValue r = op.result;
    Shape space = r->type.shape;
    std::vector<IRValue> leaves;
    treeLeaves(op, leaves);
    std::vector<Strides> st;
    for (IRValue v : leaves) st.push_back(bcastStrides(v->type.shape, space));
    st.push_back(rowMajor(space));
    std::vector<Strides*> sp;
    for (auto& s : st) sp.push_back(&s);
    collapse(space, sp);
    llvm::Value* out = ptr(r);
    auto body = [&] {
      map(space, st, [&](const std::vector<llvm::Value*>&, const std::vector<llvm::Value*>& offs) {
        LeafOffsets lo;
        for (size_t k = 0; k < leaves.size(); ++k) lo[leaves[k]] = offs[k];
        llvm::Value* v = evalOp(op, lo);
        store(r->type.dtype == DType::BF16 ? narrowBF16(v) : v, out, offs.back());
      });
    };
    // A large result of the function, written once: when its buffer is
    // 64-byte aligned (results are, unless a loop writes a row of one), a
    // copy of the loop that knows it, whose vector stores become
    // non-temporal (markStreamingStores): the result's cache lines are not
    // read from memory before they are overwritten.
    if (plan_.storage.at(r).kind != Storage::Output || bytesOf(r) < kStreamBytes) return body();
    auto* aligned = llvm::BasicBlock::Create(c_, "stream", fn_);
    auto* other = llvm::BasicBlock::Create(c_, "stream.unaligned", fn_);
    auto* done = llvm::BasicBlock::Create(c_, "stream.end", fn_);
    b_.CreateCondBr(b_.CreateICmpEQ(b_.CreateAnd(b_.CreatePtrToInt(out, i64_), i64c(63)), i64c(0)), aligned, other);
    b_.SetInsertPoint(aligned);
    b_.CreateAlignmentAssumption(m_.getDataLayout(), out, 64);
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
  // Results of at least this many bytes are streamed (above).
  static constexpr size_t kStreamBytes = size_t(16) << 20;

  // Accumulates over `space` into acc[accSt . i]: acc = combine(acc, value)
  // with value(offsets of `st`, acc offset). When the innermost dim is
  // reduced (accSt 0) the accumulator is carried in a register across it.
  using ValueFn = std::function<llvm::Value*(const std::vector<llvm::Value*>&, llvm::Value*)>;
  using CombineFn = std::function<llvm::Value*(llvm::Value*, llvm::Value*)>;
  void accumulate(const Shape& space, const std::vector<Strides>& st, const Strides& accSt, llvm::Value* acc,
                  llvm::Type* accTy, const ValueFn& value, const CombineFn& combine) {
    if (!space.empty() && accSt.back() == 0) {
      Shape outer(space.begin(), space.end() - 1);
      nest(outer, [&](const std::vector<llvm::Value*>& ivs) {
        llvm::Value* accOff = offset(ivs, accSt);
        llvm::Value* a0 = load(accTy, acc, accOff);
        auto res = loopAcc(space.back(), {a0}, [&](llvm::Value* iv, const std::vector<llvm::Value*>& a) {
          std::vector<llvm::Value*> all = ivs;
          all.push_back(iv);
          std::vector<llvm::Value*> offs;
          for (const Strides& s : st) offs.push_back(offset(all, s));
          return std::vector<llvm::Value*>{combine(a[0], value(offs, accOff))};
        });
        store(res[0], acc, accOff);
      });
      return;
    }
    std::vector<Strides> all = st;
    all.push_back(accSt);
    map(space, all, [&](const std::vector<llvm::Value*>&, const std::vector<llvm::Value*>& offs) {
      llvm::Value* accOff = offs.back();
      std::vector<llvm::Value*> o(offs.begin(), offs.end() - 1);
      store(combine(load(accTy, acc, accOff), value(o, accOff)), acc, accOff);
    });
  }

  // Reassociable double addition (sum accumulators: lets the vectoriser
  // keep partial sums; in double the order does not matter at f32 output).
  llvm::Value* addReassoc(llvm::Value* a, llvm::Value* b) {
    llvm::Value* s = b_.CreateFAdd(a, b);
    if (auto* in = llvm::dyn_cast<llvm::Instruction>(s)) in->setHasAllowReassoc(true);
    return s;
  }

  // The interpreter's NaN-sticky max/min, s = (x > s || isnan(x)) ? x : s,
  // is llvm.maximum/minimum (NaN if either is NaN) up to the sign of a zero
  // result; the intrinsics vectorise as reductions.
  llvm::Value* stickyMax(bool isMax, llvm::Value* s, llvm::Value* x) {
    if (x->getType()->isFloatingPointTy())
      return b_.CreateBinaryIntrinsic(isMax ? llvm::Intrinsic::maximum : llvm::Intrinsic::minimum, s, x);
    return b_.CreateBinaryIntrinsic(isMax ? llvm::Intrinsic::smax : llvm::Intrinsic::smin, s, x);
  }

  void emitReduce(const ir::Op& op) {
    IRValue in = op.operands[0], r = op.result;
    // bf16 reduces its widened values in a double accumulator (sum, mean,
    // max and min alike), rounded to f32 and then to bf16 at the end, as
    // the reference kernel's f32 reduction of the widened operand.
    const bool bf16 = in->type.dtype == DType::BF16;
    const bool f = in->type.dtype == DType::F32 || bf16;
    const bool sum = op.kind == OpKind::Sum || op.kind == OpKind::Mean;
    Shape space = in->type.shape, kept = space;
    for (int64_t a : op.attrs.getInts("axis")) kept[a] = 1;
    std::vector<IRValue> leaves;
    treeLeavesOf(in, leaves);
    std::vector<Strides> st;
    for (IRValue v : leaves) st.push_back(bcastStrides(v->type.shape, space));
    Strides accSt = bcastStrides(kept, space);
    std::vector<Strides*> sp;
    for (auto& s : st) sp.push_back(&s);
    sp.push_back(&accSt);
    collapse(space, sp);

    const int64_t groups = r->type.numElements();
    // f32 sums accumulate in a double buffer; everything else in the result.
    llvm::Value* out = ptr(r);
    llvm::Value* acc = out;
    llvm::Type* accTy = elemType(r->type.dtype);
    llvm::Value* init = nullptr;
    if (f && (sum || bf16)) {
      acc = tempPtr(0);
      accTy = f64_;
      init = f64c(sum ? 0.0 : op.kind == OpKind::Max ? -INFINITY : INFINITY);
    } else if (f) {
      init = f32c(op.kind == OpKind::Max ? -INFINITY : INFINITY);
    } else {
      init = b_.getInt32(op.kind == OpKind::Sum   ? 0
                         : op.kind == OpKind::Max ? std::numeric_limits<int32_t>::min()
                                                  : std::numeric_limits<int32_t>::max());
    }
    fill(acc, groups, init);
    accumulate(
        space, st, accSt, acc, accTy,
        [&](const std::vector<llvm::Value*>& offs, llvm::Value*) {
          LeafOffsets lo;
          for (size_t k = 0; k < leaves.size(); ++k) lo[leaves[k]] = offs[k];
          llvm::Value* x = evalValue(in, lo);
          return f && (sum || bf16) ? b_.CreateFPExt(x, f64_) : x;
        },
        [&](llvm::Value* a, llvm::Value* x) -> llvm::Value* {
          if (sum) return f ? addReassoc(a, x) : b_.CreateAdd(a, x);
          if (bf16) {  // the interpreter's s = (x > s || isnan(x)) ? x : s, signed zeros included
            llvm::Value* better = op.kind == OpKind::Max ? b_.CreateFCmpOGT(x, a) : b_.CreateFCmpOLT(x, a);
            return b_.CreateSelect(b_.CreateOr(better, isNan(x)), x, a);
          }
          return stickyMax(op.kind == OpKind::Max, a, x);
        });
    if (f && (sum || bf16)) {
      const double count = (double)in->type.numElements() / (double)groups;
      loop(groups, [&](llvm::Value* g) {
        llvm::Value* v = load(f64_, acc, g);
        if (op.kind == OpKind::Mean) v = b_.CreateFDiv(v, f64c(count));
        v = b_.CreateFPTrunc(v, f32_);
        store(bf16 ? narrowBF16(v) : v, out, g);
      });
    }
  }

  // Lanes along `axis`: nested loops over the other dims, body(base offset,
  // lane stride, lane index in row-major order of the other dims).
  void lanes(const Shape& shape, int64_t axis,
             const std::function<void(llvm::Value* base, int64_t stride, llvm::Value* lane)>& body) {
    int64_t outer = 1, inner = 1, n = shape[axis];
    for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
    for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
    nest({outer, inner}, [&](const std::vector<llvm::Value*>& ivs) {
      body(offset(ivs, {n * inner, 1}), inner, offset(ivs, {inner, 1}));
    });
  }

  llvm::Value* laneOffset(llvm::Value* base, int64_t stride, llvm::Value* j) {
    return b_.CreateAdd(base, stride == 1 ? j : b_.CreateMul(j, i64c(stride), "", true, true), "", true, true);
  }

  void emitArgMax(const ir::Op& op) {
    IRValue in = op.operands[0];
    const bool f = in->type.dtype == DType::F32;
    llvm::Type* t = elemType(in->type.dtype);
    llvm::Value *x = ptr(in), *out = ptr(op.result);
    const int64_t axis = op.attrs.getInt("axis"), n = in->type.shape[axis];
    lanes(in->type.shape, axis, [&](llvm::Value* base, int64_t stride, llvm::Value* lane) {
      std::vector<llvm::Value*> best = {loadIn(t, x, base), b_.getInt32(0)};
      if (n > 1)
        best = loopAcc(n - 1, best, [&](llvm::Value* iv, const std::vector<llvm::Value*>& a) {
          llvm::Value* j = b_.CreateAdd(iv, i64c(1));
          llvm::Value* v = loadIn(t, x, laneOffset(base, stride, j));
          // First maximum; the first NaN wins and stays (as NumPy).
          llvm::Value* take = f ? b_.CreateOr(b_.CreateFCmpOGT(v, a[0]),
                                              b_.CreateAnd(isNan(v), b_.CreateFCmpORD(a[0], a[0])))
                                : b_.CreateICmpSGT(v, a[0]);
          return std::vector<llvm::Value*>{b_.CreateSelect(take, v, a[0]),
                                           b_.CreateSelect(take, b_.CreateTrunc(j, i32_), a[1])};
        });
      store(best[1], out, lane);
    });
  }

  void emitSoftmax(const ir::Op& op) {
    IRValue in = op.operands[0];
    const bool log = op.kind == OpKind::LogSoftmax;
    llvm::Value *x = ptr(in), *out = ptr(op.result);
    const int64_t axis = op.attrs.getInt("axis"), n = in->type.shape[axis];
    lanes(in->type.shape, axis, [&](llvm::Value* base, int64_t stride, llvm::Value*) {
      auto at = [&](llvm::Value* j) { return laneOffset(base, stride, j); };
      llvm::Value* mx = loopAcc(n, {f32c(-INFINITY)}, [&](llvm::Value* j, const std::vector<llvm::Value*>& a) {
        llvm::Value* v = loadIn(f32_, x, at(j));
        return std::vector<llvm::Value*>{b_.CreateSelect(b_.CreateFCmpOLT(a[0], v), v, a[0])};  // std::max
      })[0];
      llvm::Value* sum = loopAcc(n, {f64c(0.0)}, [&](llvm::Value* j, const std::vector<llvm::Value*>& a) {
        llvm::Value* e = exp(b_.CreateFSub(loadIn(f32_, x, at(j)), mx));
        if (!log) store(e, out, at(j));
        return std::vector<llvm::Value*>{addReassoc(a[0], b_.CreateFPExt(e, f64_))};
      })[0];
      if (log) {
        llvm::Value* ls = b_.CreateUnaryIntrinsic(llvm::Intrinsic::log, sum);
        llvm::Value* m64 = b_.CreateFPExt(mx, f64_);
        loop(n, [&](llvm::Value* j) {
          llvm::Value* z = b_.CreateFSub(b_.CreateFPExt(loadIn(f32_, x, at(j)), f64_), m64);
          store(b_.CreateFPTrunc(b_.CreateFSub(z, ls), f32_), out, at(j));
        });
      } else {
        loop(n, [&](llvm::Value* j) {
          llvm::Value* e = b_.CreateFPExt(load(f32_, out, at(j)), f64_);
          store(b_.CreateFPTrunc(b_.CreateFDiv(e, sum), f32_), out, at(j));
        });
      }
    });
  }

  // (x - mean) / sqrt(var + eps) over the groups left by reducing `axis`,
  // mean and (biased) variance in double, two passes as Kernels.cpp.
  void emitLayerNorm(const ir::Op& op) {
    IRValue in = op.operands[0];
    Shape space = in->type.shape, kept = space;
    for (int64_t a : op.attrs.getInts("axis")) kept[a] = 1;
    const int64_t groups = numel(kept);
    const double count = (double)in->type.numElements() / (double)groups;
    Strides xSt = rowMajor(space), accSt = bcastStrides(kept, space);
    collapse(space, {&xSt, &accSt});
    llvm::Value *x = ptr(in), *out = ptr(op.result);
    llvm::Value *mean = tempPtr(0), *var = tempPtr((size_t)groups * 8);
    fill(mean, groups, f64c(0.0));
    fill(var, groups, f64c(0.0));
    auto xAt = [&](llvm::Value* off) { return b_.CreateFPExt(loadIn(f32_, x, off), f64_); };
    auto add = [&](llvm::Value* a, llvm::Value* v) { return addReassoc(a, v); };
    accumulate(space, {xSt}, accSt, mean, f64_,
               [&](const std::vector<llvm::Value*>& o, llvm::Value*) { return xAt(o[0]); }, add);
    loop(groups, [&](llvm::Value* g) { store(b_.CreateFDiv(load(f64_, mean, g), f64c(count)), mean, g); });
    accumulate(space, {xSt}, accSt, var, f64_,
               [&](const std::vector<llvm::Value*>& o, llvm::Value* g) {
                 llvm::Value* d = b_.CreateFSub(xAt(o[0]), load(f64_, mean, g));
                 return b_.CreateFMul(d, d);
               },
               add);
    const double eps = op.attrs.getFloat("eps");
    loop(groups, [&](llvm::Value* g) {
      llvm::Value* v = b_.CreateFAdd(b_.CreateFDiv(load(f64_, var, g), f64c(count)), f64c(eps));
      store(b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, v), var, g);
    });
    map(space, {xSt, accSt}, [&](const std::vector<llvm::Value*>&, const std::vector<llvm::Value*>& o) {
      llvm::Value* d = b_.CreateFSub(xAt(o[0]), load(f64_, mean, o[1]));
      store(b_.CreateFPTrunc(b_.CreateFDiv(d, load(f64_, var, o[1])), f32_), out, o[0]);
    });
  }

  void emitCumSum(const ir::Op& op) {
    IRValue in = op.operands[0];
    const bool f = in->type.dtype == DType::F32;
    const bool exclusive = op.attrs.has("exclusive") && op.attrs.getBool("exclusive");
    llvm::Value *x = ptr(in), *out = ptr(op.result);
    const int64_t axis = op.attrs.getInt("axis"), n = in->type.shape[axis];
    lanes(in->type.shape, axis, [&](llvm::Value* base, int64_t stride, llvm::Value*) {
      loopAcc(n, {f ? f64c(0.0) : (llvm::Value*)b_.getInt32(0)},
              [&](llvm::Value* j, const std::vector<llvm::Value*>& a) {
                llvm::Value* off = laneOffset(base, stride, j);
                llvm::Value* v = f ? b_.CreateFPExt(loadIn(f32_, x, off), f64_) : loadIn(i32_, x, off);
                llvm::Value* next = f ? b_.CreateFAdd(a[0], v) : b_.CreateAdd(a[0], v);
                llvm::Value* shown = exclusive ? a[0] : next;
                store(f ? b_.CreateFPTrunc(shown, f32_) : shown, out, off);
                return std::vector<llvm::Value*>{next};
              });
    });
  }

  void emitSlice(const ir::Op& op) {
    IRValue in = op.operands[0];
    const Shape& sh = in->type.shape;
    int64_t ax = op.attrs.getInt("axis"), outer = 1, inner = 1;
    for (int64_t d = 0; d < ax; ++d) outer *= sh[d];
    for (size_t d = ax + 1; d < sh.size(); ++d) inner *= sh[d];
    const int64_t inRow = sh[ax] * inner, outRow = op.result->type.shape[ax] * inner;
    llvm::Value* src = b_.CreateConstInBoundsGEP1_64(i32_, ptr(in), op.attrs.getInt("start") * inner);
    copyWords(ptr(op.result), src, {outer, outRow}, {outRow, 1}, {inRow, 1});
  }

  void emitTranspose(const ir::Op& op) {
    IRValue in = op.operands[0];
    Strides inSt = rowMajor(in->type.shape), st;
    for (int64_t p : op.attrs.getInts("perm")) st.push_back(inSt[p]);
    copyWords(ptr(op.result), ptr(in), op.result->type.shape, rowMajor(op.result->type.shape), st,
              in->type.dtype == DType::BF16 ? i16_ : i32_);
  }

  void emitConcat(const ir::Op& op) {
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

  void emitOneHot(const ir::Op& op) {
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
  void emitTake(const ir::Op& op) {
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

  void emitRandom(const ir::Op& op) {
    llvm::Value* seed = loadIn(i32_, ptr(op.operands[0]), i64c(0));
    b_.CreateCall(helper("gsl_rt_random_uniform", b_.getVoidTy(), {ptr_, i32_, ptr_, i64_}),
                  {ctx_, seed, ptr(op.result), i64c(op.result->type.numElements())});
  }

  // iota (arange): [outer, n, inner] around the axis; each element its
  // index along the axis.
  void emitIota(const ir::Op& op) {
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

  // dropout: one helper call (the reference kernel's loop, no copies);
  // without a key, a copy.
  void emitDropout(const ir::Op& op) {
    if (op.operands.size() < 2)
      return copyWords(ptr(op.result), ptr(op.operands[0]), {op.result->type.numElements()}, {1}, {1});
    b_.CreateCall(helper("gsl_rt_dropout", b_.getVoidTy(), {ptr_, i64_, ptr_, ptr_, ptr_}),
                  {ctx_, i64c(opIndex_), ptr(op.operands[0]), ptr(op.operands[1]), ptr(op.result)});
  }

  void emitCollective(const ir::Op& op) {
    llvm::Value* st = b_.CreateCall(helper("gsl_rt_collective", i32_, {ptr_, i64_, ptr_, ptr_}),
                                    {ctx_, i64c(opIndex_), ptr(op.operands[0]), ptr(op.result)});
    checkStatus(st);
  }


  // einsumGeneric): output labels outside, summed labels (sorted) inside,
  // accumulating the operands' product in f32 in that order.
  void emitEinsumLoops(const ir::Op& op) {
    ir::EinsumSpec es;
    std::string err = ir::parseEinsum(op.attrs.getString("spec"), op.operands.size(), es);
    GSL_ASSERT(err.empty(), "jit: einsum: " + err);
    std::map<char, int64_t> size;
    for (size_t i = 0; i < op.operands.size(); ++i)
      for (size_t d = 0; d < es.inputs[i].size(); ++d) size[es.inputs[i][d]] = op.operands[i]->type.shape[d];
    std::string summed;
    for (auto& [ch, n] : size)
      if (es.output.find(ch) == std::string::npos) summed += ch;
    auto stridesOver = [&](const std::string& loopLabels, size_t operand) {
      Strides own = rowMajor(op.operands[operand]->type.shape), st(loopLabels.size(), 0);
      for (size_t d = 0; d < es.inputs[operand].size(); ++d) {
        size_t p = loopLabels.find(es.inputs[operand][d]);
        if (p != std::string::npos) st[p] += own[d];
      }
      return st;
    };
    Shape outShape, sumShape;
    for (char ch : es.output) outShape.push_back(size[ch]);
    for (char ch : summed) sumShape.push_back(size[ch]);
    std::vector<llvm::Value*> in;
    for (IRValue v : op.operands) in.push_back(ptr(v));
    llvm::Value* out = ptr(op.result);
    map(outShape, {rowMajor(outShape)}, [&](const std::vector<llvm::Value*>& oivs, const std::vector<llvm::Value*>& o) {
      // Each operand's offset = its part over the output labels + its part
      // over the summed labels.
      std::vector<llvm::Value*> base;
      for (size_t i = 0; i < in.size(); ++i) base.push_back(offset(oivs, stridesOver(es.output, i)));
      llvm::Value* acc = f32c(0.0f);
      std::vector<llvm::Value*> sivs;
      std::function<llvm::Value*(size_t, llvm::Value*)> rec = [&](size_t d, llvm::Value* a) -> llvm::Value* {
        if (d == sumShape.size()) {
          llvm::Value* p = nullptr;
          for (size_t i = 0; i < in.size(); ++i) {
            llvm::Value* off = b_.CreateAdd(base[i], offset(sivs, stridesOver(summed, i)));
            llvm::Value* x = loadIn(f32_, in[i], off);
            p = p ? b_.CreateFMul(p, x) : x;
          }
          return b_.CreateFAdd(a, p);
        }
        return loopAcc(sumShape[d], {a}, [&](llvm::Value* iv, const std::vector<llvm::Value*>& av) {
          sivs.push_back(iv);
          llvm::Value* r = rec(d + 1, av[0]);
          sivs.pop_back();
          return std::vector<llvm::Value*>{r};
        })[0];
      };
      store(rec(0, acc), out, o[0]);
    });
  }
};

}  // namespace

KernelCounts lowerOps(const ir::Function& f, const BufferPlan& plan, const JitOptions& opts,
                      const std::string& symbol, llvm::Module& m) {
  OpLowering l(f, plan, opts, m);
  l.lower(symbol);
  return {l.kernelsEmitted(), l.kernelCalls(), l.takeOrigins()};
}

}  // namespace gsl::backend::jit
