// Shared-memory communication for N ranks run as threads of one process.
//
// A ThreadWorld is the state the ranks share; each rank thread owns one
// ThreadComm referencing it. A collective is a rendezvous keyed by (group,
// the group's call sequence number on the calling rank): every member posts
// a description of its call and its buffer pointers, blocks (condition
// variable, never spinning) until all members posted, checks that the calls
// match, copies what it needs straight out of its peers' buffers, and then
// blocks until every member finished reading, so no buffer is released
// while a peer may still read it. A collective may have a second phase
// after a group-wide barrier (all_reduce: each member reduces its own
// chunk of everyone's buffer, then, once all chunks are reduced, copies the
// reduced chunks into its buffer: a reduce-scatter plus an all-gather that
// touches each byte once). A group of one member needs no rendezvous.
//
// Failures never hang: a mismatched call makes every member throw
// CommError("collective mismatch: ..."); abort(why) (or runRanks seeing a
// rank throw) marks the world failed and every blocked or later call throws
// CommError("rank R failed: why"); and when every rank is either blocked in
// an incomplete collective or finished (a rank skipped a collective its
// peers entered), the world fails with "collective deadlock: ...".
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/Communicator.h"
#include "ir/OpTable.h"

namespace gsl::runtime {

// Bytes one rank sends in a collective of a group of n members, as counted
// into Communicator::stats by every communicator: the op table's byte-volume
// column (ir/OpTable.h), the same formula the cost model uses, from the
// bytes of the local input (independent of how an implementation really
// moves the data).
struct CommVolume {
  static uint64_t of(ir::OpKind k, size_t n, uint64_t inputBytes) {
    return ir::opInfo(k).volume(n, inputBytes);
  }
  static uint64_t allGather(size_t n, uint64_t bytes) { return of(ir::OpKind::AllGather, n, bytes); }
  static uint64_t allReduce(size_t n, uint64_t bytes) { return of(ir::OpKind::AllReduce, n, bytes); }
  // `blockBytes` is one of the input's n blocks.
  static uint64_t reduceScatter(size_t n, uint64_t blockBytes) {
    return of(ir::OpKind::ReduceScatter, n, blockBytes * n);
  }
  static uint64_t allToAll(size_t n, uint64_t blockBytes) { return of(ir::OpKind::AllToAll, n, blockBytes * n); }
  // Nothing when this member receives its own block (a static count cannot
  // know which member that is, so the cost model counts the buffer).
  static uint64_t permute(bool toSelf, uint64_t bytes) {
    return toSelf ? 0 : of(ir::OpKind::CollectivePermute, /*n (the rule ignores it)=*/1, bytes);
  }
};

class ThreadWorld {
 public:
  explicit ThreadWorld(int size);
  ~ThreadWorld();
  ThreadWorld(const ThreadWorld&) = delete;
  ThreadWorld& operator=(const ThreadWorld&) = delete;

  int size() const { return size_; }

  // Marks the world failed because `rank` failed (the first failure wins):
  // every blocked or later collective throws CommError("rank R failed: why").
  void abort(int rank, const std::string& why);
  // Reports that `rank` will make no more collective calls (its thread
  // ended); lets the world detect peers waiting for it forever.
  void finished(int rank);
  bool failed() const;
  // The failure message ("" while the world is healthy).
  std::string failure() const;
  // Throws CommError(failure()) once the world failed.
  void throwIfFailed() const;

 private:
  friend class ThreadComm;
  struct Rendezvous;
  struct Call;

  // Runs one collective for `rank`: posts `call`, waits for the group,
  // checks the calls match, runs `body(posts)` (posts in member order) to
  // copy from peers, then, if `second` is given, waits until every member
  // ran `body` and runs `second(posts)`; then waits until every member is
  // done.
  using Body = std::function<void(const std::vector<const Call*>&)>;
  void collective(int rank, const std::vector<int>& group, uint64_t seq, const Call& call, const Body& body,
                  const Body& second = nullptr);
  void failLocked(const std::string& msg);  // mu_ held
  void checkDeadlockLocked();               // mu_ held
  [[noreturn]] void throwFailure() const;   // mu_ held

  const int size_;
  mutable std::mutex mu_;
  std::string failure_;  // guarded by mu_; "" while healthy
  bool failedFlag_ = false;
  std::map<std::pair<std::vector<int>, uint64_t>, std::shared_ptr<Rendezvous>> open_;
  std::vector<const Rendezvous*> waitingIn_;  // per rank: incomplete rendezvous it waits in
  std::vector<bool> finished_;
  int waiting_ = 0;   // ranks posted to an incomplete rendezvous
  int finishedCount_ = 0;
};

class ThreadComm : public backend::Communicator {
 public:
  ThreadComm(ThreadWorld& world, int rank);

  int rank() const override { return rank_; }
  int size() const override { return world_.size(); }

  void allGather(const std::vector<int>& group, const void* send, size_t bytes, void* recv) override;
  void allReduce(const std::vector<int>& group, void* data, size_t count, ir::DType dt,
                 backend::ReduceOp op) override;
  void reduceScatter(const std::vector<int>& group, const void* send, size_t count, ir::DType dt,
                     void* recv) override;
  void allToAll(const std::vector<int>& group, const void* send, size_t bytes, void* recv) override;
  void permute(const std::vector<int>& group, const std::vector<int64_t>& perm, const void* send,
               size_t bytes, void* recv) override;
  void barrier() override;
  void abort(const std::string& why) override;

  ThreadWorld& world() { return world_; }

 private:
  // This rank's index in `group`, after checking the group is well formed.
  int memberIndex(const std::vector<int>& group) const;
  uint64_t nextSeq(const std::vector<int>& group) { return seq_[group]++; }
  // A collective over a group of one member needs no rendezvous: true (after
  // counting the call) when `group` is just this rank.
  bool solo(const std::vector<int>& group, const char* kind);

  ThreadWorld& world_;
  const int rank_;
  std::map<std::vector<int>, uint64_t> seq_;  // calls made per group
};

// Runs `body(rank, comm)` on n threads sharing one ThreadWorld. When a rank
// throws, the world is aborted with its message so that the others stop
// instead of waiting for it. Joins every thread; returns one entry per rank
// (null where the rank returned normally).
std::vector<std::exception_ptr> runRanks(int n, const std::function<void(int rank, backend::Communicator&)>& body);

// The error to report for a run: the lowest rank's exception that is not a
// CommError (the root cause; the CommErrors are its consequences), else the
// lowest rank's CommError; null if every rank succeeded.
std::exception_ptr rootCause(const std::vector<std::exception_ptr>& errors);

// runRanks, then rethrows rootCause() if any rank failed.
void runRanksOrThrow(int n, const std::function<void(int rank, backend::Communicator&)>& body);

}  // namespace gsl::runtime
