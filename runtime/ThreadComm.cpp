#include "runtime/ThreadComm.h"

#include "runtime/Fibers.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <system_error>
#include <thread>

#include "support/BF16.h"
#include "support/Diagnostics.h"  // UserError
#include "support/Trace.h"

namespace gsl::runtime {

using backend::CommError;
using backend::ReduceOp;

namespace {

// How often a blocked rank re-checks the world's failure flag even without
// a notification (abort notifies, so this is only a safety net).
constexpr auto kRecheck = std::chrono::milliseconds(20);

std::string groupStr(const std::vector<int>& g) {
  std::string s = "[";
  for (size_t i = 0; i < g.size(); ++i) s += (i ? ", " : "") + std::to_string(g[i]);
  return s + "]";
}

// Reduces n arrays of `count` 4-byte elements (in member order, so every
// member computes bit-identical results) into `out`.
template <typename T>
void reduceInto(T* out, const std::vector<const T*>& src, size_t count, ReduceOp op) {
  std::memcpy(out, src[0], count * sizeof(T));
  for (size_t m = 1; m < src.size(); ++m) {
    const T* s = src[m];
    switch (op) {
      case ReduceOp::Sum:
        if constexpr (std::is_same_v<T, int32_t>) {
          // i32 arithmetic wraps, as in the kernels.
          for (size_t i = 0; i < count; ++i) out[i] = (int32_t)((uint32_t)out[i] + (uint32_t)s[i]);
        } else {
          for (size_t i = 0; i < count; ++i) out[i] += s[i];
        }
        break;
      case ReduceOp::Max:
        for (size_t i = 0; i < count; ++i) out[i] = std::max(out[i], s[i]);
        break;
      case ReduceOp::Min:
        for (size_t i = 0; i < count; ++i) out[i] = std::min(out[i], s[i]);
        break;
    }
  }
}

void reduceWords(void* out, const std::vector<const void*>& src, size_t count, ir::DType dt, ReduceOp op) {
  if (dt == ir::DType::BF16) {  // sent as bf16, reduced in f32 in member order, rounded once
    std::vector<std::vector<float>> wide(src.size(), std::vector<float>(count));
    std::vector<const float*> s;
    for (size_t m = 0; m < src.size(); ++m) {
      widenBF16(static_cast<const uint16_t*>(src[m]), wide[m].data(), (int64_t)count);
      s.push_back(wide[m].data());
    }
    std::vector<float> acc(count);
    reduceInto(acc.data(), s, count, op);
    narrowBF16(acc.data(), static_cast<uint16_t*>(out), (int64_t)count);
  } else if (dt == ir::DType::F32) {
    std::vector<const float*> s;
    for (const void* p : src) s.push_back(static_cast<const float*>(p));
    reduceInto(static_cast<float*>(out), s, count, op);
  } else {
    std::vector<const int32_t*> s;
    for (const void* p : src) s.push_back(static_cast<const int32_t*>(p));
    reduceInto(static_cast<int32_t*>(out), s, count, op);
  }
}

// Whether writing `recv` could change `send` while peers read it. Callers
// pass the larger of the two buffer sizes, so this errs on the safe side.
bool overlaps(const void* send, const void* recv, size_t bytes) {
  auto s = reinterpret_cast<uintptr_t>(send), r = reinterpret_cast<uintptr_t>(recv);
  return bytes && send && recv && r < s + bytes && s < r + bytes;
}

}  // namespace

// ================================================================ the world

// One rank's side of a collective call: what must match across members, and
// the buffers peers read from (and, for a direct all_reduce, write into).
struct ThreadWorld::Call {
  Call() = default;
  Call(std::string k, uint64_t b, std::string d, const void* s)
      : kind(std::move(k)), bytes(b), detail(std::move(d)), send(s) {}
  std::string kind;    // "all_reduce", ...
  uint64_t bytes = 0;  // size of the call (the send buffer)
  std::string detail;  // further parameters that must match ("f32 sum", a perm)
  const void* send = nullptr;
  void* recv = nullptr;      // a direct all_reduce: the buffer its chunk owners write into
  std::vector<char> staged;  // Staged: the copy of `send` (send points here once posted)

  std::string str() const { return kind + " of " + std::to_string(bytes) + " bytes"; }
};

struct ThreadWorld::Rendezvous {
  // Makes this (new or recycled) rendezvous the one of `g`'s call `s`; the
  // buffers of its earlier use keep their capacity.
  void reset(const std::vector<int>& g, uint64_t s) {
    group.assign(g.begin(), g.end());
    seq = s;
    if (calls.size() < g.size()) calls.resize(g.size());  // never shrunk: the calls keep their buffers
    posts.assign(g.size(), nullptr);
    if (sentCap < g.size()) {
      sent.reset(new std::atomic<int>[g.size()]);
      sentCap = g.size();
    }
    for (size_t m = 0; m < g.size(); ++m) sent[m].store(kUnposted);
    posted = 0;
    complete.store(false);
    mismatch.clear();
    combineError.clear();
    done.store(0);
    refs.store(0);
    open = true;
    recycled = false;
    sourceWaiters = 0;
  }
  // A member's block, as its collective_permute receiver sees it (sent[m]).
  enum : int {
    kUnposted = 0,  // member m has not posted
    kPosted,        // a direct collective_permute block, waiting for its receiver
    kClaimed,       // its receiver is copying it
    kDone,          // nothing to wait for: staged, its own block, another kind of call, or copied
    kWithdrawn,     // its sender left (the world failed, or the group's calls mismatch)
  };
  std::vector<int> group;
  uint64_t seq = 0;
  std::vector<Call> calls;         // by member index (at least group.size()), kept here so peers may read them after a member left
  std::vector<const Call*> posts;  // &calls[m] once member m posted
  size_t posted = 0;               // guarded by the world's mu_
  std::atomic<bool> complete{false};  // every member posted (and the combine step ran)
  std::vector<char> combined;         // the combine step's result
  std::string mismatch;               // the calls' mismatch, found once by the last poster ("" if none)
  std::string combineError;           // what the combine step threw ("" if nothing)
  std::atomic<size_t> done{0};        // members finished reading
  std::atomic<int> refs{0};           // members inside collective() with it
  bool open = true;                   // in the world's open_ (guarded by mu_)
  bool recycled = false;              // in the world's free_ (guarded by mu_)
  int sourceWaiters = 0;              // members blocked for a collective_permute source's post (mu_)
  // Per member (the first group.size()): its block's state (k* above),
  // changed under the world's mu_ and read by spinning receivers.
  std::unique_ptr<std::atomic<int>[]> sent;
  size_t sentCap = 0;
  // Parking: a waiter that stops spinning sleeps on cv under m; wake()
  // notifies only when someone sleeps.
  std::mutex m;
  std::condition_variable cv;
  std::atomic<int> sleepers{0};
};

namespace {

// How long a wait spins before it parks. A peer that arrives within this
// time costs no sleep and no wake-up (futex) call; a longer wait costs at
// most this much of a core, and the spin yields, so ranks outnumbering the
// cores still run.
constexpr auto kSpinFor = std::chrono::microseconds(50);

}  // namespace

void ThreadWorld::wake(Rendezvous& r) {
  // The caller changed the waited-for state (seq_cst) before this load: a
  // waiter either sees the change or is counted here (it counts itself
  // before its last look, under m).
  fibers::progress();  // rank fibers poll instead of sleeping on cv
  if (r.sleepers.load() == 0) return;
  std::lock_guard<std::mutex> lock(r.m);
  r.cv.notify_all();
}

// Waits until `ready()`; spins (yielding) for up to kSpinFor, then parks on
// r's condition variable, re-checking every kRecheck. Returns false (without
// waiting further) once `stop()` is true.
template <typename Ready, typename Stop>
bool ThreadWorld::await(Rendezvous& r, Ready ready, Stop stop) {
  // A rank fiber lets the other ranks of its OS thread run until ready.
  for (;;) {
    if (ready()) return true;
    if (stop()) return false;
    if (!fibers::yield(/*idle=*/true)) break;
  }
  const auto until = std::chrono::steady_clock::now() + kSpinFor;
  for (unsigned i = 0;; ++i) {
    if (ready()) return true;
    if (stop()) return false;
    if (i < 64) {
      cpuRelax();
    } else {
      std::this_thread::yield();
      if ((i & 7) == 0 && std::chrono::steady_clock::now() > until) break;
    }
  }
  std::unique_lock<std::mutex> lock(r.m);
  r.sleepers.fetch_add(1);
  bool ok = true;
  while (!ready()) {
    if (stop()) {
      ok = false;
      break;
    }
    r.cv.wait_for(lock, kRecheck);
  }
  r.sleepers.fetch_sub(1);
  return ok;
}

ThreadWorld::ThreadWorld(int size) : size_(size), waitingIn_(size), finished_(size, false) {
  if (size < 1) throw CommError("thread world needs at least one rank, got " + std::to_string(size));
}

ThreadWorld::~ThreadWorld() = default;

bool ThreadWorld::failed() const { return failedFlag_.load(); }

std::string ThreadWorld::failure() const {
  std::lock_guard<SpinMutex> lock(mu_);
  return failure_;
}

void ThreadWorld::failLocked(const std::string& msg) {
  if (failedFlag_) return;  // the first failure wins
  failure_ = msg;
  failedFlag_.store(true);
  for (Rendezvous* r : open_) wake(*r);
  // A collective_permute may wait in a rendezvous already complete.
  for (const Waiting& w : waitingIn_)
    if (w.r && !w.r->open) wake(*w.r);
  fibers::progress();
}

void ThreadWorld::blockLocked(int rank, Rendezvous* r, WaitFor what, int peer) {
  unblockLocked(rank);
  ++waiting_;
  if (what == WaitFor::Source) ++r->sourceWaiters;
  waitingIn_[rank] = {r, what, peer};
  checkDeadlockLocked();
}

void ThreadWorld::unblockLocked(int rank) {
  Waiting& w = waitingIn_[rank];
  if (!w.r) return;
  if (w.what == WaitFor::Source) --w.r->sourceWaiters;
  w = Waiting{};
  --waiting_;
}

void ThreadWorld::abort(int rank, const std::string& why) {
  std::lock_guard<SpinMutex> lock(mu_);
  failLocked("rank " + std::to_string(rank) + " failed: " + why);
}

void ThreadWorld::finished(int rank) {
  std::lock_guard<SpinMutex> lock(mu_);
  if (rank < 0 || rank >= size_ || finished_[rank]) return;
  finished_[rank] = true;
  ++finishedCount_;
  checkDeadlockLocked();
}

void ThreadWorld::throwFailure() const { throw CommError(failure_); }

void ThreadWorld::throwIfFailed() const {
  if (!failedFlag_.load()) return;
  std::lock_guard<SpinMutex> lock(mu_);
  throwFailure();
}

// Every rank is either finished or blocked in a collective that still lacks
// members: none of them can ever arrive.
void ThreadWorld::checkDeadlockLocked() {
  if (failedFlag_ || waiting_ == 0 || waiting_ + finishedCount_ < size_) return;
  std::string msg = "collective deadlock:";
  int listed = 0;
  for (int r = 0; r < size_; ++r) {
    if (listed == 4) {
      msg += " ...";
      break;
    }
    const Waiting& w = waitingIn_[r];
    const Rendezvous* rv = w.r;
    if (!rv) continue;
    size_t idx = (size_t)(std::find(rv->group.begin(), rv->group.end(), r) - rv->group.begin());
    std::string what = w.what == WaitFor::Source  ? " for rank " + std::to_string(w.peer) + "'s block"
                       : w.what == WaitFor::Taken ? " for rank " + std::to_string(w.peer) + " to take its block"
                                                  : "";
    msg += std::string(listed ? ";" : "") + " rank " + std::to_string(r) + " waits" + what + " in " +
           rv->posts[idx]->str() + " over ranks " + groupStr(rv->group);
    ++listed;
  }
  std::string fin;
  for (int r = 0; r < size_; ++r)
    if (finished_[r]) fin += (fin.empty() ? "" : ", ") + std::to_string(r);
  if (!fin.empty()) msg += std::string("; rank") + (finishedCount_ > 1 ? "s " : " ") + fin + " finished";
  failLocked(msg);
}

namespace {

// Step 2 of a collective: the member that posts last compares everyone
// against member 0, once, and every member reports the same mismatch (""
// if the calls match).
// Whether members i < j made the same call ("" if so).
std::string mismatchBetween(const std::vector<int>& group, size_t i, const ThreadWorld::Call& a, size_t j,
                            const ThreadWorld::Call& b) {
  if (a.kind == b.kind && a.bytes == b.bytes && a.detail == b.detail) return "";
  bool onlyDetail = a.kind == b.kind && a.bytes == b.bytes;
  return "collective mismatch: rank " + std::to_string(group[i]) + " called " + a.str() +
         (onlyDetail ? " (" + a.detail + ")" : "") + " but rank " + std::to_string(group[j]) + " called " + b.str() +
         (onlyDetail ? " (" + b.detail + ")" : "");
}

std::string mismatchOf(const std::vector<int>& group, const std::vector<const ThreadWorld::Call*>& posts) {
  for (size_t m = 1; m < group.size(); ++m)
    if (std::string e = mismatchBetween(group, 0, *posts[0], m, *posts[m]); !e.empty()) return e;
  return "";
}

}  // namespace

ThreadWorld::Rendezvous* ThreadWorld::enter(const std::vector<int>& group, uint64_t seq) {
  std::lock_guard<SpinMutex> lock(mu_);
  if (failedFlag_) throwFailure();
  for (Rendezvous* o : open_)
    if (o->seq == seq && o->group == group) {
      ++o->refs;
      return o;
    }
  if (free_.empty()) {
    owned_.push_back(std::make_unique<Rendezvous>());
    free_.push_back(owned_.back().get());
  }
  Rendezvous* r = free_.back();
  free_.pop_back();
  r->reset(group, seq);
  open_.push_back(r);
  ++r->refs;
  return r;
}

void ThreadWorld::release(Rendezvous* r) {
  if (r->refs.fetch_sub(1) != 1) return;
  // The last holder out: a complete rendezvous is free for reuse (one still
  // open belongs to a failed world, or waits for members of a
  // collective_permute whose senders left). Re-checked under the lock: a
  // permute's sender may leave an open rendezvous that a later member
  // enters, completes and frees before this holder gets the lock.
  std::lock_guard<SpinMutex> lock(mu_);
  if (!r->open && !r->recycled && r->refs.load() == 0) {
    r->recycled = true;
    free_.push_back(r);
  }
}

void ThreadWorld::closeLocked(Rendezvous* r) {
  open_.erase(std::find(open_.begin(), open_.end(), r));
  r->open = false;
  for (int m : r->group)
    if (waitingIn_[m].r == r && waitingIn_[m].what == WaitFor::All) unblockLocked(m);
  // One member checks the calls (O(n)) before any is released; every
  // member reports what it found.
  r->mismatch = mismatchOf(r->group, r->posts);
}

ThreadWorld::Call& ThreadWorld::placeCall(Rendezvous& r, size_t me, Call call, bool stage) {
  Call& c = r.calls[me];
  c.kind = std::move(call.kind);
  c.bytes = call.bytes;
  c.detail = std::move(call.detail);
  c.recv = call.recv;
  c.send = call.send;
  if (stage && call.bytes && call.send) {
    c.staged.assign(static_cast<const char*>(call.send), static_cast<const char*>(call.send) + call.bytes);
    c.send = c.staged.data();
  }
  return c;
}

void ThreadWorld::collective(int rank, const std::vector<int>& group, uint64_t seq, Call call, Mode mode,
                             const Body& body, const Combine& combine) {
  GSL_ASSERT(!combine || mode == Mode::Staged, "a combine step reads the staged copies");
  const size_t n = group.size();
  const size_t me = (size_t)(std::find(group.begin(), group.end(), rank) - group.begin());

  // 1. Find (or open) the rendezvous of this call, and hold it: a
  // rendezvous is recycled once every member left it and it is complete.
  const Held held(*this, group, seq);
  Rendezvous* r = held.r;
  // This member's call: no peer reads calls[me] before posts[me] is set.
  Call& c = placeCall(*r, me, std::move(call), mode == Mode::Staged);

  // 2. Post, and wait until every member has posted.
  bool last = false;
  {
    std::lock_guard<SpinMutex> lock(mu_);
    if (failedFlag_) throwFailure();
    r->posts[me] = &c;
    r->sent[me].store(Rendezvous::kDone);  // a collective_permute member whose source this is: a mismatch
    if (r->sourceWaiters)  // a collective_permute member whose source is this rank is released
      for (int m : group)
        if (waitingIn_[m].r == r && waitingIn_[m].what == WaitFor::Source && waitingIn_[m].peer == rank)
          unblockLocked(m);
    if (++r->posted == n) {
      last = true;
      closeLocked(r);
      if (!combine) r->complete.store(true);  // else once combined, below
    } else {
      blockLocked(rank, r, WaitFor::All, -1);
    }
  }
  const Call& mine = *r->posts[me];
  if (last) {
    // The posts no longer change; waiting members leave early only with a
    // failure, and the combine step reads nothing of theirs but the staged
    // copies held by the rendezvous.
    if (combine && r->mismatch.empty()) {
      try {
        combine(r->posts, r->combined);
      } catch (const std::exception& e) {
        r->combineError = e.what();
      }
    }
    r->complete.store(true);
    wake(*r);
  } else {
    // --trace: the time blocked here, until the last member posted (and
    // combined).
    const int64_t waitStart = trace::current ? trace::nowNs() : 0;
    // Failing is only safe before the rendezvous completes: afterwards
    // peers may be reading this rank's buffers.
    if (!await(*r, [&] { return r->complete.load(); }, [&] { return failedFlag_.load(); })) {
      std::lock_guard<SpinMutex> lock(mu_);
      if (!r->complete.load()) {
        unblockLocked(rank);
        throwFailure();
      }
    }
    if (trace::current) trace::record("wait", "wait " + mine.kind, waitStart, trace::nowNs());
  }

  // 3. Whether the calls match (the last poster checked).
  const std::string& mismatch = r->mismatch;

  // 4. Move the data (the posts no longer change).
  std::exception_ptr err;
  if (mismatch.empty()) {
    try {
      if (!r->combineError.empty()) throw CommError(mine.kind + ": " + r->combineError);
      body(r->posts, r->combined);
    } catch (...) {
      err = std::current_exception();
    }
  }

  // 5. Direct: wait until every member is done with the others' buffers.
  // Not interruptible by a failure: moving data never blocks, so this wait
  // is short. A mismatch moved nothing: no wait.
  if (r->done.fetch_add(1) + 1 == n) {
    wake(*r);
  } else if (mode == Mode::Direct && mismatch.empty()) {
    await(*r, [&] { return r->done.load() == n; }, [] { return false; });
  }
  if (!mismatch.empty()) throw CommError(mismatch);
  if (err) std::rethrow_exception(err);
}

void ThreadWorld::permute(int rank, const std::vector<int>& group, uint64_t seq, Call call, Mode mode, size_t from,
                          size_t to, void* recv) {
  using R = Rendezvous;
  const size_t n = group.size();
  const size_t me = (size_t)(std::find(group.begin(), group.end(), rank) - group.begin());
  const bool self = from == me;  // then to == me too
  const uint64_t bytes = call.bytes;
  const void* const send = call.send;

  // 1. Find (or open) the rendezvous of (group, seq), shared with whatever
  // the other members called there, and hold it while reading from it.
  const Held held(*this, group, seq);
  Rendezvous* r = held.r;
  // This member's call. Staged: the copy its receiver reads, kept by the
  // rendezvous, so this member may return before the receiver arrives.
  Call& c = placeCall(*r, me, std::move(call), !self && mode == Mode::Staged);

  // 2. Post, releasing the member (if any) that waits for this block. The
  // member that posts last checks the whole group's calls: with a mismatch
  // it withdraws its block and throws (members gone already see the world
  // fail); members of other kinds waiting for every post are released.
  std::string groupMismatch;
  bool sourceWait = false;
  {
    std::lock_guard<SpinMutex> lock(mu_);
    if (failedFlag_) throwFailure();
    r->posts[me] = &c;
    const bool last = ++r->posted == n;
    if (last) {
      closeLocked(r);
      groupMismatch = r->mismatch;
    }
    r->sent[me].store(!groupMismatch.empty()            ? R::kWithdrawn
                      : (!self && mode == Mode::Direct) ? R::kPosted
                                                        : R::kDone);
    if (r->sourceWaiters)  // a collective_permute member whose source is this rank is released
      for (int m : group)
        if (waitingIn_[m].r == r && waitingIn_[m].what == WaitFor::Source && waitingIn_[m].peer == rank)
          unblockLocked(m);
    if (last) r->complete.store(true);
    if (groupMismatch.empty() && !self && r->sent[from].load() == R::kUnposted) {
      sourceWait = true;
      blockLocked(rank, r, WaitFor::Source, group[from]);
    }
  }
  wake(*r);
  if (!groupMismatch.empty()) throw CommError(groupMismatch);
  if (self) {  // its own block; nobody else reads it
    if (bytes && send != recv) std::memmove(recv, send, bytes);
    return;
  }

  // 3. Wait for the source's post only. --trace: the time blocked here.
  const int64_t waitStart = trace::current ? trace::nowNs() : 0;
  if (!await(*r, [&] { return r->sent[from].load() != R::kUnposted; }, [&] { return failedFlag_.load(); })) {
    std::lock_guard<SpinMutex> lock(mu_);
    if (r->sent[from].load() == R::kUnposted) {
      unblockLocked(rank);
      throwFailure();
    }
  }
  if (sourceWait && trace::current) trace::record("wait", "wait " + c.kind, waitStart, trace::nowNs());

  // 4. Check the source's call against this one (a mismatch moves nothing
  // and leaves the source's block alone: a direct sender is released by
  // the world failing), claim a direct block (its sender may withdraw it
  // only before), and copy it. Direct and in place (recv overlapping send):
  // this rank's receiver may still be reading `send`, so the block is kept
  // aside until it is done.
  const Call& src = *r->posts[from];
  const std::string mismatch =
      from < me ? mismatchBetween(group, from, src, me, c) : mismatchBetween(group, me, c, from, src);
  if (!mismatch.empty()) throw CommError(mismatch);
  int state = R::kPosted;
  const bool claimed = r->sent[from].compare_exchange_strong(state, R::kClaimed);
  if (!claimed && state == R::kWithdrawn) {
    std::lock_guard<SpinMutex> lock(mu_);
    throw CommError(!r->mismatch.empty() ? r->mismatch : failure_);
  }
  const bool inPlace = mode == Mode::Direct && overlaps(send, recv, bytes);
  std::vector<char> aside;
  if (bytes) {
    if (inPlace) aside.resize(bytes);
    std::memcpy(inPlace ? aside.data() : recv, src.send, bytes);
  }
  if (claimed) {  // the direct sender may go
    {
      std::lock_guard<SpinMutex> lock(mu_);
      r->sent[from].store(R::kDone);
      const Waiting& w = waitingIn_[group[from]];
      if (w.r == r && w.what == WaitFor::Taken) unblockLocked(group[from]);
    }
    wake(*r);
  }

  // 5. Direct: wait until this rank's receiver copied its block. It can be
  // withdrawn (on a failure) only while the receiver has not claimed it; a
  // claimed block is being copied, which never blocks.
  if (mode == Mode::Direct) {
    bool takenWait = false;
    {
      std::lock_guard<SpinMutex> lock(mu_);
      if (r->sent[me].load() != R::kDone) {
        takenWait = true;
        blockLocked(rank, r, WaitFor::Taken, group[to]);
      }
    }
    const int64_t takenStart = trace::current ? trace::nowNs() : 0;
    if (!await(*r, [&] { return r->sent[me].load() == R::kDone; }, [&] { return failedFlag_.load(); })) {
      {
        std::lock_guard<SpinMutex> lock(mu_);
        int posted = R::kPosted;
        if (r->sent[me].compare_exchange_strong(posted, R::kWithdrawn)) {
          unblockLocked(rank);
          throwFailure();
        }
      }
      // Claimed: the receiver is copying (it unblocks this rank when done).
      await(*r, [&] { return r->sent[me].load() == R::kDone; }, [] { return false; });
    }
    if (takenWait && trace::current) trace::record("wait", "wait " + c.kind, takenStart, trace::nowNs());
  }
  if (inPlace && bytes) std::memcpy(recv, aside.data(), bytes);
}

// ================================================================ a rank

ThreadComm::ThreadComm(ThreadWorld& world, int rank) : world_(world), rank_(rank) {
  if (rank < 0 || rank >= world.size())
    throw CommError("rank " + std::to_string(rank) + " is outside the world of " + std::to_string(world.size()));
}

ThreadComm::GroupState& ThreadComm::checkedGroup(const std::vector<int>& group) {
  if (auto it = groups_.find(group); it != groups_.end()) return it->second;
  int me = -1;
  std::vector<bool> seen(world_.size(), false);
  for (size_t i = 0; i < group.size(); ++i) {
    int g = group[i];
    if (g < 0 || g >= world_.size() || seen[g])
      throw CommError("malformed collective group " + groupStr(group) + " in a world of " +
                      std::to_string(world_.size()));
    seen[g] = true;
    if (g == rank_) me = (int)i;
  }
  if (me < 0)
    throw CommError("rank " + std::to_string(rank_) + " called a collective of group " + groupStr(group) +
                    " it is not a member of");
  GroupState& st = groups_[group];
  st.index = me;
  return st;
}

namespace {
using Posts = std::vector<const ThreadWorld::Call*>;
using Combined = std::vector<char>;
using Mode = ThreadWorld::Mode;
Mode modeFor(uint64_t bytes) { return bytes <= ThreadWorld::kStagedBytes ? Mode::Staged : Mode::Direct; }
}  // namespace

void ThreadComm::runAllGather(const std::vector<int>& group, const void* send, size_t bytes, void* recv) {
  GroupState& st = checkedGroup(group);
  const size_t n = group.size();
  if (solo(group)) {  // a group of one: no rendezvous
    if (bytes && send != recv) std::memmove(recv, send, bytes);
    return;
  }
  const Mode mode = modeFor(bytes);
  // Direct and in place: peers read `send` until everyone is done, so the
  // gathered blocks are kept aside until then (staged calls read copies).
  const bool inPlace = mode == Mode::Direct && overlaps(send, recv, n * bytes);
  std::vector<char> aside(inPlace ? n * bytes : 0);
  char* out = inPlace ? aside.data() : static_cast<char*>(recv);
  ThreadWorld::Call call{"all_gather", bytes, "", send};
  world_.collective(rank_, group, st.seq++, std::move(call), mode, [&](const Posts& posts, const Combined&) {
    for (size_t m = 0; m < n; ++m)
      if (bytes) std::memcpy(out + m * bytes, posts[m]->send, bytes);
  });
  if (inPlace && bytes) std::memcpy(recv, aside.data(), n * bytes);
}

void ThreadComm::runAllReduce(const std::vector<int>& group, void* data, size_t count, ir::DType dt, ReduceOp op) {
  GroupState& st = checkedGroup(group);
  const int me = st.index;
  if (dt != ir::DType::F32 && dt != ir::DType::I32 && dt != ir::DType::BF16)
    throw CommError(std::string("all_reduce of unsupported dtype ") + ir::dtypeName(dt));
  const size_t n = group.size();
  const size_t eb = (size_t)ir::dtypeBytes(dt);
  const uint64_t bytes = count * eb;
  if (solo(group)) {  // a group of one: nothing to reduce, no rendezvous
    return;
  }
  ThreadWorld::Call call{"all_reduce", bytes, std::string(ir::dtypeName(dt)) + " " + ir::reduceOpName(op), data};
  call.recv = data;
  const Mode mode = modeFor(bytes);
  // Every element is reduced over the members in member order, so the
  // result is bit-identical on every member, in both modes and at every
  // chunking.
  if (mode == Mode::Staged) {
    // The last member to post reduces the staged copies once; each member
    // copies the result into its own `data`.
    world_.collective(
        rank_, group, st.seq++, std::move(call), mode,
        [&](const Posts&, const Combined& sum) {
          if (count) std::memcpy(data, sum.data(), bytes);
        },
        [&](const Posts& posts, Combined& sum) {
          std::vector<const void*> src;
          for (const auto* p : posts) src.push_back(p->send);
          sum.resize(bytes);
          if (count) reduceWords(sum.data(), src, count, dt, op);
        });
  } else {
    // Reduce-scatter + all-gather in one phase: member m reduces chunk m of
    // every member's `data` and writes it into chunk m of every member's
    // `data` (no other member touches that chunk).
    const size_t chunk = (count + n - 1) / n;
    const size_t lo = std::min(count, (size_t)me * chunk), len = std::min(count, lo + chunk) - lo;
    thread_local std::vector<char> reduced;
    world_.collective(rank_, group, st.seq++, std::move(call), mode, [&](const Posts& posts, const Combined&) {
      if (!len) return;
      reduced.resize(len * eb);
      std::vector<const void*> src;
      for (const auto* p : posts) src.push_back(static_cast<const char*>(p->send) + lo * eb);
      reduceWords(reduced.data(), src, len, dt, op);
      for (const auto* p : posts) std::memcpy(static_cast<char*>(p->recv) + lo * eb, reduced.data(), len * eb);
    });
  }
}

void ThreadComm::runReduceScatter(const std::vector<int>& group, const void* send, size_t count, ir::DType dt,
                               void* recv) {
  GroupState& st = checkedGroup(group);
  const int me = st.index;
  if (dt != ir::DType::F32 && dt != ir::DType::I32 && dt != ir::DType::BF16)
    throw CommError(std::string("reduce_scatter of unsupported dtype ") + ir::dtypeName(dt));
  const size_t n = group.size();
  const uint64_t block = count * ir::dtypeBytes(dt);
  if (solo(group)) {  // a group of one: the block is the input
    if (block && send != recv) std::memmove(recv, send, block);
    return;
  }
  ThreadWorld::Call call{"reduce_scatter", block * n, ir::dtypeName(dt), send};
  const Mode mode = modeFor(block * n);
  const bool inPlace = mode == Mode::Direct && overlaps(send, recv, n * block);
  std::vector<int32_t> aside(inPlace ? (block + 3) / 4 : 0);
  world_.collective(rank_, group, st.seq++, std::move(call), mode, [&](const Posts& posts, const Combined&) {
    std::vector<const void*> src;
    for (const auto* p : posts) src.push_back(static_cast<const char*>(p->send) + me * block);
    if (count) reduceWords(inPlace ? aside.data() : recv, src, count, dt, ReduceOp::Sum);
  });
  if (inPlace && count) std::memcpy(recv, aside.data(), block);
}

void ThreadComm::runAllToAll(const std::vector<int>& group, const void* send, size_t bytes, void* recv) {
  GroupState& st = checkedGroup(group);
  const int me = st.index;
  const size_t n = group.size();
  if (solo(group)) {  // a group of one: its own block
    if (bytes && send != recv) std::memmove(recv, send, bytes);
    return;
  }
  const Mode mode = modeFor(bytes * n);
  const bool inPlace = mode == Mode::Direct && overlaps(send, recv, n * bytes);
  std::vector<char> aside(inPlace ? n * bytes : 0);
  char* out = inPlace ? aside.data() : static_cast<char*>(recv);
  ThreadWorld::Call call{"all_to_all", bytes * n, "", send};
  world_.collective(rank_, group, st.seq++, std::move(call), mode, [&](const Posts& posts, const Combined&) {
    for (size_t m = 0; m < n; ++m)
      if (bytes) std::memcpy(out + m * bytes, static_cast<const char*>(posts[m]->send) + me * bytes, bytes);
  });
  if (inPlace && bytes) std::memcpy(recv, aside.data(), n * bytes);
}

void ThreadComm::runPermute(const std::vector<int>& group, const std::vector<int64_t>& perm, const void* send,
                         size_t bytes, void* recv) {
  GroupState& st = checkedGroup(group);
  const int me = st.index;
  const size_t n = group.size();
  std::vector<bool> seen(n, false);
  bool ok = perm.size() == n;
  for (size_t i = 0; ok && i < n; ++i) {
    ok = perm[i] >= 0 && perm[i] < (int64_t)n && !seen[perm[i]];
    if (ok) seen[perm[i]] = true;
  }
  std::string p = "perm [";
  for (size_t i = 0; i < perm.size(); ++i) p += (i ? ", " : "") + std::to_string(perm[i]);
  p += "]";
  if (!ok) throw CommError("collective_permute: " + p + " is not a permutation of " + std::to_string(n) + " members");
  if (solo(group)) {  // a group of one keeps its own block
    if (bytes && send != recv) std::memmove(recv, send, bytes);
    return;
  }
  ThreadWorld::Call call{"collective_permute", bytes, p, send};
  // Point to point (ThreadWorld::permute): this rank receives member
  // perm[me]'s block and sends its own to the member whose entry is me.
  const size_t from = (size_t)perm[me];
  const size_t to = (size_t)(std::find(perm.begin(), perm.end(), (int64_t)me) - perm.begin());
  world_.permute(rank_, group, st.seq++, std::move(call), modeFor(bytes), from, to, recv);
}

void ThreadComm::barrier() {
  std::vector<int> all(world_.size());
  for (int i = 0; i < world_.size(); ++i) all[i] = i;
  ThreadWorld::Call call{"barrier", 0, "", nullptr};
  world_.collective(rank_, all, checkedGroup(all).seq++, std::move(call), Mode::Staged, [](const Posts&, const Combined&) {});
}

void ThreadComm::abort(const std::string& why) { world_.abort(rank_, why); }

bool ThreadComm::solo(const std::vector<int>& group) {
  if (group.size() != 1) return false;
  world_.throwIfFailed();  // a failed world fails every later call
  return true;
}

// ================================================================ runRanks

std::vector<std::exception_ptr> runRanks(int n, const std::function<void(int, backend::Communicator&)>& body) {
  ThreadWorld world(n);
  std::vector<std::exception_ptr> errors(n);
  auto rankMain = [&world, &errors, &body](int r) {
    try {
      ThreadComm comm(world, r);
      body(r, comm);
    } catch (const std::exception& e) {
      errors[r] = std::current_exception();
      world.abort(r, e.what());
    } catch (...) {
      errors[r] = std::current_exception();
      world.abort(r, "unknown exception");
    }
    world.finished(r);
  };
  // More ranks than cores: rank fibers on one OS thread per core
  // (runtime/Fibers.h).
  if (const int workers = fibers::workersFor(n); workers < n) {
    try {
      fibers::run(n, workers, rankMain);
    } catch (const std::system_error& e) {  // no stack: nothing ran
      for (int r = 0; r < n; ++r)
        errors[r] = std::make_exception_ptr(
            UserError("cannot start the " + std::to_string(n) + " ranks (" + e.code().message() +
                      "); run fewer ranks, or use --mpi"));
    }
    return errors;
  }
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (int r = 0; r < n; ++r) {
    try {
      threads.emplace_back(rankMain, r);
    } catch (const std::system_error& e) {
      // No thread for this rank (and the ones after it): the world fails,
      // so the ranks already running stop instead of waiting for it.
      std::string why = "cannot start the thread of rank " + std::to_string(r) + " of " + std::to_string(n) + " (" +
                        e.code().message() + "); run fewer ranks, or use --mpi";
      errors[r] = std::make_exception_ptr(UserError(why));
      world.abort(r, why);
      for (int q = r; q < n; ++q) world.finished(q);
      break;
    }
  }
  for (auto& t : threads) t.join();
  return errors;
}

std::exception_ptr rootCause(const std::vector<std::exception_ptr>& errors) {
  std::exception_ptr firstComm;
  for (const auto& e : errors) {
    if (!e) continue;
    try {
      std::rethrow_exception(e);
    } catch (const CommError&) {
      if (!firstComm) firstComm = e;
    } catch (...) {
      return e;
    }
  }
  return firstComm;
}

void runRanksOrThrow(int n, const std::function<void(int, backend::Communicator&)>& body) {
  if (auto e = rootCause(runRanks(n, body))) std::rethrow_exception(e);
}

}  // namespace gsl::runtime
