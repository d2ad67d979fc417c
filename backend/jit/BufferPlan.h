// Where do buffers go? The buffer planner decides, before any LLVM IR is
// built, which ops run, which are fused into their consumer, where every
// value's elements live and at which workspace offsets.
//
// Fusion: an elementwise op whose result has a single use, by an
// elementwise op or a sum/mean/max/min of the same element count, is not
// materialised; its consumer evaluates it inline, so a chain of elementwise
// ops (and a reduction of it) is one loop nest with no intermediate buffers.
// Constants are inlined into elementwise code as immediates. A function
// result that one such chain reads (an optimizer's new moments, which its
// new param reads) is computed by the chain's loop too, and stored from
// there (BufferPlan::sideOutput): one pass over the update's operands
// instead of one per result.
//
// Buffers: function results are written straight into the output tensors
// (or into a donated input's buffer: ResultSource::donor);
// reshapes and slices of a contiguous block alias their operand, so does
// a dynamic_index (the row of its operand: a layer's weights of a stacked
// param), and so does a transpose read only by GEMMs (which read it through strides:
// BufferPlan::strided); params are
// read in place from the param store; every other materialised value lives
// in the workspace at an offset chosen by a liveness-based allocator (a
// value's bytes are reused once its last reader ran), whose high-water mark
// is the function's peak bytes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "backend/Engine.h"
#include "backend/jit/Contraction.h"
#include "backend/jit/JitOptions.h"
#include "ir/Function.h"

namespace gsl::backend::jit {

using IRValue = const ir::Value*;

// Where result j of the function comes from.
struct ResultSource {
  enum Kind {
    Computed,  // written by the compiled code into outputs[j]
    Arg,       // the argument args[index] itself (as the interpreter returns it)
    Repeat,    // the same value as result `index` (< j)
  } kind = Computed;
  int index = -1;
  // A Computed result may be written into this input's buffer when the
  // caller donates it (Donation): the input has the result's type, and the
  // op that writes the result is the last to read it, element by element
  // at the index it writes (an elementwise op reading it as a leaf of its
  // tree); no other op reads it later, through an alias or otherwise.
  DonorInput donor;
};

// Where a value's elements live.
struct Storage {
  enum Kind {
    None,       // not materialised (fused into its consumer, an inlined constant, or dead)
    Input,      // inputs[index]
    Output,     // outputs[index]
    Workspace,  // workspace + offset
    Alias,      // the elements of `base`, from element `elemOffset` on (reshape, slice),
                // or from the row a dynamic_index reads (`dynamicRow`)
    Param,      // the param store's buffer, returned by gsl_rt_param
  } kind = None;
  int index = -1;
  size_t offset = 0;
  IRValue base = nullptr;
  int64_t elemOffset = 0;
  // A dynamic_index's row of `base`, found when the op runs (its code binds
  // the pointer: LowerLoop.cpp's emitDynamicIndex).
  bool dynamicRow = false;
};

struct BufferPlan {
  std::vector<bool> live;       // per op: its code runs
  std::vector<bool> fallback;   // per op: run by the reference kernel (gsl_rt_eval_op)
  std::vector<bool> fused;      // per op: evaluated inline by its single consumer
  // Per op: a side output (markSideOutputs in BufferPlan.cpp): a function
  // result computed elementwise whose only reader is the elementwise tree
  // of a later op of the same shape: that op's loop evaluates it inline and
  // also stores it to its buffer; it has no loop of its own.
  std::vector<bool> sideOutput;
  std::unordered_map<IRValue, Storage> storage;  // every argument and op result
  std::vector<size_t> temp;     // per op: byte offset of its temp space
  std::vector<std::optional<Gemm>> gemm;  // per op: contraction plan
  // Transposes folded into the GEMMs that read them (foldTransposes in
  // BufferPlan.cpp): the result is an Alias of the transpose's operand,
  // read only by GEMMs, with these element strides (their plans take them).
  std::unordered_map<IRValue, Strides> strided;
  std::vector<ResultSource> results;
  size_t peak = 0;              // workspace bytes
};

// Plans `f` for `opts` (vectorWidth resolved: the GEMM plans depend on it).
BufferPlan planBuffers(const ir::Function& f, const JitOptions& opts);

// Whether `op` is planned as a fallback (BufferPlan::fallback): run by its
// reference kernel (backend::evalOp, through gsl_rt_eval_op) rather than
// generated code. So are ops of a kind op lowering has no code for
// (jit::hasLowering: an op added to the op table with only its reference
// kernel), JitOptions::fallbackOps, and ops on dtypes the generated code
// does not handle (bf16 beyond the common ops). A fallback op is neither
// fused into its consumer nor reads fused producers.
bool runsReferenceKernel(const ir::Op& op, const JitOptions& opts);

// Elementwise ops (generated as one loop nest, fusable): unary, binary,
// ternary and broadcast.
bool isElementwise(ir::OpKind k);

// Bytes of a value's buffer (every element type is 4 bytes wide).
size_t bytesOf(IRValue v);

}  // namespace gsl::backend::jit
