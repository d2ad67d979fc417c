// Which ops become kernel functions of their own, and how identical
// kernels are emitted once (OpLowering's outlining, Lowering.h).
#include <llvm/IR/BasicBlock.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>

#include "backend/jit/Lowering.h"
#include "support/Diagnostics.h"

namespace gsl::backend::jit {

using ir::OpClass;
using ir::OpKind;

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

bool OpLowering::inKernel(const ir::Op& op) {
  if (plan_.fallback[opIndex_]) return false;
  const Storage& s = plan_.storage.at(op.result);
  switch (op.kind) {
    case OpKind::Param: case OpKind::RandomUniform: case OpKind::Dropout: return false;
    // A loop has several results and its body is a function of its own
    // already (LowerLoop.cpp), run by a runtime helper.
    case OpKind::Loop: return false;
    case OpKind::Constant: return s.kind != Storage::None;
    case OpKind::Reshape: case OpKind::Slice: case OpKind::Transpose: case OpKind::DynamicIndex:
      return s.kind != Storage::Alias;
    default: break;
  }
  return op.info().cls != OpClass::Collective;
}

// The materialised values a kernel of `op` reads (fused producers
// expanded), then its result, each once.
void OpLowering::kernelBuffers(IRValue v, std::vector<IRValue>& out) {
  if (std::find(out.begin(), out.end(), v) != out.end()) return;
  if (plan_.storage.at(v).kind != Storage::None) {
    out.push_back(v);
    if (!isSideOutput(v)) return;  // a side output is written here, from its operands
  }
  if (v->def && isFused(v))
    for (IRValue o : v->def->operands) kernelBuffers(o, out);
}

void OpLowering::emitKernelCall(const ir::Op& op) {
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
llvm::Function* OpLowering::dedupKernel(llvm::Function* k) {
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

}  // namespace gsl::backend::jit
