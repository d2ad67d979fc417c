// The building blocks of generated code, shared by op lowering
// (OpLowering) and the GEMM kernel (GemmKernel): the function's signature
// and exits, the pointers of planned buffers, loads and stores with
// alias-scope metadata, and loop nests, all through one IRBuilder.
//
// The generated function is
//
//   i32 @symbol(ptr %inputs, ptr %outputs, ptr %workspace, ptr %ctx)
//
// (jit::CompiledFn, Runtime.h). It returns 0, or 1 as soon as a runtime
// helper reported an error into the call context (which the engine
// rethrows).
#pragma once
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/jit/BufferPlan.h"
#include "backend/jit/JitOptions.h"
#include "backend/jit/OpLowering.h"
#include "backend/jit/Strides.h"

namespace gsl::backend::jit {

// The name of the alias scope of stores that stream a large result to
// memory (Emitter::newScope(true)), and the pass that makes them
// non-temporal once the optimiser has vectorised them (run after the
// optimisation pipeline; a no-op on targets other than x86).
inline constexpr const char* kStreamScope = "op.stream";
void markStreamingStores(llvm::Module& m);

class Emitter {
  friend struct LoopLowering;  // LowerLoop.cpp: the loop op and its indexing ops

 protected:
  Emitter(const ir::Function& f, const BufferPlan& plan, const JitOptions& opts, llvm::Module& m);

  // Creates the function `symbol` in the module, its entry block and its
  // error exit (return 1), and binds the arguments' buffers; the builder is
  // left in the entry block.
  void beginFunction(const std::string& symbol);
  // Returns 0 at the builder's position and checks the function with
  // LLVM's verifier (an internal error if it fails).
  void finishFunction();

  using DType = ir::DType;
  using Shape = ir::Shape;

  // -------------------------------------------------------------- basics

  llvm::Type* elemType(DType d) { return d == DType::F32 ? f32_ : d == DType::BF16 ? i16_ : i32_; }
  llvm::Value* i64c(int64_t v) { return b_.getInt64(v); }
  llvm::Value* f32c(float v) { return llvm::ConstantFP::get(f32_, v); }
  llvm::Value* f64c(double v) { return llvm::ConstantFP::get(f64_, v); }

  // Base pointer of a materialised value (computed at the top level of the
  // function, so it dominates every later use).
  llvm::Value* ptr(IRValue v);

  // Binds the base pointer of `v` as its planned storage says (an input,
  // an output, a workspace offset, a view of another buffer; a param is
  // bound by its op, an unmaterialised value not at all).
  void bindStorage(IRValue v);

  // A pointer `offset` bytes into the temp space of the op being lowered
  // (inside a kernel function: its temp argument).
  llvm::Value* tempPtr(size_t offset);
  // The index of the op being lowered, as an i64 (inside a kernel
  // function: its argument, so identical kernels of different ops are one
  // function).
  llvm::Value* opIndexValue();

  llvm::Value* gep(llvm::Type* t, llvm::Value* base, llvm::Value* off);
  // Loads of the op's own buffers (its result, temp space).
  llvm::Value* load(llvm::Type* t, llvm::Value* base, llvm::Value* off);
  // Loads of an operand: the buffer planner never places a value being
  // written where a value being read lives, so operand loads do not alias
  // the stores of the current scope (alias-scope metadata; this is what
  // lets LLVM vectorise and keep accumulators in registers).
  llvm::Value* loadIn(llvm::Type* t, llvm::Value* base, llvm::Value* off);
  void store(llvm::Value* v, llvm::Value* base, llvm::Value* off);
  // A new scope: stores from here on are in it. Starts every op, and every
  // phase of an op that reads what an earlier phase wrote through loadIn.
  // `stream`: its name is kStreamScope, which asks for non-temporal vector
  // stores (markStreamingStores, after optimisation).
  void newScope(bool stream = false);

  llvm::FunctionCallee helper(const char* name, llvm::Type* ret, llvm::ArrayRef<llvm::Type*> args);

  // Branches to the error exit when `status` (i32) is nonzero.
  void checkStatus(llvm::Value* status);

  // -------------------------------------------------------------- loops

  // for (iv = 0; iv < n; ++iv) body(iv), n a constant. The builder is left
  // after the loop. `vectorize` false keeps LLVM's loop vectorizer off it
  // (a loop whose vectors would need scatters; SLP still applies).
  void loop(int64_t n, const std::function<void(llvm::Value*)>& body, bool vectorize = true);

  // A loop carrying values: accs = body(iv, accs) from `init`; returns the
  // final values (`init` when n is 0).
  using AccBody = std::function<std::vector<llvm::Value*>(llvm::Value*, const std::vector<llvm::Value*>&)>;
  std::vector<llvm::Value*> loopAcc(int64_t n, std::vector<llvm::Value*> init, const AccBody& body,
                                    bool vectorize = true);

  // Nested loops over `shape` (outer first); body(ivs).
  void nest(const Shape& shape, const std::function<void(const std::vector<llvm::Value*>&)>& body);

  // sum_d ivs[d] * st[d] (+ base), as i64.
  llvm::Value* offset(const std::vector<llvm::Value*>& ivs, const Strides& st, int64_t base = 0);

  // Loops over `shape` computing one offset per stride vector; body(ivs, offsets).
  using MapBody = std::function<void(const std::vector<llvm::Value*>&, const std::vector<llvm::Value*>&)>;
  void map(const Shape& shape, const std::vector<Strides>& st, const MapBody& body);

  // Copies 4-byte words: dst[dstSt . i] = src[srcSt . i] over `shape`
  // (`word`: another element type, i16 for bf16).
  void copyWords(llvm::Value* dst, llvm::Value* src, Shape shape, Strides dstSt, Strides srcSt,
                 llvm::Type* word = nullptr);

  // A copy whose innermost destination dim reads the source with a stride
  // while another dim reads it contiguously (a transpose) walks one of the
  // two with a large stride. When both sizes are multiples of 16, the
  // iteration space is reordered into 16 x 16 tiles (one cache line each
  // way): [other dims, a / 16, last / 16, 16 of a, 16 of last]; returns
  // whether it did. copyWords then transposes each tile's 4-byte words in
  // registers when the destination's last dim is contiguous.
  static bool tileTranspose(Shape& shape, Strides& dst, Strides& src);
  // The n x n transpose of the n vectors `rows` (n a power of two), by
  // two-input shuffles.
  void transposeInRegisters(std::vector<llvm::Value*>& rows);

  void fill(llvm::Value* dst, int64_t n, llvm::Value* v);

  // ---------------------------------------------------------------- bf16
  // The bit arithmetic of support/BF16.h, on scalars or vectors: bf16 (i16)
  // to f32 (exact: the bits shifted up by 16), and f32 to bf16 rounded to
  // nearest even (a NaN stays a NaN with its quiet bit set).
  llvm::Value* widenBF16(llvm::Value* h);
  llvm::Value* narrowBF16(llvm::Value* f);
  // dst[dstSt . i] = src[srcSt . i] over `shape`, converting between f32
  // and bf16 elements (`widen`: bf16 to f32, else f32 to bf16).
  void copyConvertBF16(bool widen, llvm::Value* dst, llvm::Value* src, Shape shape, Strides dstSt, Strides srcSt);

  const ir::Function& f_;
  llvm::Module& m_;
  llvm::LLVMContext& c_;
  llvm::IRBuilder<> b_;
  const JitOptions& opts_;
  const BufferPlan& plan_;
  llvm::Function* fn_ = nullptr;
  llvm::Value *inputs_ = nullptr, *outputs_ = nullptr, *workspace_ = nullptr, *ctx_ = nullptr;
  llvm::BasicBlock *entry_ = nullptr, *error_ = nullptr;
  llvm::Type *f32_, *f64_, *i32_, *i64_, *ptr_;
  llvm::Type* i16_;
  int64_t opIndex_ = 0;                              // the op being lowered (its temp space: tempPtr)
  llvm::Value* temp_ = nullptr;                      // in a kernel function: its temp space argument
  llvm::Value* opIndexArg_ = nullptr;                // in a kernel function: its op index argument
  std::unordered_map<IRValue, llvm::Value*> ptrs_;  // base pointer of every materialised value
  llvm::MDNode* domain_ = nullptr;                   // alias scopes (see loadIn)
  llvm::MDNode* scope_ = nullptr;
  std::vector<KernelOrigin> origins_;  // the kernels and loop bodies emitted so far (lowerOps)
};

}  // namespace gsl::backend::jit
