// Tests of the communication layer of SPMD execution: the thread
// communicator (runtime/ThreadComm) and the collective kernels
// (backend/Collectives.cpp, reached through evalOp).
//
// The collective cases and their independently computed expected values
// live in comm_cases.h (shared with the MPI test, tests/mpi/). doctest
// assertions run on the main thread only: rank threads just record what
// they saw.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "backend/Kernels.h"
#include "ir/Function.h"
#include "ir/OpTable.h"
#include "backend/jit/JitEngine.h"
#include "runtime/Fibers.h"
#include "runtime/ThreadComm.h"
#include "support/Trace.h"
#include "support/BF16.h"
#include "comm_cases.h"

using namespace gsl;
using namespace gsl::backend;
using gsl::runtime::runRanks;
using gsl::runtime::runRanksOrThrow;
using ir::AttrMap;
using ir::DType;
using ir::OpKind;
using ir::Shape;
using ir::TensorType;

namespace {

using namespace commtest;

// Runs `c` on every rank of the mesh (ThreadComm ranks, through evalOp)
// and checks every rank's output and stats.
void runCase(const ir::Mesh& mesh, const Case& c) {
  const int n = (int)mesh.numDevices();
  std::vector<std::string> errors(n);
  runRanksOrThrow(n, [&](int rank, Communicator& comm) {
    KernelContext ctx;
    ctx.rank = rank;
    ctx.comm = &comm;
    ctx.mesh = [&](const std::string& name) -> const ir::Mesh& {
      if (name != mesh.name) throw std::runtime_error("unknown mesh " + name);
      return mesh;
    };
    Tensor out = evalOp(*c.op->op, {input(c.dt, c.shape, rank)}, ctx);
    errors[rank] = checkRank(c, mesh, rank, out, comm.stats);
  });
  for (auto& e : errors) CHECK_MESSAGE(e.empty(), e);
}

int checkAllCollectives(const ir::Mesh& mesh) {
  auto cases = makeCases(mesh);
  for (const Case& c : cases) runCase(mesh, c);
  return (int)cases.size();
}

std::string commErrorOf(const std::exception_ptr& e) {
  if (!e) return "<no error>";
  try {
    std::rethrow_exception(e);
  } catch (const CommError& c) {
    return c.what();
  } catch (const std::exception& x) {
    return std::string("<not a CommError> ") + x.what();
  }
  return "<unknown>";
}

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("collectiveGroup: members ordered by their coordinates along axes, major first") {
  ir::Mesh m = makeMesh({{"a", 2}, {"b", 4}});
  int idx = -1;
  CHECK(collectiveGroup(m, {1}, 5, &idx) == std::vector<int>{4, 5, 6, 7});
  CHECK(idx == 1);
  CHECK(collectiveGroup(m, {0}, 5, &idx) == std::vector<int>{1, 5});
  CHECK(idx == 1);
  CHECK(collectiveGroup(m, {0, 1}, 6, &idx) == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(idx == 6);
  CHECK(collectiveGroup(m, {1, 0}, 5, &idx) == std::vector<int>{0, 4, 1, 5, 2, 6, 3, 7});
  CHECK(idx == 3);
  CHECK(collectiveGroup(m, {}, 3, &idx) == std::vector<int>{3});
  CHECK(idx == 0);
  ir::Mesh c = makeMesh({{"a", 2}, {"b", 2}, {"c", 2}});
  CHECK(collectiveGroup(c, {2, 0}, 2, &idx) == std::vector<int>{2, 6, 3, 7});
  CHECK(idx == 0);
  // Agrees with the independent definition everywhere.
  for (const ir::Mesh& mesh : {m, c, makeMesh({{"x", 3}, {"y", 2}})})
    for (const auto& axes : axisLists((int)mesh.axes.size()))
      for (int r = 0; r < mesh.numDevices(); ++r) {
        int i1 = -1, i2 = -2;
        CHECK(collectiveGroup(mesh, axes, r, &i1) == refGroup(mesh, axes, r, &i2));
        CHECK(i1 == i2);
      }
}

TEST_CASE("collectives on thread ranks: world sizes 1, 2, 3, 4") {
  for (const ir::Mesh& mesh : {makeMesh({{"x", 1}}), makeMesh({{"x", 2}}), makeMesh({{"x", 3}}), makeMesh({{"x", 4}}),
                               makeMesh({{"a", 2}, {"b", 2}}), makeMesh({{"a", 3}, {"b", 1}})}) {
    CAPTURE(mesh.str());
    checkAllCollectives(mesh);
  }
}

TEST_CASE("collectives on thread ranks: world size 8") {
  for (const ir::Mesh& mesh :
       {makeMesh({{"x", 8}}), makeMesh({{"a", 2}, {"b", 4}}), makeMesh({{"a", 2}, {"b", 2}, {"c", 2}})}) {
    CAPTURE(mesh.str());
    checkAllCollectives(mesh);
  }
}

TEST_CASE("ThreadComm: bytes sent per collective") {
  std::vector<CommStats> stats(4);
  runRanksOrThrow(4, [&](int r, Communicator& c) {
    std::vector<int> all = {0, 1, 2, 3};
    std::vector<int32_t> buf(400), out(400);
    c.allGather(all, buf.data(), 100, out.data());
    c.allReduce(all, buf.data(), 100, DType::F32, ReduceOp::Sum);
    c.reduceScatter(all, buf.data(), 10, DType::I32, out.data());
    c.allToAll(all, buf.data(), 40, out.data());
    c.permute(all, {1, 2, 3, 0}, buf.data(), 40, out.data());
    c.permute({r}, {0}, buf.data(), 40, out.data());
    c.barrier();
    stats[r] = c.stats;
  });
  for (auto& s : stats) {
    CHECK(s.bytesSent[ir::OpKind::AllGather] == 300);
    CHECK(s.bytesSent[ir::OpKind::AllReduce] == 600);  // 2 (n-1)/n of 400 bytes
    CHECK(s.bytesSent[ir::OpKind::ReduceScatter] == 120);
    CHECK(s.bytesSent[ir::OpKind::AllToAll] == 120);
    CHECK(s.bytesSent[ir::OpKind::CollectivePermute] == 40);
    CHECK(s.calls[ir::OpKind::CollectivePermute] == 2);
    CHECK(s.calls[ir::OpKind::AllReduce] == 1);
  }
}

TEST_CASE("ThreadComm: all_reduce of arbitrary floats is bit-identical on every rank") {
  const int n = 5;
  std::vector<std::vector<float>> results(n);
  runRanksOrThrow(n, [&](int r, Communicator& c) {
    std::vector<float> v(1000);
    for (int i = 0; i < 1000; ++i) v[i] = 1.0f / (float)(r * 1000 + i + 3) * (i % 2 ? 1e4f : -1e-3f);
    c.allReduce({0, 1, 2, 3, 4}, v.data(), v.size(), DType::F32, ReduceOp::Sum);
    results[r] = v;
  });
  for (int r = 1; r < n; ++r) CHECK(std::memcmp(results[r].data(), results[0].data(), 4000) == 0);
}

// Calls above ThreadWorld::kStagedBytes move data directly between the
// members' buffers (all_reduce: each member reduces its chunk of everyone's
// buffer and writes it into everyone's); smaller ones read staged copies.
// Both must give the values computed here, element by element in member
// order, also in place and with chunks that do not divide evenly.
TEST_CASE("ThreadComm: staged (small) and direct (large) calls, in place and not, give exact results") {
  const size_t big = runtime::ThreadWorld::kStagedBytes / 4 + 13;  // words: a direct call
  for (int n : {2, 3, 5}) {
    for (size_t words : {size_t(7), big}) {
      CAPTURE(n);
      CAPTURE(words);
      std::vector<int> all(n);
      for (int i = 0; i < n; ++i) all[i] = i;
      auto f32 = [](int r, size_t i) { return 1.0f / (float)(r * 7919 + i + 3) * (i % 3 ? 1e4f : -1e-3f); };
      auto i32 = [](int r, size_t i) { return (int32_t)((r + 1) * 1000003 * (int64_t)(i + 1) % 2000000011); };
      std::vector<std::vector<float>> sum(n), mx(n), gathered(n), bf(n);
      std::vector<std::vector<int32_t>> isum(n), scattered(n), toAll(n), permuted(n);
      runRanksOrThrow(n, [&](int r, Communicator& c) {
        std::vector<float> v(words);
        for (size_t i = 0; i < words; ++i) v[i] = f32(r, i);
        sum[r] = v;
        c.allReduce(all, sum[r].data(), words, DType::F32, ReduceOp::Sum);
        mx[r] = v;
        c.allReduce(all, mx[r].data(), words, DType::F32, ReduceOp::Max);
        std::vector<uint16_t> h(words);
        for (size_t i = 0; i < words; ++i) h[i] = f32ToBF16(v[i]);
        c.allReduce(all, h.data(), words, DType::BF16, ReduceOp::Sum);
        for (uint16_t x : h) bf[r].push_back(bf16ToF32(x));
        isum[r].resize(words);
        for (size_t i = 0; i < words; ++i) isum[r][i] = i32(r, i);
        c.allReduce(all, isum[r].data(), words, DType::I32, ReduceOp::Sum);
        // all_gather in place: this member's block already sits at its slot.
        gathered[r].assign(words * n, 0.0f);
        std::copy(v.begin(), v.end(), gathered[r].begin() + r * words);
        c.allGather(all, gathered[r].data() + r * words, words * 4, gathered[r].data());
        // reduce_scatter into the front of its own input.
        std::vector<int32_t> in(words * n);
        for (size_t i = 0; i < in.size(); ++i) in[i] = i32(r, i);
        c.reduceScatter(all, in.data(), words, DType::I32, in.data());
        scattered[r].assign(in.begin(), in.begin() + words);
        // all_to_all and permute in place.
        for (size_t i = 0; i < in.size(); ++i) in[i] = i32(r, i);
        c.allToAll(all, in.data(), words * 4, in.data());
        toAll[r] = in;
        std::vector<int64_t> perm(n);
        for (int m = 0; m < n; ++m) perm[m] = (m + 1) % n;  // member m receives from m + 1
        permuted[r].resize(words);
        for (size_t i = 0; i < words; ++i) permuted[r][i] = i32(r, i);
        c.permute(all, perm, permuted[r].data(), words * 4, permuted[r].data());
      });
      for (int r = 0; r < n; ++r) {
        CAPTURE(r);
        size_t bad = 0;
        for (size_t i = 0; i < words; ++i) {
          float s = f32(0, i), m = f32(0, i), b = bf16ToF32(f32ToBF16(f32(0, i)));
          uint32_t is = (uint32_t)i32(0, i);
          for (int q = 1; q < n; ++q) {
            s += f32(q, i);
            m = std::max(m, f32(q, i));
            b += bf16ToF32(f32ToBF16(f32(q, i)));
            is += (uint32_t)i32(q, i);
          }
          b = bf16ToF32(f32ToBF16(b));
          bad += std::memcmp(&sum[r][i], &s, 4) != 0;
          bad += mx[r][i] != m;
          bad += std::memcmp(&bf[r][i], &b, 4) != 0;
          bad += isum[r][i] != (int32_t)is;
          for (int q = 0; q < n; ++q) bad += gathered[r][q * words + i] != f32(q, i);
          uint32_t rs = 0;
          for (int q = 0; q < n; ++q) rs += (uint32_t)i32(q, r * words + i);
          bad += scattered[r][i] != (int32_t)rs;
          for (int q = 0; q < n; ++q) bad += toAll[r][q * words + i] != i32(q, r * words + i);
          bad += permuted[r][i] != i32((r + 1) % n, i);
        }
        CHECK(bad == 0);
      }
    }
  }
}

TEST_CASE("ThreadComm: in-place permute and repeated calls on overlapping groups") {
  std::vector<std::vector<int32_t>> got(4);
  runRanksOrThrow(4, [&](int r, Communicator& c) {
    std::vector<int32_t> v = {r, 10 * r};
    for (int it = 0; it < 20; ++it) {
      c.permute({0, 1, 2, 3}, {3, 0, 1, 2}, v.data(), 8, v.data());  // receive from the left neighbour
      std::vector<int> pair = r < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3};
      int32_t x = 1;
      c.allReduce(pair, &x, 1, DType::I32, ReduceOp::Sum);
      if (x != 2) throw std::runtime_error("pair sum");
    }
    got[r] = v;
  });
  for (int r = 0; r < 4; ++r) {
    int src = ((r - 20) % 4 + 4) % 4;
    CHECK(got[r] == std::vector<int32_t>{src, 10 * src});
  }
}

// collective_permute is point to point on threads (issue 31): a rank waits
// for its source alone, not for the whole group. Ranks 2 and 3 enter their
// permute only once ranks 0 and 1 have returned from theirs; a rendezvous
// of the whole group would hold 0 and 1 until 2 and 3 arrive (the wait
// below then times out and the flag check fails instead of hanging).
TEST_CASE("ThreadComm: collective_permute waits only for the rank's own source") {
  const size_t big = runtime::ThreadWorld::kStagedBytes / 4 + 13;  // words: a direct call
  for (size_t words : {size_t(5), big}) {
    for (bool inPlace : {false, true}) {
      CAPTURE(words);
      CAPTURE(inPlace);
      std::atomic<int> returned{0};  // ranks 0 and 1 back from their permute
      std::vector<int> sawRelease(4, -1);
      std::vector<std::vector<int32_t>> got(4);
      auto value = [](int r, size_t i) { return (int32_t)(r * 1000003 + (int64_t)i * 7); };
      runRanksOrThrow(4, [&](int r, Communicator& c) {
        if (r >= 2) {  // wait (letting the other ranks of this OS thread run) for 0 and 1
          auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
          while (returned.load() < 2 && std::chrono::steady_clock::now() < until)
            if (!runtime::fibers::yield(/*idle=*/false)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
          sawRelease[r] = returned.load() == 2;
        }
        std::vector<int32_t> send(words), out(words, -1);
        for (size_t i = 0; i < words; ++i) send[i] = value(r, i);
        c.permute({0, 1, 2, 3}, {1, 0, 3, 2}, send.data(), words * 4, inPlace ? send.data() : out.data());
        if (r < 2) ++returned;
        got[r] = inPlace ? send : out;
        c.barrier();
      });
      CHECK(sawRelease[2] == 1);
      CHECK(sawRelease[3] == 1);
      for (int r = 0; r < 4; ++r) {
        CAPTURE(r);
        size_t bad = got[r].size() != words;
        for (size_t i = 0; !bad && i < words; ++i) bad += got[r][i] != value(r ^ 1, i);
        CHECK(bad == 0);
      }
    }
  }
}

// Point-to-point permutes on one OS thread per rank (runRanks uses fibers
// beyond the core count): rings both ways, staged and direct, in place and
// not, interleaved with all_reduces over pairs, so that fast senders run
// ahead of their receivers.
TEST_CASE("ThreadComm: collective_permute on OS threads, repeated") {
  const int n = 4;
  const size_t big = runtime::ThreadWorld::kStagedBytes / 4 + 13;
  runtime::ThreadWorld world(n);
  std::vector<int> bad(n, 0);
  std::vector<std::string> err(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        runtime::ThreadComm c(world, r);
        const std::vector<int> all = {0, 1, 2, 3};
        const std::vector<int> pair = r < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3};
        for (int it = 0; it < 200; ++it) {
          const size_t words = it % 3 == 0 ? big : 3 + it % 5;
          const bool left = it % 2 == 0;  // member m receives from m - 1, else from m + 1
          std::vector<int64_t> perm(n);
          for (int m = 0; m < n; ++m) perm[m] = left ? (m + n - 1) % n : (m + 1) % n;
          const int src = (int)perm[r];
          std::vector<int32_t> v(words), out(words, -1);
          for (size_t i = 0; i < words; ++i) v[i] = r * 100000 + it * 100 + (int32_t)i;
          const bool inPlace = it % 4 < 2;
          c.permute(all, perm, v.data(), words * 4, inPlace ? v.data() : out.data());
          const std::vector<int32_t>& got = inPlace ? v : out;
          for (size_t i = 0; i < words; ++i) bad[r] += got[i] != src * 100000 + it * 100 + (int32_t)i;
          if (it % 7 == 0) {
            int32_t x = 1;
            c.allReduce(pair, &x, 1, DType::I32, ReduceOp::Sum);
            bad[r] += x != 2;
          }
        }
      } catch (const std::exception& e) {
        err[r] = e.what();
        world.abort(r, e.what());
      }
      world.finished(r);
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    CHECK(err[r] == "");
    CHECK(bad[r] == 0);
  }
}

// A rank blocked in a permute, waiting for its source (or, direct, for its
// receiver's copy), throws when the world fails, and a permute peer that
// never comes is a deadlock that names what each rank waits for.
TEST_CASE("ThreadComm: collective_permute fails without hanging") {
  const size_t big = runtime::ThreadWorld::kStagedBytes / 4 + 13;
  auto t0 = std::chrono::steady_clock::now();
  for (size_t words : {size_t(4), big}) {
    CAPTURE(words);
    // A ring of 3: member i receives from i + 1. Rank 2 aborts instead.
    auto errs = runRanks(3, [&](int r, Communicator& c) {
      if (r == 2) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let the others block first
        c.abort("boom");
        return;
      }
      std::vector<int32_t> v(words, r), out(words);
      c.permute({0, 1, 2}, {1, 2, 0}, v.data(), words * 4, out.data());
      c.barrier();
    });
    CHECK(commErrorOf(errs[0]) == "rank 2 failed: boom");  // staged: in the barrier; direct: waits for rank 2
    CHECK(commErrorOf(errs[1]) == "rank 2 failed: boom");  // waits for rank 2's block
    // Rank 2 skips the permute.
    errs = runRanks(3, [&](int r, Communicator& c) {
      if (r == 2) return;
      std::vector<int32_t> v(words, r), out(words);
      c.permute({0, 1, 2}, {1, 2, 0}, v.data(), words * 4, out.data());
    });
    const std::string call = "collective_permute of " + std::to_string(words * 4) + " bytes over ranks [0, 1, 2]";
    if (words == big) {
      CHECK(commErrorOf(errs[0]) == "collective deadlock: rank 0 waits for rank 2 to take its block in " + call +
                                        "; rank 1 waits for rank 2's block in " + call + "; rank 2 finished");
    } else {
      CHECK(!errs[0]);  // a staged block is left in the rendezvous
    }
    CHECK(commErrorOf(errs[1]).find("rank 1 waits for rank 2's block in " + call) != std::string::npos);
    CHECK(!errs[2]);
  }
  // A permute against another kind of call, and permutes of different perms.
  auto errs = runRanks(2, [](int r, Communicator& c) {
    std::vector<int32_t> buf(16), out(32);
    if (r == 0)
      c.permute({0, 1}, {1, 0}, buf.data(), 64, out.data());
    else
      c.allGather({0, 1}, buf.data(), 64, out.data());
  });
  const std::string want =
      "collective mismatch: rank 0 called collective_permute of 64 bytes but rank 1 called all_gather of 64 bytes";
  CHECK(commErrorOf(errs[0]) == want);
  CHECK(commErrorOf(errs[1]) == want);
  errs = runRanks(4, [](int r, Communicator& c) {
    std::vector<int32_t> buf(4), out(4);
    c.permute({0, 1, 2, 3}, r < 2 ? std::vector<int64_t>{1, 0, 3, 2} : std::vector<int64_t>{1, 0, 2, 3}, buf.data(),
              16, out.data());
    c.barrier();
  });
  for (auto& e : errs) CHECK(commErrorOf(e).find("collective mismatch: rank 0 called collective_permute of 16 bytes (perm [1, 0, 3, 2]) but rank 2 called collective_permute of 16 bytes (perm [1, 0, 2, 3])") != std::string::npos);
  CHECK(secondsSince(t0) < 20);
}

TEST_CASE("ThreadComm: mismatched collectives make every member throw, without hanging") {
  auto errs = runRanks(2, [](int r, Communicator& c) {
    std::vector<float> buf(64);
    std::vector<char> out(256);
    if (r == 0)
      c.allReduce({0, 1}, buf.data(), 64, DType::F32, ReduceOp::Sum);
    else
      c.allGather({0, 1}, buf.data(), 128, out.data());
  });
  const std::string want =
      "collective mismatch: rank 0 called all_reduce of 256 bytes but rank 1 called all_gather of 128 bytes";
  CHECK(commErrorOf(errs[0]) == want);
  CHECK(commErrorOf(errs[1]) == want);

  // Same kind and size, different reduction.
  errs = runRanks(3, [](int r, Communicator& c) {
    std::vector<int32_t> buf(4);
    c.allReduce({0, 1, 2}, buf.data(), 4, DType::I32, r == 2 ? ReduceOp::Max : ReduceOp::Sum);
  });
  for (auto& e : errs)
    CHECK(commErrorOf(e) ==
          "collective mismatch: rank 0 called all_reduce of 16 bytes (i32 sum) but rank 2 called all_reduce of 16 "
          "bytes (i32 max)");

  // Different sizes of the same kind, after some matching calls.
  errs = runRanks(4, [](int r, Communicator& c) {
    std::vector<int32_t> buf(8), out(32);
    for (int i = 0; i < 3; ++i) c.allGather({0, 1, 2, 3}, buf.data(), 16, out.data());
    c.allGather({0, 1, 2, 3}, buf.data(), r == 3 ? 32 : 16, out.data());
  });
  for (auto& e : errs)
    CHECK(commErrorOf(e) ==
          "collective mismatch: rank 0 called all_gather of 16 bytes but rank 3 called all_gather of 32 bytes");
}

TEST_CASE("ThreadComm: abort makes blocked and later calls throw, naming the rank") {
  auto errs = runRanks(4, [](int r, Communicator& c) {
    if (r == 3) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let the others block first
      c.abort("boom");
      return;
    }
    std::vector<float> v(16);
    c.allReduce({0, 1, 2, 3}, v.data(), 16, DType::F32, ReduceOp::Sum);
  });
  for (int r = 0; r < 3; ++r) CHECK(commErrorOf(errs[r]) == "rank 3 failed: boom");
  CHECK(!errs[3]);

  // A later call, on any group, throws too.
  std::atomic<int> threw{0};
  runRanks(2, [&](int r, Communicator& c) {
    if (r == 0) c.abort("early");
    try {
      c.barrier();
    } catch (const CommError& e) {
      if (std::string(e.what()) == "rank 0 failed: early") ++threw;
    }
    try {
      int32_t x = 0;
      c.allReduce({r}, &x, 1, DType::I32, ReduceOp::Sum);
    } catch (const CommError&) {
      ++threw;
    }
  });
  CHECK(threw == 4);
}

TEST_CASE("runRanks: a rank's exception stops the others; the root cause is reported") {
  auto t0 = std::chrono::steady_clock::now();
  auto errs = runRanks(4, [](int r, Communicator& c) {
    std::vector<float> v(16);
    for (int it = 0; it < 5; ++it) {
      if (r == 2 && it == 3) throw std::runtime_error("bad input");
      c.allReduce({0, 1, 2, 3}, v.data(), 16, DType::F32, ReduceOp::Sum);
    }
  });
  CHECK(secondsSince(t0) < 5);
  for (int r : {0, 1, 3}) CHECK(commErrorOf(errs[r]) == "rank 2 failed: bad input");
  CHECK(commErrorOf(errs[2]) == "<not a CommError> bad input");
  CHECK_THROWS_WITH_AS(std::rethrow_exception(runtime::rootCause(errs)), "bad input", std::runtime_error);
  CHECK(!runtime::rootCause(std::vector<std::exception_ptr>(3)));
  CHECK_THROWS_WITH_AS(runRanksOrThrow(3,
                                       [](int r, Communicator& c) {
                                         if (r == 1) throw std::logic_error("rank one broke");
                                         c.barrier();
                                       }),
                       "rank one broke", std::logic_error);
}

TEST_CASE("ThreadComm: a collective that some rank never calls ends in a deadlock error") {
  auto t0 = std::chrono::steady_clock::now();
  auto errs = runRanks(2, [](int r, Communicator& c) {
    if (r == 0) return;  // skips the collective
    int32_t x = 1;
    c.allReduce({0, 1}, &x, 1, DType::I32, ReduceOp::Sum);
  });
  CHECK(!errs[0]);
  CHECK(commErrorOf(errs[1]) ==
        "collective deadlock: rank 1 waits in all_reduce of 4 bytes over ranks [0, 1]; rank 0 finished");
  // A cycle of pairwise waits.
  errs = runRanks(3, [](int r, Communicator& c) {
    std::vector<int> g = r == 0 ? std::vector<int>{0, 1} : r == 1 ? std::vector<int>{1, 2} : std::vector<int>{0, 2};
    int32_t x = 1;
    c.allReduce(g, &x, 1, DType::I32, ReduceOp::Sum);
  });
  for (auto& e : errs) CHECK(commErrorOf(e).rfind("collective deadlock: rank 0 waits in all_reduce", 0) == 0);
  CHECK(secondsSince(t0) < 5);
}

TEST_CASE("ThreadComm: malformed groups are errors") {
  auto errs = runRanks(2, [](int r, Communicator& c) {
    int32_t x = 0;
    if (r == 0) c.allReduce({1}, &x, 1, DType::I32, ReduceOp::Sum);
    else c.allReduce({1, 1}, &x, 1, DType::I32, ReduceOp::Sum);
  });
  CHECK(commErrorOf(errs[0]) == "rank 0 called a collective of group [1] it is not a member of");
  CHECK(commErrorOf(errs[1]) == "malformed collective group [1, 1] in a world of 2");
}

TEST_CASE("ThreadComm: 64 ranks on few cores") {
  auto t0 = std::chrono::steady_clock::now();
  const int n = 64;
  std::vector<int> bad(n, 0);
  ir::Mesh mesh = makeMesh({{"a", 8}, {"b", 8}});
  AttrMap a = baseAttrs({1}, 8);
  a.set("dim", int64_t(0));
  OneOp gather(mesh, OpKind::AllGather, {DType::I32, {2, 2}}, a);
  runRanksOrThrow(n, [&](int r, Communicator& c) {
    std::vector<int> all(n);
    for (int i = 0; i < n; ++i) all[i] = i;
    std::vector<float> v(256);
    for (int it = 0; it < 50; ++it) {
      for (int i = 0; i < 256; ++i) v[i] = (float)(r + i + it);
      c.allReduce(all, v.data(), v.size(), DType::F32, ReduceOp::Sum);
      for (int i = 0; i < 256; ++i)
        if (v[i] != (float)(n * (n - 1) / 2 + n * (i + it))) ++bad[r];
    }
    KernelContext ctx;
    ctx.rank = r;
    ctx.comm = &c;
    ctx.mesh = [&](const std::string&) -> const ir::Mesh& { return mesh; };
    Tensor out = evalOp(*gather.op, {input(DType::I32, {2, 2}, r)}, ctx);
    int row = r / 8;
    for (int64_t i = 0; i < out.size(); ++i)
      if (static_cast<const int32_t*>(out.raw())[i] != word(DType::I32, row * 8 + (int)(i / 4), i % 4)) ++bad[r];
  });
  double s = secondsSince(t0);
  MESSAGE("64 ranks x 50 all_reduce + all_gather: " << s << " s");
  CHECK(s < 20);
  for (int r = 0; r < n; ++r) CHECK(bad[r] == 0);
}

// runRanks runs ranks beyond the core count as fibers (runtime/Fibers.h);
// these run them so whatever the machine's core count.
TEST_CASE("fibers: 12 ranks on 2 threads keep their own thread-locals across collectives") {
  if (!runtime::fibers::available()) return;  // runRanks uses threads there
  const int n = 12;
  runtime::ThreadWorld world(n);
  std::vector<int> bad(n, 0);
  std::vector<trace::Recorder> recs(n);
  runtime::fibers::run(n, 2, [&](int r) {
    runtime::ThreadComm c(world, r);
    std::vector<int> all(n);
    for (int i = 0; i < n; ++i) all[i] = i;
    trace::current = &recs[r];
    backend::JitWorkspace& ws = backend::jitThreadWorkspace();
    for (int it = 0; it < 20; ++it) {
      int v = r * 100 + it;
      c.allReduce(all, &v, 1, DType::I32, ReduceOp::Sum);  // a staged call: the fiber yields
      if (v != 100 * n * (n - 1) / 2 + n * it) ++bad[r];
      if (trace::current != &recs[r]) ++bad[r];
      if (ws.size == 0) {  // this fiber's own workspace, grown once
        ws.p = static_cast<char*>(std::malloc(64));
        ws.size = 64;
      }
      if (it == 0) std::memset(ws.p, r, 64);
      for (int i = 0; i < 64; ++i)
        if (ws.p[i] != (char)r) ++bad[r];
    }
    trace::current = nullptr;
    world.finished(r);
  });
  for (int r = 0; r < n; ++r) CHECK(bad[r] == 0);
  CHECK(backend::jitThreadWorkspace().size == 0);  // the main thread's is its own
}

TEST_CASE("fibers: a failing rank releases the fibers blocked in collectives") {
  if (!runtime::fibers::available()) return;
  const int n = 9;
  runtime::ThreadWorld world(n);
  std::vector<std::string> seen(n);
  runtime::fibers::run(n, 2, [&](int r) {
    runtime::ThreadComm c(world, r);
    try {
      if (r == 4) throw std::runtime_error("bad input");
      c.barrier();
    } catch (const std::exception& e) {
      seen[r] = e.what();
      world.abort(r, e.what());
    }
    world.finished(r);
  });
  for (int r = 0; r < n; ++r) CHECK(seen[r] == (r == 4 ? "bad input" : "rank 4 failed: bad input"));
}
