#include "backend/jit/LowerLoop.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/GlobalVariable.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "backend/jit/Codegen.h"
#include "backend/jit/OpLowering.h"
#include "backend/jit/Runtime.h"
#include "ir/Loop.h"
#include "support/Diagnostics.h"

namespace gsl::backend::jit {

namespace {

// An array of pointers in the entry block's stack frame, filled at the
// builder's position.
llvm::Value* pointerArray(llvm::IRBuilder<>& b, llvm::BasicBlock* entry, llvm::Type* ptrTy,
                          const std::vector<llvm::Value*>& ps) {
  llvm::IRBuilder<> eb(entry, entry->begin());
  llvm::Value* a = eb.CreateAlloca(ptrTy, eb.getInt64(std::max<size_t>(ps.size(), 1)));
  for (size_t k = 0; k < ps.size(); ++k) b.CreateStore(ps[k], b.CreateConstInBoundsGEP1_64(ptrTy, a, k));
  return a;
}

}  // namespace

void LoopLowering::emitLoop(Emitter& e, const ir::Op& op) {
  for (IRValue r : op.results) e.bindStorage(r);
  // The body: its own buffer plan and function, in the same module.
  const std::string symbol = e.fn_->getName().str() + ".loop" + std::to_string(e.opIndex_);
  const ir::Function& body = *op.body;
  BufferPlan plan = planBuffers(body, e.opts_);
  KernelCounts lowered = lowerOps(body, plan, e.opts_, symbol, e.m_);
  llvm::Function* bodyFn = e.m_.getFunction(symbol);
  GSL_ASSERT(bodyFn, "jit: the loop body was not lowered");
  e.origins_.push_back({symbol, op.loc, op.kind, 0});
  for (KernelOrigin& o : lowered.origins) e.origins_.push_back(std::move(o));
  bodyFn->setLinkage(llvm::GlobalValue::InternalLinkage);
  std::vector<int32_t> words;
  for (const ResultSource& s : plan.results) {
    words.push_back((int32_t)s.kind);
    words.push_back(s.index);
  }
  if (words.empty()) words.push_back(0);
  auto* init = llvm::ConstantDataArray::get(e.c_, llvm::ArrayRef<int32_t>(words));
  auto* table = new llvm::GlobalVariable(e.m_, init->getType(), true, llvm::GlobalValue::PrivateLinkage, init,
                                         symbol + ".results");
  std::vector<llvm::Value*> ins, outs;
  for (IRValue v : op.operands) ins.push_back(e.ptr(v));
  for (IRValue v : op.results) outs.push_back(e.ptr(v));
  llvm::Value* insA = pointerArray(e.b_, e.entry_, e.ptr_, ins);
  llvm::Value* outsA = pointerArray(e.b_, e.entry_, e.ptr_, outs);
  llvm::Value* st = e.b_.CreateCall(
      e.helper("gsl_rt_loop", e.i32_, {e.ptr_, e.i64_, e.ptr_, e.ptr_, e.ptr_, e.i64_, e.ptr_}),
      {e.ctx_, e.i64c(e.opIndex_), bodyFn, insA, outsA, e.i64c((int64_t)plan.peak), table});
  e.checkStatus(st);
}

// Loads the i32 index operand and branches to the reference kernel (which
// reports the internal error) when it is not a row of x; returns the index
// as i64 with the builder in the in-range block.
llvm::Value* LoopLowering::rowIndex(Emitter& e, const ir::Op& op, IRValue index, int64_t rows,
                             llvm::BasicBlock*& done) {
  llvm::Value* i = e.b_.CreateSExt(e.loadIn(e.i32_, e.ptr(index), e.i64c(0)), e.i64_);
  auto* ok = llvm::BasicBlock::Create(e.c_, "row.ok", e.fn_);
  auto* bad = llvm::BasicBlock::Create(e.c_, "row.bad", e.fn_);
  done = llvm::BasicBlock::Create(e.c_, "row.done", e.fn_);
  e.b_.CreateCondBr(e.b_.CreateICmpULT(i, e.i64c(rows)), ok, bad);
  e.b_.SetInsertPoint(bad);
  std::vector<llvm::Value*> ins;
  for (IRValue v : op.operands) ins.push_back(e.ptr(v));
  llvm::Value* st = e.b_.CreateCall(e.helper("gsl_rt_eval_op", e.i32_, {e.ptr_, e.i64_, e.ptr_, e.ptr_}),
                                    {e.ctx_, e.i64c(e.opIndex_), pointerArray(e.b_, e.entry_, e.ptr_, ins),
                                     e.ptr(op.result)});
  e.checkStatus(st);
  e.b_.CreateBr(done);
  e.b_.SetInsertPoint(ok);
  return i;
}

void LoopLowering::emitDynamicIndex(Emitter& e, const ir::Op& op) {
  IRValue x = op.operands[0];
  const int64_t rows = x->type.shape[0], row = op.result->type.numElements();
  const int64_t rowBytes = row * ir::dtypeBytes(x->type.dtype);
  if (e.plan_.storage.at(op.result).kind == Storage::Alias) {
    // A view of the row (BufferPlan: Storage::dynamicRow): its pointer,
    // computed before the range check so that it dominates every reader;
    // an index out of range reports the error and never reaches them.
    llvm::Value* i = e.b_.CreateSExt(e.loadIn(e.i32_, e.ptr(op.operands[1]), e.i64c(0)), e.i64_);
    e.ptrs_[op.result] = e.b_.CreateGEP(e.b_.getInt8Ty(), e.ptr(x), e.b_.CreateMul(i, e.i64c(rowBytes)), "row");
    llvm::BasicBlock* done = nullptr;
    rowIndex(e, op, op.operands[1], rows, done);
    e.b_.CreateBr(done);
    e.b_.SetInsertPoint(done);
    return;
  }
  llvm::BasicBlock* done = nullptr;
  llvm::Value* i = rowIndex(e, op, op.operands[1], rows, done);
  llvm::Value* src = e.gep(e.b_.getInt8Ty(), e.ptr(x), e.b_.CreateMul(i, e.i64c(rowBytes)));
  e.b_.CreateMemCpy(e.ptr(op.result), llvm::Align(2), src, llvm::Align(2), e.i64c(rowBytes));
  e.b_.CreateBr(done);
  e.b_.SetInsertPoint(done);
}

void LoopLowering::emitDynamicUpdate(Emitter& e, const ir::Op& op) {
  IRValue x = op.operands[0], u = op.operands[1];
  const int64_t rows = x->type.shape[0], row = u->type.numElements();
  llvm::BasicBlock* done = nullptr;
  llvm::Value* i = rowIndex(e, op, op.operands[2], rows, done);
  llvm::Value* out = e.ptr(op.result);
  const int64_t rowBytes = row * ir::dtypeBytes(x->type.dtype);
  e.b_.CreateMemCpy(out, llvm::Align(2), e.ptr(x), llvm::Align(2), e.i64c(rows * rowBytes));
  e.b_.CreateMemCpy(e.gep(e.b_.getInt8Ty(), out, e.b_.CreateMul(i, e.i64c(rowBytes))), llvm::Align(2), e.ptr(u),
                    llvm::Align(2), e.i64c(rowBytes));
  e.b_.CreateBr(done);
  e.b_.SetInsertPoint(done);
}

}  // namespace gsl::backend::jit

namespace {

// A loop's buffers (carried values, the body's workspace) come from the
// Tensor pool (backend/Tensor.h), so that the next call of the loop gets
// the same, already touched pages: no page faults in a steady training
// step. Not zero-filled: the body writes what it reads.
using Buffer = gsl::backend::Tensor;

Buffer alloc(size_t bytes) {
  const int64_t words = (int64_t)((std::max<size_t>(bytes, 1) + 3) / 4);
  return Buffer::uninitialized(gsl::ir::TensorType{gsl::ir::DType::I32, {words}});
}

}  // namespace

extern "C" int32_t gsl_rt_loop(void* ctx, int64_t opIndex, void* bodyPtr, const void* const* ins, void* const* outs,
                               int64_t bodyPeak, const int32_t* resultPlan) {
  using namespace gsl;
  using backend::jit::CallContext;
  using backend::jit::ResultSource;
  auto* c = static_cast<CallContext*>(ctx);
  try {
    const ir::Op& op = *c->fn->ops[(size_t)opIndex];
    const ir::LoopInfo info(op);
    const ir::Function& body = *op.body;
    auto bodyFn = reinterpret_cast<backend::jit::CompiledFn>(bodyPtr);
    CallContext child;
    child.kctx = c->kctx;
    child.fn = &body;
    child.root = c->root;
    // The carried values: the current ones (read by the body) and the next
    // (written by it), swapped after each iteration.
    std::vector<Buffer> cur, next;
    std::vector<size_t> carriedBytes;
    for (size_t j = 0; j < info.carried; ++j) {
      const size_t n = (size_t)op.operands[j]->type.byteSize();
      carriedBytes.push_back(n);
      cur.push_back(alloc(n));
      next.push_back(alloc(n));
      std::memcpy(cur.back().raw(), ins[j], n);
    }
    Buffer workspace = alloc((size_t)bodyPeak);
    int32_t index = 0;
    const size_t nIn = op.operands.size() + 1, nOut = body.results.size();
    std::vector<const void*> bin(nIn);
    std::vector<void*> bout(nOut);
    bin[0] = &index;
    for (size_t k = info.carried; k < op.operands.size(); ++k) bin[k + 1] = ins[k];
    for (int64_t t = 0; t < info.trip; ++t) {
      const int64_t i = info.reverse ? info.trip - 1 - t : t;
      index = (int32_t)i;
      for (size_t j = 0; j < info.carried; ++j) {
        bin[j + 1] = cur[j].raw();
        bout[j] = next[j].raw();
      }
      // Per-iteration outputs are written straight into row i.
      for (size_t m = 0; m < info.outputs; ++m) {
        const size_t rowBytes = (size_t)body.results[info.carried + m]->type.byteSize();
        bout[info.carried + m] = static_cast<char*>(outs[info.carried + m]) + (size_t)i * rowBytes;
      }
      if (bodyFn(const_cast<void* const*>(bin.data()), bout.data(), static_cast<char*>(workspace.raw()), &child) != 0) {
        c->error = child.error;
        return 1;
      }
      // Body results the compiled code does not write: an argument passed
      // through, or a repeat of an earlier result.
      for (size_t j = 0; j < nOut; ++j) {
        const auto kind = (ResultSource::Kind)resultPlan[2 * j];
        const int src = resultPlan[2 * j + 1];
        const size_t n = (size_t)body.results[j]->type.byteSize();
        if (kind == ResultSource::Arg) std::memmove(bout[j], bin[(size_t)src], n);
        else if (kind == ResultSource::Repeat) std::memmove(bout[j], bout[(size_t)src], n);
      }
      std::swap(cur, next);
    }
    for (size_t j = 0; j < info.carried; ++j) std::memcpy(outs[j], cur[j].raw(), carriedBytes[j]);
    return 0;
  } catch (...) {
    c->error = std::current_exception();
    return 1;
  }
}
