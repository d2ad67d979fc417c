// Reference kernels: the semantics of every op of the op table on host
// tensors. This is the numeric oracle that every later engine (the LLVM JIT,
// the SPMD program) is compared against, so clarity wins over speed; dense
// contractions use Eigen's matrix product.
#pragma once
#include <array>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/Communicator.h"
#include "backend/Tensor.h"
#include "ir/Mesh.h"
#include "ir/Op.h"

namespace gsl::backend {

// A run-time failure of user code (an index out of range, ...), located at
// the op that failed. Kernels throw std::runtime_error; the engines rethrow
// it as RuntimeError with the op's location.
struct RuntimeError : std::runtime_error {
  SourceLoc loc;
  RuntimeError(SourceLoc l, const std::string& m) : std::runtime_error(m), loc(l) {}
};

struct KernelContext {
  uint64_t seed = 0;  // global --seed (random_uniform)
  // Returns the current value of a param by name (the `param` op).
  std::function<const Tensor&(const std::string&)> param;
  // Per-rank programs (SPMD): this rank and the communicator. Unused by
  // global (single-device) programs. `mesh` (optional) names the axes of a
  // collective in --trace events; the groups are on the op (op.groups).
  int rank = 0;
  Communicator* comm = nullptr;
  std::function<const ir::Mesh&(const std::string&)> mesh;
};

// Evaluates a collective op (all_reduce, all_gather, reduce_scatter,
// all_to_all, collective_permute, shard_slice) on this rank's block.
Tensor evalCollective(const ir::Op& op, const Tensor& in, const KernelContext& ctx);
// The same into caller memory: `in` holds the operand's words, `out` has
// room for the result's (no copies of either; the JIT calls this).
void collectiveInto(const ir::Op& op, const void* in, void* out, const KernelContext& ctx);
// The scratch bytes a collective packs its blocks in (Communicator::
// scratch), by slot: a gather or reduce-scatter along a dim other than the
// first, and an all-to-all splitting or joining one; 0 where none.
std::array<size_t, 2> collectiveScratchBytes(const ir::Op& op);

// The reference kernel's tanh-approximation GELU of one f32 (the JIT calls
// it for bf16 gelu, whose values must be the interpreter's bit for bit).
float geluF32(float x);
// The reference kernel's sigmoid of one f32 (for bf16 sigmoid, likewise).
float sigmoidF32(float x);

// Evaluates `op` on `in` (its operands' values, in order).
Tensor evalOp(const ir::Op& op, const std::vector<Tensor>& in, const KernelContext& ctx);

// dropout with a key (ir/OpTable.h) on f32 buffers of the op's result
// type: out[i] = x[i] / (1 - p) where element i's uniform number (global
// --seed `seed`, backend/Random.h's dropoutStream, its global flat index)
// is >= p, else 0. `out` may be `x`. Shared by the interpreter and the JIT.
void dropoutInto(const ir::Op& op, const float* x, const int32_t* key, float* out, uint64_t seed);

}  // namespace gsl::backend
