// Shared-memory communication for N ranks run as threads of one process.
//
// A ThreadWorld is the state the ranks share; each rank thread owns one
// ThreadComm referencing it. A collective is a rendezvous keyed by (group,
// the group's call sequence number on the calling rank): every member posts
// a description of its call (kept in the rendezvous) and its buffer
// pointers, waits until all members posted, checks that the calls match,
// and then moves data in one of two modes:
//   - staged (calls of at most kStagedBytes): each member copies its send
//     buffer into the rendezvous when it posts, and peers read only those
//     copies, so a member leaves as soon as its own reads are done: one
//     rendezvous per call. A staged all_reduce is reduced once, by the
//     member that posts last, into the rendezvous, and every member copies
//     the result: n reads of each copy in all instead of n per member (n^2),
//     which with ranks outnumbering the cores was most of a step;
//   - direct (larger calls): members read (and, for all_reduce, write) each
//     other's buffers in place, and then wait until every member finished,
//     so no buffer is released while a peer may still touch it. all_reduce
//     is a reduce-scatter plus an all-gather in one phase: member m reduces
//     chunk m of everyone's buffer and writes the result into chunk m of
//     every member's buffer, so each byte is read and written once per
//     member.
// A group of one member needs no rendezvous. Waits spin briefly (yielding
// the core, so ranks outnumbering cores still progress), then park on a
// condition variable.
//
// collective_permute is point to point instead: the member that receives
// from member perm[me] waits only for that member's post, never for the
// rest of the group. It shares the (group, sequence number) rendezvous with
// the other kinds, so a member that called another collective there is
// still a mismatch, but nobody waits for the rendezvous to complete.
// Staged (small) blocks are copied into the rendezvous when posted, so the
// sender returns at once; a direct (larger) block is read in place by its
// one receiver, and the sender waits for that receiver's copy alone. The
// receiver compares its source's call with its own; the member that posts
// last compares the whole group's calls and throws a mismatch itself (the
// members gone by then see the world fail).
//
// Failures never hang: a mismatched call makes every member throw
// CommError("collective mismatch: ..."); abort(why) (or runRanks seeing a
// rank throw) marks the world failed and every blocked or later call throws
// CommError("rank R failed: why"); and when every rank is either blocked in
// an incomplete collective or finished (a rank skipped a collective its
// peers entered), the world fails with "collective deadlock: ...".
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backend/Communicator.h"
#include "ir/OpTable.h"

namespace gsl::runtime {

// A spinning wait's pause: lets the core's other hardware thread run.
inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// The world's lock: held for a few hundred nanoseconds per call (posting
// to a rendezvous), by ranks on every core at once. A contended std::mutex
// costs a futex sleep and wake-up (kernel calls) each time; this one spins
// (pausing), then yields the core, so a holder switched out still gets
// to finish.
class SpinMutex {
 public:
  void lock() {
    for (unsigned i = 0; locked_.exchange(true, std::memory_order_acquire); ++i) {
      while (locked_.load(std::memory_order_relaxed)) {
        if (++i < 128) {
          cpuRelax();
        } else {
          std::this_thread::yield();
        }
      }
    }
  }
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

class ThreadWorld {
 public:
  explicit ThreadWorld(int size);
  ~ThreadWorld();
  ThreadWorld(const ThreadWorld&) = delete;
  ThreadWorld& operator=(const ThreadWorld&) = delete;

  int size() const { return size_; }

  // Calls sending at most this many bytes are staged (file comment): a
  // copy of a few KiB costs less than a second rendezvous.
  static constexpr uint64_t kStagedBytes = 32 * 1024;
  // How a collective's data moves (see the file comment).
  enum class Mode { Staged, Direct };
  // One member's call (defined in ThreadComm.cpp).
  struct Call;

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

  // Runs one collective for `rank`: posts `call` (Staged: with a copy of
  // its `bytes` bytes from `send`), waits for the group, checks the calls
  // match, runs `body(posts, combined)` (posts in member order); Direct:
  // then waits until every member ran its body. With a `combine` (Staged
  // only), the member that posts last runs `combine(posts, combined)` once,
  // before the others are released, and every member's body reads its
  // result `combined` (kept in the rendezvous).
  using Body = std::function<void(const std::vector<const Call*>&, const std::vector<char>& combined)>;
  using Combine = std::function<void(const std::vector<const Call*>&, std::vector<char>& combined)>;
  void collective(int rank, const std::vector<int>& group, uint64_t seq, Call call, Mode mode, const Body& body,
                  const Combine& combine = nullptr);
  // Runs one collective_permute for `rank` point to point (file comment):
  // posts `call` (Staged: with a copy of its `bytes` bytes from `send`),
  // copies the block of member `from` into `recv` once that member posted
  // and, Direct, waits until member `to` (whose source is this rank)
  // copied this rank's block. `from` == this rank's member index: its own
  // block, no wait.
  void permute(int rank, const std::vector<int>& group, uint64_t seq, Call call, Mode mode, size_t from, size_t to,
               void* recv);
  // Finds (or opens) the rendezvous of `group`'s call `seq` and holds it
  // (it is recycled once complete and released by every holder).
  Rendezvous* enter(const std::vector<int>& group, uint64_t seq);
  void release(Rendezvous* r);
  // Holds the rendezvous of `group`'s call `seq` for a scope: entered on
  // construction, released on exit.
  struct Held {
    Held(ThreadWorld& world, const std::vector<int>& group, uint64_t seq) : w(world), r(world.enter(group, seq)) {}
    ~Held() { w.release(r); }
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;
    ThreadWorld& w;
    Rendezvous* r;
  };
  // Member `me`'s call in `r`, from `call` (before it is posted: no peer
  // reads it yet); with `stage`, a copy of its send buffer, which peers
  // read instead, made outside the lock.
  Call& placeCall(Rendezvous& r, size_t me, Call call, bool stage);
  // Closes `r` once its last member posted (mu_ held): releases the members
  // waiting for every post and checks the calls.
  void closeLocked(Rendezvous* r);
  // Wakes the members of `r` parked on its condition variable.
  static void wake(Rendezvous& r);
  // Waits until `ready()`: spins (yielding) briefly, then parks on r's
  // condition variable. Returns false once `stop()` is true.
  template <typename Ready, typename Stop>
  static bool await(Rendezvous& r, Ready ready, Stop stop);
  void failLocked(const std::string& msg);  // mu_ held
  void checkDeadlockLocked();               // mu_ held
  [[noreturn]] void throwFailure() const;   // mu_ held

  const int size_;
  mutable SpinMutex mu_;
  std::string failure_;  // guarded by mu_; "" while healthy
  std::atomic<bool> failedFlag_{false};  // written under mu_; read by spinning waits
  // Rendezvous still waiting for members (found by group and sequence
  // number; few are open at once). Every rendezvous is owned by owned_ and
  // reused: once complete and left by every member it goes to free_, so a
  // step's thousands of calls allocate nothing (an allocation freed by the
  // other core's thread contends for malloc's lock).
  std::vector<Rendezvous*> open_;
  std::vector<std::unique_ptr<Rendezvous>> owned_;
  std::vector<Rendezvous*> free_;
  // What a blocked rank waits for: every member's post (a collective), or
  // one peer of a collective_permute (its source's post, or, Direct, its
  // destination's copy of this rank's block).
  enum class WaitFor : uint8_t { All, Source, Taken };
  struct Waiting {
    Rendezvous* r = nullptr;  // the rendezvous it waits in (null: not blocked)
    WaitFor what = WaitFor::All;
    int peer = -1;  // Source, Taken: the peer's world rank
  };
  // Marks `rank` blocked / no longer blocked (mu_ held).
  void blockLocked(int rank, Rendezvous* r, WaitFor what, int peer);
  void unblockLocked(int rank);
  std::vector<Waiting> waitingIn_;  // per rank
  std::vector<bool> finished_;
  int waiting_ = 0;   // ranks blocked (waitingIn_[rank].r set)
  int finishedCount_ = 0;
};

class ThreadComm : public backend::Communicator {
 public:
  ThreadComm(ThreadWorld& world, int rank);

  int rank() const override { return rank_; }
  int size() const override { return world_.size(); }

  void barrier() override;
  void abort(const std::string& why) override;

  ThreadWorld& world() { return world_; }

 private:
  // The transports (backend/Communicator.h says what each computes).
  void runAllGather(const std::vector<int>& group, const void* send, size_t bytes, void* recv) override;
  void runAllReduce(const std::vector<int>& group, void* data, size_t count, ir::DType dt,
                 backend::ReduceOp op) override;
  void runReduceScatter(const std::vector<int>& group, const void* send, size_t count, ir::DType dt,
                     void* recv) override;
  void runAllToAll(const std::vector<int>& group, const void* send, size_t bytes, void* recv) override;
  void runPermute(const std::vector<int>& group, const std::vector<int64_t>& perm, const void* send,
               size_t bytes, void* recv) override;
  // What this rank keeps of a group: its index in it and the calls made.
  struct GroupState {
    int index = -1;    // this rank's index in the group
    uint64_t seq = 0;  // calls made (the next call's number)
  };
  // `group`'s state, after checking on its first call that the group is
  // well formed and holds this rank (a step calls the same few groups
  // thousands of times).
  GroupState& checkedGroup(const std::vector<int>& group);
  // A collective over a group of one member needs no rendezvous: true when
  // `group` is just this rank.
  bool solo(const std::vector<int>& group);

  ThreadWorld& world_;
  const int rank_;
  std::map<std::vector<int>, GroupState> groups_;
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
