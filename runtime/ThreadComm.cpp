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
    posted = 0;
    complete.store(false);
    mismatch.clear();
    combineError.clear();
    done.store(0);
    refs.store(0);
    open = true;
  }
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

ThreadWorld::ThreadWorld(int size) : size_(size), waitingIn_(size, nullptr), finished_(size, false) {
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
    const Rendezvous* rv = waitingIn_[r];
    if (!rv) continue;
    size_t idx = (size_t)(std::find(rv->group.begin(), rv->group.end(), r) - rv->group.begin());
    msg += std::string(listed ? ";" : "") + " rank " + std::to_string(r) + " waits in " + rv->posts[idx]->str() +
           " over ranks " + groupStr(rv->group);
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
std::string mismatchOf(const std::vector<int>& group, const std::vector<const ThreadWorld::Call*>& posts) {
  for (size_t m = 1; m < group.size(); ++m) {
    const ThreadWorld::Call& a = *posts[0];
    const ThreadWorld::Call& b = *posts[m];
    if (a.kind == b.kind && a.bytes == b.bytes && a.detail == b.detail) continue;
    bool onlyDetail = a.kind == b.kind && a.bytes == b.bytes;
    return "collective mismatch: rank " + std::to_string(group[0]) + " called " + a.str() +
           (onlyDetail ? " (" + a.detail + ")" : "") + " but rank " + std::to_string(group[m]) + " called " +
           b.str() + (onlyDetail ? " (" + b.detail + ")" : "");
  }
  return "";
}

}  // namespace

void ThreadWorld::collective(int rank, const std::vector<int>& group, uint64_t seq, Call call, Mode mode,
                             const Body& body, const Combine& combine) {
  GSL_ASSERT(!combine || mode == Mode::Staged, "a combine step reads the staged copies");
  const size_t n = group.size();
  const size_t me = (size_t)(std::find(group.begin(), group.end(), rank) - group.begin());

  // 1. Find (or open) the rendezvous of this call, and hold it: a
  // rendezvous is recycled once every member left it and it is complete.
  Rendezvous* r = nullptr;
  {
    std::lock_guard<SpinMutex> lock(mu_);
    if (failedFlag_) throwFailure();
    for (Rendezvous* o : open_)
      if (o->seq == seq && o->group == group) {
        r = o;
        break;
      }
    if (!r) {
      if (free_.empty()) {
        owned_.push_back(std::make_unique<Rendezvous>());
        free_.push_back(owned_.back().get());
      }
      r = free_.back();
      free_.pop_back();
      r->reset(group, seq);
      open_.push_back(r);
    }
    ++r->refs;
  }
  struct Release {
    ThreadWorld& w;
    Rendezvous* r;
    ~Release() {
      if (r->refs.fetch_sub(1) != 1) return;
      // The last member out: a complete rendezvous is free for reuse (one
      // still open belongs to a failed world; it is never completed).
      std::lock_guard<SpinMutex> lock(w.mu_);
      if (!r->open) w.free_.push_back(r);
    }
  } release{*this, r};

  // This member's call: no peer reads calls[me] before posts[me] is set.
  // Staged: the copy peers read, made outside the lock into the
  // rendezvous's buffer.
  Call& c = r->calls[me];
  c.kind = std::move(call.kind);
  c.bytes = call.bytes;
  c.detail = std::move(call.detail);
  c.recv = call.recv;
  c.send = call.send;
  if (mode == Mode::Staged && call.bytes && call.send) {
    c.staged.assign(static_cast<const char*>(call.send), static_cast<const char*>(call.send) + call.bytes);
    c.send = c.staged.data();
  }

  // 2. Post, and wait until every member has posted.
  bool last = false;
  {
    std::lock_guard<SpinMutex> lock(mu_);
    if (failedFlag_) throwFailure();
    r->posts[me] = &c;
    if (++r->posted == n) {
      last = true;
      waiting_ -= (int)(n - 1);
      for (int m : group) waitingIn_[m] = nullptr;
      open_.erase(std::find(open_.begin(), open_.end(), r));
      r->open = false;
      // One member checks the calls (O(n)) before any is released; every
      // member reports what it found.
      r->mismatch = mismatchOf(group, r->posts);
      if (!combine) r->complete.store(true);  // else once combined, below
    } else {
      ++waiting_;
      waitingIn_[rank] = r;
      checkDeadlockLocked();
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
      if (!r->complete.load()) throwFailure();
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
  const int64_t from = perm[me];
  const Mode mode = modeFor(bytes);
  // Direct and in place (recv overlapping send): peers read `send` until
  // everyone is done, so the received block is kept aside until then.
  const bool inPlace = mode == Mode::Direct && overlaps(send, recv, bytes);
  std::vector<char> aside(inPlace ? bytes : 0);
  world_.collective(rank_, group, st.seq++, std::move(call), mode, [&](const Posts& posts, const Combined&) {
    if (bytes) std::memcpy(inPlace ? aside.data() : recv, posts[from]->send, bytes);
  });
  if (inPlace && bytes) std::memcpy(recv, aside.data(), bytes);
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
