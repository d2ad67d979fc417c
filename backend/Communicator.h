// Communication between ranks. Two real implementations live in runtime/:
// threads in one process (shared memory, blocking waits) and OpenMPI.
//
// A collective is called by every member of `group` (world ranks, listed in
// group order: member i is group[i]) with matching arguments; calls on a
// group are matched in program order (SPMD). A mismatch (different kind or
// size) or a failed rank makes every waiting member throw CommError
// instead of hanging.
#pragma once
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <memory>
#include <vector>

#include "ir/OpTable.h"
#include "ir/Type.h"

namespace gsl::backend {

struct CommError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using ir::ReduceOp;  // all_reduce's reduction, an IR attr (ir/Attr.h)

// Bytes this rank sent, per collective kind (the op's mnemonic,
// "all_reduce", ...), and counts.
struct CommStats {
  ir::OpKindMap<uint64_t> bytesSent;
  ir::OpKindMap<uint64_t> calls;
  double seconds = 0;  // wall time spent in collective ops (kernels included)
  void add(ir::OpKind kind, uint64_t bytes) {
    bytesSent[kind] += bytes;
    calls[kind] += 1;
  }
};

// One collective call, as every communicator receives it. A collective
// kind is registered once: its op-table row (ir/OpTable.cpp: mnemonic, the
// stats key; byte-volume rule, what `stats` counts), its typed entry point
// below, its case in `run` and its transport in each communicator.
struct CollectiveCall {
  ir::OpKind kind;
  const std::vector<int>* group;  // world ranks in member order
  const void* send;               // all_reduce: in place, send == recv
  void* recv;
  size_t bytes = 0;  // all_gather, all_to_all: one block; collective_permute: the buffer
  size_t count = 0;  // all_reduce: elements; reduce_scatter: elements of the received block
  ir::DType dtype = ir::DType::F32;
  ReduceOp op = ReduceOp::Sum;
  const std::vector<int64_t>* perm = nullptr;  // collective_permute

  // Bytes of this rank's local input, which the op table's volume rule reads.
  uint64_t inputBytes() const;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;  // world rank
  virtual int size() const = 0;  // world size

  // recv = the members' `bytes`-sized send buffers, concatenated in member order.
  void allGather(const std::vector<int>& group, const void* send, size_t bytes, void* recv) {
    collective({ir::OpKind::AllGather, &group, send, recv, bytes});
  }
  // In place: data[i] = reduction over members of data[i]; elements of
  // dtype `dt` (f32, i32 or bf16).
  void allReduce(const std::vector<int>& group, void* data, size_t count, ir::DType dt, ReduceOp op) {
    collective({ir::OpKind::AllReduce, &group, data, data, 0, count, dt, op});
  }
  // send holds group.size() blocks of `count` elements; recv (count
  // elements) = sum over members of their block number `my member index`.
  void reduceScatter(const std::vector<int>& group, const void* send, size_t count, ir::DType dt, void* recv) {
    collective({ir::OpKind::ReduceScatter, &group, send, recv, 0, count, dt});
  }
  // send holds group.size() blocks of `bytes`; block j goes to member j;
  // recv block i is what member i sent to this rank.
  void allToAll(const std::vector<int>& group, const void* send, size_t bytes, void* recv) {
    collective({ir::OpKind::AllToAll, &group, send, recv, bytes});
  }
  // Member i receives (into recv, `bytes`) the send buffer of member perm[i].
  void permute(const std::vector<int>& group, const std::vector<int64_t>& perm, const void* send, size_t bytes,
               void* recv) {
    collective({ir::OpKind::CollectivePermute, &group, send, recv, bytes, 0, ir::DType::F32, ReduceOp::Sum, &perm});
  }
  // Every collective: `run` moves the data, then the call is counted in
  // `stats` with the op table's byte volume (nothing for a group of one, or
  // a permute that keeps this rank's own block).
  void collective(const CollectiveCall& c);

  virtual void barrier() = 0;
  // Marks this rank as failed with a reason: every rank blocked in, or later
  // entering, a collective throws CommError naming this rank.
  virtual void abort(const std::string& why) = 0;

  CommStats stats;

  // Scratch memory for packing a collective's blocks (backend/Collectives:
  // gathers and scatters along a dim other than the first): at least
  // `bytes`, not zeroed, valid while the returned handle lives. Buffer
  // `slot` (0 or 1) of up to kKeptScratch bytes is kept from call to call
  // (a rank makes one collective call at a time, so it is never in use
  // twice); a larger one (a bandwidth-bound call) is allocated for the
  // call only, so that no rank holds a gathered weight's size for good.
  static constexpr size_t kKeptScratch = 4 << 20;
  class ScratchBuffer {
   public:
    char* get() const { return p_; }

   private:
    friend class Communicator;
    char* p_ = nullptr;
    std::unique_ptr<char[]> own_;
  };
  ScratchBuffer scratch(int slot, size_t bytes) {
    ScratchBuffer b;
    if (bytes > kKeptScratch) {
      b.own_.reset(new char[bytes]);
      b.p_ = b.own_.get();
      return b;
    }
    Scratch& s = scratch_[slot];
    if (s.size < bytes) {
      s.p.reset(new char[bytes]);
      s.size = bytes;
    }
    b.p_ = s.p.get();
    return b;
  }

 protected:
  // The transport of one call: a switch calling the kind's transport below
  // (a wrapper such as the fault-injecting test communicator overrides it).
  virtual void run(const CollectiveCall& c);
  // The transports, one per kind, as the typed entry points above say what
  // each computes; a communicator implements every one (a wrapper that
  // overrides `run` need not: the defaults are internal errors).
  virtual void runAllGather(const std::vector<int>& group, const void* send, size_t bytes, void* recv);
  virtual void runAllReduce(const std::vector<int>& group, void* data, size_t count, ir::DType dt, ReduceOp op);
  virtual void runReduceScatter(const std::vector<int>& group, const void* send, size_t count, ir::DType dt,
                                void* recv);
  virtual void runAllToAll(const std::vector<int>& group, const void* send, size_t bytes, void* recv);
  virtual void runPermute(const std::vector<int>& group, const std::vector<int64_t>& perm, const void* send,
                          size_t bytes, void* recv);

 private:
  struct Scratch {
    std::unique_ptr<char[]> p;
    size_t size = 0;
  };
  Scratch scratch_[2];
};

}  // namespace gsl::backend
