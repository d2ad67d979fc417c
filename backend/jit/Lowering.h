// The class that lowers a planned function's ops (lowerOps, OpLowering.h).
// Internal to backend/jit; its members are defined by topic, one file
// each:
//   OpLowering.cpp        the walk over the ops, the dispatch by op kind,
//                         which kinds have generated code (hasLowering),
//                         and the ops that are one helper call (params,
//                         collectives, random, the reference-kernel fallback)
//   Outlining.cpp         kernel functions: which ops get one, and identical
//                         kernels emitted once
//   LowerElementwise.cpp  elementwise ops and the fused trees under them
//   LowerReduction.cpp    reductions, softmax, layer_norm, cumsum, einsum
//                         loops
//   LowerDataMovement.cpp copies and gathers: slice, transpose, concat,
//                         one_hot, take, iota
// and the scalar math (exp, tanh, ...) is ScalarMath.h's.
#pragma once
#include <llvm/IR/StructuralHash.h>
#include <llvm/Transforms/Utils/FunctionComparator.h>

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/jit/GemmKernel.h"
#include "backend/jit/OpLowering.h"
#include "backend/jit/ScalarMath.h"

namespace gsl::backend::jit {

// The constant op's value converted to its element type, as Kernels.cpp.
double constantValue(const ir::Op& op);
int32_t constantWord(const ir::Op& op, ir::DType dt);

// Whether LowerElementwise.cpp generates code for the elementwise kind `k`
// (hasLowering's answer for unary, binary and ternary ops and broadcast).
bool lowersElementwise(ir::OpKind k);

class OpLowering : public GemmEmitter {
 public:
  OpLowering(const ir::Function& f, const BufferPlan& plan, const JitOptions& opts, llvm::Module& m);

  void lower(const std::string& symbol);

  size_t kernelsEmitted() const { return kernelCount_; }
  size_t kernelCalls() const { return kernelCalls_; }
  std::vector<KernelOrigin> takeOrigins() { return std::move(origins_); }

 private:
  std::unordered_map<IRValue, size_t> defIndex_;  // op index of every op result
  ScalarMath math_{b_};

  // -------------------------------------------------------------- kernels (Outlining.cpp)

  bool inKernel(const ir::Op& op);
  bool timed(const ir::Op& op, bool kernel) const;
  void kernelBuffers(IRValue v, std::vector<IRValue>& out);
  void emitKernelCall(const ir::Op& op);
  llvm::Function* dedupKernel(llvm::Function* k);

  std::string symbol_;
  std::unordered_map<llvm::IRHash, std::vector<llvm::Function*>> kernels_;
  std::unordered_map<llvm::Function*, size_t> originOf_;  // kernel -> its row of origins_
  llvm::GlobalNumberState globalNumbers_;
  size_t kernelCount_ = 0, kernelCalls_ = 0;

  // -------------------------------------------------------------- expression trees (LowerElementwise.cpp)

  void treeLeaves(const ir::Op& op, std::vector<IRValue>& leaves);
  void treeLeavesOf(IRValue v, std::vector<IRValue>& leaves);
  bool isFused(IRValue v);  // fused into its reader, or a side output (BufferPlan::sideOutput)
  bool isSideOutput(IRValue v);
  // Side outputs of the elementwise tree being emitted are stored at this
  // offset (the root's: they have its shape).
  llvm::Value* treeOutOffset_ = nullptr;
  void sideOutputsOf(const ir::Op& op, std::vector<IRValue>& out);

  // Element offsets of the leaves at the current index.
  using LeafOffsets = std::unordered_map<IRValue, llvm::Value*>;

  llvm::Value* evalValue(IRValue v, const LeafOffsets& offs);
  llvm::Value* evalOp(const ir::Op& op, const LeafOffsets& offs);
  llvm::Value* evalBF16(const ir::Op& op, const std::vector<llvm::Value*>& in);
  llvm::Value* boolWord(llvm::Value* cond) { return b_.CreateZExt(cond, i32_); }
  llvm::Value* callPureF32(const char* fn, llvm::Value* x, llvm::Value* y = nullptr);
  llvm::Value* loadAsF32(IRValue in, llvm::Value* p, llvm::Value* off);
  void storeFromF32(IRValue result, llvm::Value* v, llvm::Value* p, llvm::Value* off);
  llvm::Value* unary(const ir::Op& op, DType dt, llvm::Value* x);
  llvm::Value* binary(ir::OpKind k, DType dt, llvm::Value* a, llvm::Value* b);
  void emitElementwise(const ir::Op& op);
  // Results of at least this many bytes are streamed (emitElementwise).
  static constexpr size_t kStreamBytes = size_t(16) << 20;

  // -------------------------------------------------------------- ops (OpLowering.cpp)

  void emitOp(const ir::Op& op);
  void emitFallback(const ir::Op& op);
  llvm::Value* entryAlloca(size_t n);
  void emitParam(const ir::Op& op, const Storage& s);
  void emitRandom(const ir::Op& op);
  void emitDropout(const ir::Op& op);
  void emitCollective(const ir::Op& op);

  // -------------------------------------------------------------- reductions (LowerReduction.cpp)

  using ValueFn = std::function<llvm::Value*(const std::vector<llvm::Value*>&, llvm::Value*)>;
  using CombineFn = std::function<llvm::Value*(llvm::Value*, llvm::Value*)>;
  void accumulate(const Shape& space, const std::vector<Strides>& st, const Strides& accSt, llvm::Value* acc,
                  llvm::Type* accTy, const ValueFn& value, const CombineFn& combine);
  llvm::Value* addReassoc(llvm::Value* a, llvm::Value* b);
  llvm::Value* stickyMax(bool isMax, llvm::Value* s, llvm::Value* x);
  void emitReduce(const ir::Op& op);
  void lanes(const Shape& shape, int64_t axis,
             const std::function<void(llvm::Value* base, int64_t stride, llvm::Value* lane)>& body);
  llvm::Value* laneOffset(llvm::Value* base, int64_t stride, llvm::Value* j);
  void emitArgMax(const ir::Op& op);
  void emitSoftmax(const ir::Op& op);
  void emitLayerNorm(const ir::Op& op);
  void emitCumSum(const ir::Op& op);
  void emitEinsumLoops(const ir::Op& op);

  // -------------------------------------------------------------- data movement (LowerDataMovement.cpp)

  void emitSlice(const ir::Op& op);
  void emitTranspose(const ir::Op& op);
  void emitConcat(const ir::Op& op);
  void emitOneHot(const ir::Op& op);
  void emitTake(const ir::Op& op);
  void emitIota(const ir::Op& op);
};

}  // namespace gsl::backend::jit
