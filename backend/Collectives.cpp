// Collective ops of per-rank (SPMD) programs: the evaluation of all_gather,
// all_reduce, reduce_scatter, all_to_all, collective_permute, shard_slice
// and pad_mask on this rank's block through a Communicator, in the groups
// the op carries (resolved when the program was built, ir::CollectiveGroups).
//
// Data movement works on raw elements of `eb` bytes (ir::dtypeBytes: 4 for
// f32, i32 and bool as int32 0/1; 2 for bf16, which is sent as bf16: half
// the bytes of f32). Blocks along a dim are moved as "panels": a tensor of
// shape S split along dim d is outer = prod(S[:d]) rows of
// S[d] * prod(S[d+1:]) elements, and block j of dim d is the j-th 1/n of
// every row.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

#include "backend/Kernels.h"
#include "support/BF16.h"
#include "support/Diagnostics.h"
#include "support/Trace.h"

namespace gsl::backend {

using ir::Op;
using ir::OpKind;

namespace {

int64_t product(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= s[i];
  return p;
}

// `src` (shape s) as n contiguous blocks along `dim` into `packed` (as
// many bytes as src): block j holds indices [j * s[dim]/n, (j+1) * s[dim]/n)
// of dim, row-major.
void packBlocks(const char* src, const Shape& s, int64_t dim, int64_t n, int64_t eb, char* packed) {
  const int64_t outer = product(s, 0, (size_t)dim);
  const int64_t row = product(s, (size_t)dim, s.size()) * eb;  // bytes per outer index
  const int64_t piece = row / n;                               // bytes of one block per outer index
  const int64_t blockBytes = outer * piece;
  for (int64_t j = 0; j < n; ++j)
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(packed + j * blockBytes + o * piece, src + o * row + j * piece, piece);
}

// The inverse of packBlocks: n contiguous blocks of shape `block`, joined
// along `dim` into `dst` (whose dim is n * block[dim]).
void unpackBlocks(const char* blocks, const Shape& block, int64_t dim, int64_t n, int64_t eb, char* dst) {
  const int64_t outer = product(block, 0, (size_t)dim);
  const int64_t piece = product(block, (size_t)dim, block.size()) * eb;
  const int64_t blockBytes = outer * piece;
  for (int64_t j = 0; j < n; ++j)
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + (o * n + j) * piece, blocks + j * blockBytes + o * piece, piece);
}

}  // namespace

static void collectiveImpl(const Op& op, const char* in, char* out, const KernelContext& ctx);

Tensor evalCollective(const Op& op, const Tensor& in, const KernelContext& ctx) {
  GSL_ASSERT(op.result, std::string("evalCollective: ") + op.info().mnemonic + " without a result");
  GSL_ASSERT(in.defined(), std::string("evalCollective: ") + op.info().mnemonic + " of an undefined tensor");
  GSL_ASSERT(op.operands.size() == 1 && op.operands[0]->type == in.type(),
             std::string("evalCollective: ") + op.info().mnemonic + ": operand of type " + in.type().str() +
                 " does not match the op");
  Tensor out(op.result->type);
  collectiveInto(op, in.size() ? in.raw() : nullptr, out.size() ? out.raw() : nullptr, ctx);
  return out;
}

// Times every collective op into the communicator's stats (the training
// bench reports the share of a step spent communicating).
// With --trace, each one is an event with its kind, operand bytes, the
// bytes this rank sent (as counted in the stats), mesh and axes.
void collectiveInto(const Op& op, const void* in, void* out, const KernelContext& ctx) {
  trace::Scope traced("collective", op.info().mnemonic);
  uint64_t sentBefore = 0;
  if (traced) {
    traced.arg("kind", std::string(op.info().mnemonic));
    traced.arg("bytes", (int64_t)op.operands[0]->type.byteSize());
    const std::string meshName = op.attrs.getString("mesh");
    traced.arg("mesh", meshName);
    std::vector<std::string> axes;
    const ir::Mesh* mesh = ctx.mesh ? &ctx.mesh(meshName) : nullptr;
    for (int64_t a : op.attrs.getInts("axes"))
      axes.push_back(mesh && a >= 0 && a < (int64_t)mesh->axes.size() ? mesh->axes[a].name : std::to_string(a));
    traced.arg("axes", axes);
    if (ctx.comm) sentBefore = ctx.comm->stats.bytesSent[op.kind];
  }
  auto t0 = std::chrono::steady_clock::now();
  collectiveImpl(op, static_cast<const char*>(in), static_cast<char*>(out), ctx);
  if (ctx.comm) ctx.comm->stats.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (traced && ctx.comm) traced.arg("bytes_sent", (int64_t)(ctx.comm->stats.bytesSent[op.kind] - sentBefore));
}

std::array<size_t, 2> collectiveScratchBytes(const Op& op) {
  const size_t in = (size_t)op.operands[0]->type.byteSize();
  switch (op.kind) {
    case OpKind::AllGather:  // the gathered blocks, unpacked into the result
      return {op.attrs.getInt("dim") != 0 ? (size_t)op.result->type.byteSize() : 0, 0};
    case OpKind::ReduceScatter:  // the operand's blocks, packed
      return {op.attrs.getInt("dim") != 0 ? in : 0, 0};
    case OpKind::AllToAll:  // the blocks sent, packed; the blocks received, unpacked
      return {op.attrs.getInt("split_dim") != 0 ? in : 0, op.attrs.getInt("concat_dim") != 0 ? in : 0};
    default: return {0, 0};
  }
}

static void collectiveImpl(const Op& op, const char* in, char* out, const KernelContext& ctx) {
  const char* name = op.info().mnemonic;
  const std::string what = std::string("evalCollective: ") + name;
  GSL_ASSERT(op.info().cls == ir::OpClass::Collective, what + " is not a collective");
  GSL_ASSERT(op.result && op.operands.size() == 1, what + " without its operand and result");
  const ir::AttrMap& at = op.attrs;
  const TensorType& it = op.operands[0]->type;
  const TensorType& rt = op.result->type;
  // The groups were resolved when the program was built (passes/ResolveGroups).
  GSL_ASSERT(op.groups, "internal error: " + what + " without its resolved groups");
  const ir::CollectiveGroups& groups = *op.groups;
  GSL_ASSERT(ctx.rank >= 0 && ctx.rank < (int)groups.groupOf.size(),
             "internal error: " + what + ": rank " + std::to_string(ctx.rank) + " is outside the mesh");
  const std::vector<int>& group = groups.groups[(size_t)groups.groupOf[(size_t)ctx.rank]];
  const int index = groups.indexOf[(size_t)ctx.rank];
  const int64_t n = (int64_t)group.size();
  if (at.has("n"))
    GSL_ASSERT(at.getInt("n") == n, what + ": attr n = " + std::to_string(at.getInt("n")) +
                                        " but the group over mesh '" + at.getString("mesh") + "' has " +
                                        std::to_string(n) +
                                        " members");
  const int64_t eb = ir::dtypeBytes(it.dtype);
  const size_t bytes = (size_t)it.byteSize();

  if (op.kind == OpKind::ShardSlice) {  // local: block `index` of dim
    const int64_t dim = at.getInt("dim");
    GSL_ASSERT(dim >= 0 && dim < it.rank(), what + ": bad dim");
    Shape s = it.shape;
    s[dim] = (s[dim] + n - 1) / n;
    GSL_ASSERT(s == rt.shape, what + ": result type does not match the group size");
    const int64_t outer = product(s, 0, (size_t)dim);
    const int64_t piece = product(s, (size_t)dim, s.size()) * eb;  // bytes
    if (it.shape[dim] % n == 0) {
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(out + o * piece, in + (o * n + index) * piece, piece);
      return;
    }
    // A padded dim: this block's rows [index * c, (index + 1) * c), those
    // past the dim's end zeros.
    const int64_t c = s[dim], inner = piece / std::max<int64_t>(c, 1);  // inner: bytes of a row
    const int64_t rows = std::clamp<int64_t>(it.shape[dim] - index * c, 0, c);
    const int64_t inRow = it.shape[dim] * inner;
    for (int64_t o = 0; o < outer; ++o) {
      if (rows) std::memcpy(out + o * piece, in + o * inRow + index * c * inner, rows * inner);
      std::memset(out + o * piece + rows * inner, 0, (c - rows) * inner);
    }
    return;
  }
  if (op.kind == OpKind::PadMask) {  // local: padding rows of this block set to `value`
    const int64_t dim = at.getInt("dim"), size = at.getInt("size");
    GSL_ASSERT(dim >= 0 && dim < it.rank() && rt == it, what + ": bad dim or result type");
    const int64_t c = it.shape[dim];
    const int64_t outer = product(it.shape, 0, (size_t)dim);
    const int64_t inner = product(it.shape, (size_t)dim + 1, it.shape.size());
    const int64_t rows = std::clamp<int64_t>(size - index * c, 0, c);
    const double value = at.getFloat("value");
    // The fill value's bytes in the operand's dtype (eb bytes).
    char fill[4] = {0, 0, 0, 0};
    if (it.dtype == DType::F32) {
      float f = (float)value;
      std::memcpy(fill, &f, 4);
    } else if (it.dtype == DType::BF16) {
      uint16_t h = gsl::f32ToBF16((float)value);
      std::memcpy(fill, &h, 2);
    } else {
      int32_t v = (int32_t)value;
      std::memcpy(fill, &v, 4);
    }
    if (bytes && in != out) std::memcpy(out, in, bytes);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t e = (o * c + rows) * inner; e < (o + 1) * c * inner; ++e) std::memcpy(out + e * eb, fill, eb);
    return;
  }

  GSL_ASSERT(ctx.comm, what + " without a communicator");
  Communicator& comm = *ctx.comm;
  GSL_ASSERT(comm.rank() == ctx.rank, what + ": the communicator's rank differs from the context's");
  switch (op.kind) {
    case OpKind::AllGather: {
      const int64_t dim = at.getInt("dim");
      GSL_ASSERT(dim >= 0 && dim < it.rank(), what + ": bad dim");
      Shape s = it.shape;
      s[dim] *= n;
      GSL_ASSERT(s == rt.shape && rt.dtype == it.dtype, what + ": result type does not match the group size");
      if (dim == 0) {  // blocks along the major dim are already in place
        comm.allGather(group, in, bytes, out);
        return;
      }
      const auto blocks = comm.scratch(0, collectiveScratchBytes(op)[0]);
      comm.allGather(group, in, bytes, blocks.get());
      unpackBlocks(blocks.get(), it.shape, dim, n, eb, out);
      return;
    }
    case OpKind::AllReduce: {
      GSL_ASSERT(rt == it, what + ": result type differs from the operand's");
      const ReduceOp r = at.has("reduce") ? at.getReduce("reduce") : ReduceOp::Sum;
      // bool is int32 0/1: max is `or`, min is `and`; a sum is meaningless.
      GSL_ASSERT(!(it.dtype == DType::Bool && r == ReduceOp::Sum), what + ": sum of bool");
      if (bytes && in != out) std::memcpy(out, in, bytes);
      comm.allReduce(group, bytes ? out : nullptr, (size_t)it.numElements(),
                     it.dtype == DType::Bool ? DType::I32 : it.dtype, r);
      return;
    }
    case OpKind::ReduceScatter: {
      const int64_t dim = at.getInt("dim");
      GSL_ASSERT(dim >= 0 && dim < it.rank() && it.shape[dim] % n == 0, what + ": bad dim");
      GSL_ASSERT(it.dtype != DType::Bool, what + ": sum of bool");
      Shape s = it.shape;
      s[dim] /= n;
      GSL_ASSERT(s == rt.shape && rt.dtype == it.dtype, what + ": result type does not match the group size");
      const size_t count = (size_t)rt.numElements();
      if (dim == 0) {  // the blocks along the major dim are contiguous
        comm.reduceScatter(group, in, count, it.dtype, count ? out : nullptr);
        return;
      }
      const auto packed = comm.scratch(0, collectiveScratchBytes(op)[0]);
      packBlocks(in, it.shape, dim, n, eb, packed.get());
      comm.reduceScatter(group, packed.get(), count, it.dtype, count ? out : nullptr);
      return;
    }
    case OpKind::AllToAll: {
      const int64_t sd = at.getInt("split_dim"), cd = at.getInt("concat_dim");
      GSL_ASSERT(sd >= 0 && sd < it.rank() && cd >= 0 && cd < it.rank() && it.shape[sd] % n == 0,
                 what + ": bad split_dim or concat_dim");
      Shape block = it.shape;
      block[sd] /= n;
      Shape s = block;
      s[cd] *= n;
      GSL_ASSERT(s == rt.shape && rt.dtype == it.dtype, what + ": result type does not match the group size");
      const std::array<size_t, 2> scratch = collectiveScratchBytes(op);
      const auto packed = comm.scratch(0, scratch[0]);
      const char* send = in;
      if (sd != 0) {
        packBlocks(in, it.shape, sd, n, eb, packed.get());
        send = packed.get();
      }
      if (cd == 0) {  // received blocks along the major dim are already in place
        comm.allToAll(group, send, bytes / n, out);
        return;
      }
      const auto recv = comm.scratch(1, scratch[1]);
      comm.allToAll(group, send, bytes / n, recv.get());
      unpackBlocks(recv.get(), block, cd, n, eb, out);
      return;
    }
    case OpKind::CollectivePermute: {
      GSL_ASSERT(rt == it, what + ": result type differs from the operand's");
      const auto& perm = at.getInts("perm");
      GSL_ASSERT((int64_t)perm.size() == n, what + ": perm has the wrong length for the group");
      comm.permute(group, perm, bytes ? in : nullptr, bytes, bytes ? out : nullptr);
      return;
    }
    default: break;
  }
  GSL_ASSERT(false, what + ": unsupported collective");
}

}  // namespace gsl::backend
