#include "runtime/MpiComm.h"

#define OMPI_SKIP_MPICXX 1  // the C API only
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>

#include <unistd.h>

#include "support/Diagnostics.h"
#include "support/BF16.h"
#include "support/Trace.h"

namespace gsl::runtime {

using backend::CommError;
using backend::ReduceOp;

namespace {

bool mpiInitialized() {
  int f = 0;
  MPI_Initialized(&f);
  return f != 0;
}

bool mpiFinalized() {
  int f = 0;
  MPI_Finalized(&f);
  return f != 0;
}

void initMpi(int* argc, char*** argv) {
  int provided = 0;
  int rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  if (rc != MPI_SUCCESS) throw CommError("MPI_Init_thread failed");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

void finalizeAtExit() {
  if (mpiInitialized() && !mpiFinalized()) MPI_Finalize();
}

// Throws CommError for a failed MPI call.
void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
  throw CommError(std::string(what) + " failed: " + (len ? std::string(text, (size_t)len) : "error " + std::to_string(rc)));
}

// A buffer of `bytes` bytes as (count, datatype) with an int count.
void asWords(size_t bytes, int* count, MPI_Datatype* type) {
  if (bytes <= (size_t)INT_MAX) {
    *count = (int)bytes;
    *type = MPI_BYTE;
  } else if (bytes % 4 == 0 && bytes / 4 <= (size_t)INT_MAX) {
    *count = (int)(bytes / 4);
    *type = MPI_INT32_T;
  } else {
    throw CommError("MPI message of " + std::to_string(bytes) + " bytes is too large");
  }
}

MPI_Datatype mpiType(ir::DType dt) {
  if (dt == ir::DType::F32) return MPI_FLOAT;
  if (dt == ir::DType::I32) return MPI_INT32_T;
  throw CommError(std::string("MPI reduction of unsupported dtype ") + ir::dtypeName(dt));
}

// MPI has no bf16 type. bf16 reductions send 16-bit units and reduce in f32
// on receipt: each member gets every member's copy of its chunk (an
// all-to-all), sums them in member order in f32 and rounds once, and the
// reduced chunks are all-gathered; the same algorithm, and so the same
// bits, as ThreadComm's, and the bytes of a ring all-reduce of bf16.
void reduceBF16(const std::vector<const uint16_t*>& src, size_t count, ReduceOp op, uint16_t* out) {
  std::vector<float> acc(count), x(count);
  widenBF16(src[0], acc.data(), (int64_t)count);
  for (size_t m = 1; m < src.size(); ++m) {
    widenBF16(src[m], x.data(), (int64_t)count);
    for (size_t i = 0; i < count; ++i)
      acc[i] = op == ReduceOp::Sum ? acc[i] + x[i] : op == ReduceOp::Max ? std::max(acc[i], x[i]) : std::min(acc[i], x[i]);
  }
  narrowBF16(acc.data(), out, (int64_t)count);
}

MPI_Op mpiOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return MPI_SUM;
    case ReduceOp::Max: return MPI_MAX;
    case ReduceOp::Min: return MPI_MIN;
  }
  return MPI_SUM;
}

// Whether two buffers may overlap (sizes: the larger of the two). MPI
// forbids aliased send and receive buffers, so such sends go via a copy.
bool overlaps(const void* send, const void* recv, size_t bytes) {
  auto s = reinterpret_cast<uintptr_t>(send), r = reinterpret_cast<uintptr_t>(recv);
  return bytes && send && recv && r < s + bytes && s < r + bytes;
}

std::string groupStr(const std::vector<int>& g) {
  std::string s = "[";
  for (size_t i = 0; i < g.size(); ++i) s += (i ? ", " : "") + std::to_string(g[i]);
  return s + "]";
}

// A call's signature, exchanged before the collective: all members must
// agree. `kind` is the ir::OpKind's value.
struct Signature {
  int64_t kind = 0, bytes = 0, dtype = -1, extra = -1;  // extra: reduce op, or a perm hash
};

const char* kindName(int64_t k) {
  for (ir::OpKind c : {ir::OpKind::AllGather, ir::OpKind::AllReduce, ir::OpKind::ReduceScatter, ir::OpKind::AllToAll,
                       ir::OpKind::CollectivePermute})
    if (k == (int64_t)c) return ir::opName(c);
  return "an unknown collective";
}

std::string describe(const Signature& s, bool detail) {
  std::string r = std::string(kindName(s.kind)) + " of " + std::to_string(s.bytes) + " bytes";
  if (!detail) return r;
  if (s.kind == (int64_t)ir::OpKind::AllReduce)
    r += std::string(" (") + ir::dtypeName((ir::DType)s.dtype) + " " + ir::reduceOpName((ReduceOp)s.extra) + ")";
  else if (s.kind == (int64_t)ir::OpKind::ReduceScatter)
    r += std::string(" (") + ir::dtypeName((ir::DType)s.dtype) + ")";
  else if (s.kind == (int64_t)ir::OpKind::CollectivePermute)
    r += " (perm hash " + std::to_string(s.extra) + ")";
  return r;
}

}  // namespace

// ================================================================ session

MpiSession::MpiSession(int* argc, char*** argv) {
  if (!mpiInitialized()) {
    initMpi(argc, argv);
    owner_ = true;
  }
}

MpiSession::~MpiSession() {
  if (owner_ && !mpiFinalized()) MPI_Finalize();
}

void MpiSession::ensure() {
  if (mpiInitialized()) return;
  initMpi(nullptr, nullptr);
  std::atexit(finalizeAtExit);
}

bool MpiSession::launchedByMpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(v)) return true;
  return false;
}

int MpiSession::worldSize() {
  ensure();
  int n = 1;
  check(MPI_Comm_size(MPI_COMM_WORLD, &n), "MPI_Comm_size");
  return n;
}

int MpiSession::worldRank() {
  ensure();
  int r = 0;
  check(MPI_Comm_rank(MPI_COMM_WORLD, &r), "MPI_Comm_rank");
  return r;
}

std::string MpiSession::hostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

// ================================================================ communicator

struct MpiComm::Impl {
  std::map<std::vector<int>, MPI_Comm> comms;  // by group (world ranks, member order)
  int rank = 0, size = 1;

  ~Impl() {
    if (!mpiInitialized() || mpiFinalized()) return;
    for (auto& [g, c] : comms) MPI_Comm_free(&c);
  }

  // The communicator of `group` (member i has rank i in it) and this rank's
  // index. Created on first use by the group's members only.
  MPI_Comm comm(const std::vector<int>& group, int* me) {
    *me = -1;
    std::vector<bool> seen((size_t)size, false);
    bool identity = (int)group.size() == size;
    for (size_t i = 0; i < group.size(); ++i) {
      int g = group[i];
      if (g < 0 || g >= size || seen[g])
        throw CommError("malformed collective group " + groupStr(group) + " in a world of " + std::to_string(size));
      seen[g] = true;
      if (g == rank) *me = (int)i;
      identity = identity && g == (int)i;
    }
    if (*me < 0)
      throw CommError("rank " + std::to_string(rank) + " called a collective of group " + groupStr(group) +
                      " it is not a member of");
    if (group.size() == 1) return MPI_COMM_SELF;
    if (identity) return MPI_COMM_WORLD;
    auto it = comms.find(group);
    if (it != comms.end()) return it->second;
    MPI_Group world, sub;
    check(MPI_Comm_group(MPI_COMM_WORLD, &world), "MPI_Comm_group");
    check(MPI_Group_incl(world, (int)group.size(), group.data(), &sub), "MPI_Group_incl");
    // The tag tells apart creations of different groups that may overlap in time.
    int tag = (int)(std::hash<std::string>{}(groupStr(group)) % 30000) + 1;
    MPI_Comm c = MPI_COMM_NULL;
    int rc = MPI_Comm_create_group(MPI_COMM_WORLD, sub, tag, &c);
    MPI_Group_free(&sub);
    MPI_Group_free(&world);
    check(rc, "MPI_Comm_create_group");
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    comms[group] = c;
    return c;
  }

  // Exchanges the members' call signatures; throws the same CommError on
  // every member if any differs from member 0's.
  // The exchange is the collective's rendezvous: with --trace, the time in
  // it is the wait for the group's other members.
  void checkCall(MPI_Comm c, const std::vector<int>& group, const Signature& mine) {
    if (group.size() == 1) return;
    int64_t s[4] = {mine.kind, mine.bytes, mine.dtype, mine.extra};
    std::vector<int64_t> all(4 * group.size());
    {
      trace::Scope waited("wait", trace::current ? std::string("wait ") + kindName(mine.kind) : std::string());
      check(MPI_Allgather(s, 4, MPI_INT64_T, all.data(), 4, MPI_INT64_T, c), "MPI_Allgather");
    }
    auto sig = [&](size_t m) { return Signature{all[4 * m], all[4 * m + 1], all[4 * m + 2], all[4 * m + 3]}; };
    const Signature a = sig(0);
    for (size_t m = 1; m < group.size(); ++m) {
      const Signature b = sig(m);
      if (a.kind == b.kind && a.bytes == b.bytes && a.dtype == b.dtype && a.extra == b.extra) continue;
      bool detail = a.kind == b.kind && a.bytes == b.bytes;
      throw CommError("collective mismatch: rank " + std::to_string(group[0]) + " called " + describe(a, detail) +
                      " but rank " + std::to_string(group[m]) + " called " + describe(b, detail));
    }
  }
};

MpiComm::MpiComm() : impl_(std::make_unique<Impl>()) {
  MpiSession::ensure();
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
  check(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
  impl_->rank = rank_;
  impl_->size = size_;
}

MpiComm::~MpiComm() = default;

void MpiComm::runAllGather(const std::vector<int>& group, const void* send, size_t bytes, void* recv) {
  int me;
  MPI_Comm c = impl_->comm(group, &me);
  if (checkCalls_) impl_->checkCall(c, group, {(int64_t)ir::OpKind::AllGather, (int64_t)bytes});
  if (bytes) {
    int count;
    MPI_Datatype t;
    asWords(bytes, &count, &t);
    std::vector<char> copy;
    if (overlaps(send, recv, bytes * group.size())) {
      copy.assign(static_cast<const char*>(send), static_cast<const char*>(send) + bytes);
      send = copy.data();
    }
    check(MPI_Allgather(send, count, t, recv, count, t, c), "MPI_Allgather");
  }
}

void MpiComm::runAllReduce(const std::vector<int>& group, void* data, size_t count, ir::DType dt, ReduceOp op) {
  int me;
  MPI_Comm c = impl_->comm(group, &me);
  if (dt == ir::DType::BF16) {  // reduceBF16: all-to-all of chunks, f32 sums, all-gather
    if (checkCalls_) impl_->checkCall(c, group, {(int64_t)ir::OpKind::AllReduce, (int64_t)(count * 2), (int64_t)dt, (int64_t)op});
    const size_t n = group.size(), chunk = (count + n - 1) / n;
    if (chunk * 2 > (size_t)INT_MAX) throw CommError("all_reduce of " + std::to_string(count) + " bf16 elements is too large");
    if (n > 1 && count) {
      std::vector<uint16_t> send(n * chunk, 0), recv(n * chunk), mine(chunk);
      std::memcpy(send.data(), data, count * 2);
      check(MPI_Alltoall(send.data(), (int)(chunk * 2), MPI_BYTE, recv.data(), (int)(chunk * 2), MPI_BYTE, c),
            "MPI_Alltoall");
      std::vector<const uint16_t*> src;
      for (size_t m = 0; m < n; ++m) src.push_back(recv.data() + m * chunk);
      reduceBF16(src, chunk, op, mine.data());
      check(MPI_Allgather(mine.data(), (int)(chunk * 2), MPI_BYTE, send.data(), (int)(chunk * 2), MPI_BYTE, c),
            "MPI_Allgather");
      std::memcpy(data, send.data(), count * 2);
    }
    return;
  }
  MPI_Datatype t = mpiType(dt);
  if (checkCalls_) impl_->checkCall(c, group, {(int64_t)ir::OpKind::AllReduce, (int64_t)(count * 4), (int64_t)dt, (int64_t)op});
  for (size_t done = 0; done < count;) {  // int counts: large buffers go in chunks
    size_t chunk = std::min(count - done, (size_t)INT_MAX);
    check(MPI_Allreduce(MPI_IN_PLACE, static_cast<char*>(data) + done * 4, (int)chunk, t, mpiOp(op), c),
          "MPI_Allreduce");
    done += chunk;
  }
}

void MpiComm::runReduceScatter(const std::vector<int>& group, const void* send, size_t count, ir::DType dt,
                            void* recv) {
  int me;
  MPI_Comm c = impl_->comm(group, &me);
  if (dt == ir::DType::BF16) {  // every member's block `me` (all-to-all), summed in f32 (reduceBF16)
    const size_t n = group.size();
    if (checkCalls_) impl_->checkCall(c, group, {(int64_t)ir::OpKind::ReduceScatter, (int64_t)(count * 2 * n), (int64_t)dt});
    if (count * 2 > (size_t)INT_MAX) throw CommError("reduce_scatter of " + std::to_string(count) + " bf16 elements is too large");
    if (count) {
      std::vector<uint16_t> blocks(n * count);
      check(MPI_Alltoall(send, (int)(count * 2), MPI_BYTE, blocks.data(), (int)(count * 2), MPI_BYTE, c), "MPI_Alltoall");
      std::vector<const uint16_t*> src;
      for (size_t m = 0; m < n; ++m) src.push_back(blocks.data() + m * count);
      reduceBF16(src, count, ReduceOp::Sum, static_cast<uint16_t*>(recv));
    }
    return;
  }
  if (checkCalls_) impl_->checkCall(c, group, {(int64_t)ir::OpKind::ReduceScatter, (int64_t)(count * 4 * group.size()), (int64_t)dt});
  if (count * 4 > (size_t)INT_MAX) throw CommError("reduce_scatter of " + std::to_string(count) + " elements is too large");
  (void)mpiType(dt);  // f32 or i32, else an error
  if (!count) return;
  // Every member's block `me` (an all-to-all: (n-1)/n of the input sent,
  // the ring's volume), summed here in member order, as the thread ranks
  // sum. Open MPI's MPI_Reduce_scatter_block reduced onto one rank and
  // scattered: gsl calibrate measured it at 0.02-0.3 GB/s on two ranks
  // through shared memory, against 2-10 GB/s for its all-to-all.
  const size_t n = group.size();
  std::vector<uint32_t> blocks(n * count);
  check(MPI_Alltoall(send, (int)(count * 4), MPI_BYTE, blocks.data(), (int)(count * 4), MPI_BYTE, c), "MPI_Alltoall");
  auto sum = [&](auto* out, const auto* in) {
    for (size_t i = 0; i < count; ++i) out[i] = in[i];
    for (size_t m = 1; m < n; ++m)
      for (size_t i = 0; i < count; ++i) out[i] += in[m * count + i];
  };
  if (dt == ir::DType::F32) sum(static_cast<float*>(recv), reinterpret_cast<const float*>(blocks.data()));
  else sum(static_cast<int32_t*>(recv), reinterpret_cast<const int32_t*>(blocks.data()));
}

void MpiComm::runAllToAll(const std::vector<int>& group, const void* send, size_t bytes, void* recv) {
  int me;
  MPI_Comm c = impl_->comm(group, &me);
  if (checkCalls_) impl_->checkCall(c, group, {(int64_t)ir::OpKind::AllToAll, (int64_t)(bytes * group.size())});
  if (bytes) {
    int count;
    MPI_Datatype t;
    asWords(bytes, &count, &t);
    std::vector<char> copy;
    if (overlaps(send, recv, bytes * group.size())) {
      copy.assign(static_cast<const char*>(send), static_cast<const char*>(send) + bytes * group.size());
      send = copy.data();
    }
    check(MPI_Alltoall(send, count, t, recv, count, t, c), "MPI_Alltoall");
  }
}

void MpiComm::runPermute(const std::vector<int>& group, const std::vector<int64_t>& perm, const void* send,
                      size_t bytes, void* recv) {
  int me;
  MPI_Comm c = impl_->comm(group, &me);
  const size_t n = group.size();
  std::vector<int> inverse(n, -1);
  bool ok = perm.size() == n;
  for (size_t i = 0; ok && i < n; ++i) {
    ok = perm[i] >= 0 && perm[i] < (int64_t)n && inverse[perm[i]] < 0;
    if (ok) inverse[perm[i]] = (int)i;
  }
  std::string p = "[";
  for (size_t i = 0; i < perm.size(); ++i) p += (i ? ", " : "") + std::to_string(perm[i]);
  p += "]";
  if (!ok) throw CommError("collective_permute: perm " + p + " is not a permutation of " + std::to_string(n) + " members");
  if (checkCalls_)
    impl_->checkCall(c, group, {(int64_t)ir::OpKind::CollectivePermute, (int64_t)bytes, -1, (int64_t)(std::hash<std::string>{}(p) & 0x7fffffff)});
  const int from = (int)perm[me], to = inverse[me];
  if (bytes && from == me) {
    if (recv != send) std::memmove(recv, send, bytes);
  } else if (bytes) {
    int count;
    MPI_Datatype t;
    asWords(bytes, &count, &t);
    constexpr int kTag = 17;
    if (overlaps(send, recv, bytes)) {
      if (recv != send) std::memmove(recv, send, bytes);
      check(MPI_Sendrecv_replace(recv, count, t, to, kTag, from, kTag, c, MPI_STATUS_IGNORE), "MPI_Sendrecv_replace");
    } else {
      check(MPI_Sendrecv(send, count, t, to, kTag, recv, count, t, from, kTag, c, MPI_STATUS_IGNORE), "MPI_Sendrecv");
    }
  }
}

void MpiComm::barrier() { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

bool MpiComm::anyRank(bool mine) {
  int x = mine ? 1 : 0;
  check(MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
  return x != 0;
}

void MpiComm::abort(const std::string& why) {
  std::fprintf(stderr, "gsl: rank %d failed: %s\n", rank_, why.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();  // MPI_Abort does not return
}

}  // namespace gsl::runtime
