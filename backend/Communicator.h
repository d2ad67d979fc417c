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
#include <vector>

#include "ir/Type.h"

namespace gsl::backend {

struct CommError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class ReduceOp { Sum, Max, Min };

// Bytes this rank sent, per collective kind ("all_reduce", ...), and counts.
struct CommStats {
  std::map<std::string, uint64_t> bytesSent;
  std::map<std::string, uint64_t> calls;
  double seconds = 0;  // wall time spent in collective ops (kernels included)
  void add(const std::string& kind, uint64_t bytes) {
    bytesSent[kind] += bytes;
    calls[kind] += 1;
  }
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;  // world rank
  virtual int size() const = 0;  // world size

  // recv = the members' `bytes`-sized send buffers, concatenated in member order.
  virtual void allGather(const std::vector<int>& group, const void* send, size_t bytes, void* recv) = 0;
  // In place: data[i] = reduction over members of data[i]; 4-byte elements
  // of dtype `dt` (f32 or i32).
  virtual void allReduce(const std::vector<int>& group, void* data, size_t count, ir::DType dt, ReduceOp op) = 0;
  // send holds group.size() blocks of `count` elements; recv (count
  // elements) = sum over members of their block number `my member index`.
  virtual void reduceScatter(const std::vector<int>& group, const void* send, size_t count, ir::DType dt,
                             void* recv) = 0;
  // send holds group.size() blocks of `bytes`; block j goes to member j;
  // recv block i is what member i sent to this rank.
  virtual void allToAll(const std::vector<int>& group, const void* send, size_t bytes, void* recv) = 0;
  // Member i receives (into recv, `bytes`) the send buffer of member perm[i].
  virtual void permute(const std::vector<int>& group, const std::vector<int64_t>& perm, const void* send,
                       size_t bytes, void* recv) = 0;
  virtual void barrier() = 0;
  // Marks this rank as failed with a reason: every rank blocked in, or later
  // entering, a collective throws CommError naming this rank.
  virtual void abort(const std::string& why) = 0;

  CommStats stats;
};

}  // namespace gsl::backend
