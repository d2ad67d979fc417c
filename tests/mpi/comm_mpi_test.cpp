// The MPI communicator (runtime/MpiComm) under mpirun: every collective
// case of tests/unit/comm_cases.h (the ones the thread-rank unit tests run)
// on this world's meshes, checked on every rank, plus call-mismatch
// detection. Exits non-zero if any rank saw a wrong result.
//
//   mpirun -np 4 gsl_mpi_comm_test          the checks
//   mpirun -np 4 gsl_mpi_comm_test --abort  rank 2 aborts while the others
//                                           wait in a collective; mpirun must
//                                           end every rank (tests/mpi/abort_test.sh)
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "../unit/comm_cases.h"
#include "backend/Kernels.h"
#include "runtime/MpiComm.h"
#include "support/BF16.h"

using namespace commtest;
using gsl::backend::CommError;
using gsl::backend::KernelContext;
using gsl::backend::ReduceOp;
using gsl::runtime::MpiComm;
using gsl::runtime::MpiSession;

namespace {

int failures = 0;

void fail(int rank, const std::string& msg) {
  std::fprintf(stderr, "rank %d: FAIL: %s\n", rank, msg.c_str());
  ++failures;
}

std::vector<ir::Mesh> meshesFor(int n) {
  std::vector<ir::Mesh> m = {makeMesh({{"x", n}})};
  if (n % 2 == 0 && n > 2) m.push_back(makeMesh({{"a", 2}, {"b", n / 2}}));
  if (n == 4) {
    m.push_back(makeMesh({{"a", 4}, {"b", 1}}));
    m.push_back(makeMesh({{"a", 1}, {"b", 4}}));
  }
  if (n == 8) m.push_back(makeMesh({{"a", 2}, {"b", 2}, {"c", 2}}));
  return m;
}

std::string commError(const std::function<void()>& f) {
  try {
    f();
  } catch (const CommError& e) {
    return e.what();
  }
  return "<no CommError>";
}

}  // namespace

int main(int argc, char** argv) {
  MpiSession session(&argc, &argv);
  MpiComm comm;
  const int rank = comm.rank(), n = comm.size();
  std::vector<int> world(n);
  for (int i = 0; i < n; ++i) world[i] = i;

  if (argc > 1 && std::strcmp(argv[1], "--abort") == 0) {
    if (rank == 2 % n) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the others block first
      comm.abort("deliberate test failure");
    }
    std::vector<float> v(16);
    for (;;) comm.allReduce(world, v.data(), v.size(), DType::F32, ReduceOp::Sum);
  }

  // 1. Every collective case on every mesh of this world size.
  int ran = 0;
  for (const ir::Mesh& mesh : meshesFor(n)) {
    for (const Case& c : makeCases(mesh)) {
      KernelContext ctx;
      ctx.rank = rank;
      ctx.comm = &comm;
      ctx.mesh = [&](const std::string&) -> const ir::Mesh& { return mesh; };
      CommStats before = comm.stats;
      try {
        Tensor out = gsl::backend::evalOp(*c.op->op, {input(c.dt, c.shape, rank)}, ctx);
        std::string err = checkRank(c, mesh, rank, out, statsDelta(before, comm.stats));
        if (!err.empty()) fail(rank, err);
      } catch (const std::exception& e) {
        fail(rank, c.what + ": " + e.what());
      }
      ++ran;
    }
  }

  // 2. A mismatched call throws the same CommError on both members, and the
  // communicator stays usable.
  if (n >= 2) {
    std::vector<float> buf(64);
    std::vector<char> out(256);
    if (rank < 2) {
      std::string got = commError([&] {
        if (rank == 0)
          comm.allReduce({0, 1}, buf.data(), 64, DType::F32, ReduceOp::Sum);
        else
          comm.allGather({0, 1}, buf.data(), 128, out.data());
      });
      const std::string want =
          "collective mismatch: rank 0 called all_reduce of 256 bytes but rank 1 called all_gather of 128 bytes";
      if (got != want) fail(rank, "mismatch: got '" + got + "'");
    } else if (n >= 4 && rank < 4) {
      comm.allGather({2, 3}, buf.data(), 128, out.data());  // a matching call elsewhere meanwhile
    }
    std::string got = commError([&] {
      int32_t x = 1;
      comm.allReduce(world, &x, 1, DType::I32, rank == n - 1 ? ReduceOp::Max : ReduceOp::Sum);
    });
    std::string want = "collective mismatch: rank 0 called all_reduce of 4 bytes (i32 sum) but rank " +
                       std::to_string(n - 1) + " called all_reduce of 4 bytes (i32 max)";
    if (got != want) fail(rank, "reduction mismatch: got '" + got + "'");
  }

  // 3. In-place permute around a ring, and a barrier.
  std::vector<int32_t> v = {rank, 10 * rank};
  std::vector<int64_t> left(n);
  for (int i = 0; i < n; ++i) left[i] = (i + n - 1) % n;
  for (int it = 0; it < 3; ++it) comm.permute(world, left, v.data(), 8, v.data());
  int src = ((rank - 3) % n + n) % n;
  if (v[0] != src || v[1] != 10 * src) fail(rank, "in-place permute");
  comm.barrier();

  // 4. bf16 reductions (MPI has no bf16 type: sent as bytes, summed in f32
  // on receipt): the f32 result rounded once, and half of f32's bytes.
  {
    const size_t count = 10;  // not a multiple of the group size: padded chunks
    std::vector<uint16_t> b(count), bs(count * n), br(count);
    std::vector<float> f(count), fs(count * n), fr(count);
    for (size_t i = 0; i < count; ++i) {
      f[i] = ((float)i - 3.0f) * 0.5f + (float)rank;  // sums over ranks exact in f32
      b[i] = gsl::f32ToBF16(f[i]);
    }
    for (size_t i = 0; i < count * n; ++i) {
      fs[i] = (float)(i % 7) + 0.25f * (float)rank;
      bs[i] = gsl::f32ToBF16(fs[i]);
    }
    auto sent = [&](ir::OpKind kind, const std::function<void()>& call) {
      const uint64_t before = comm.stats.bytesSent[kind];
      call();
      return comm.stats.bytesSent[kind] - before;
    };
    const uint64_t arB = sent(ir::OpKind::AllReduce, [&] { comm.allReduce(world, b.data(), count, DType::BF16, ReduceOp::Sum); });
    const uint64_t arF = sent(ir::OpKind::AllReduce, [&] { comm.allReduce(world, f.data(), count, DType::F32, ReduceOp::Sum); });
    const uint64_t rsB = sent(ir::OpKind::ReduceScatter, [&] { comm.reduceScatter(world, bs.data(), count, DType::BF16, br.data()); });
    const uint64_t rsF = sent(ir::OpKind::ReduceScatter, [&] { comm.reduceScatter(world, fs.data(), count, DType::F32, fr.data()); });
    for (size_t i = 0; i < count; ++i) {
      if (gsl::bf16ToF32(b[i]) != gsl::roundBF16(f[i])) fail(rank, "bf16 all_reduce element " + std::to_string(i));
      if (gsl::bf16ToF32(br[i]) != gsl::roundBF16(fr[i])) fail(rank, "bf16 reduce_scatter element " + std::to_string(i));
    }
    if (n > 1 && (arB * 2 != arF || rsB * 2 != rsF || arB == 0))
      fail(rank, "bf16 bytes: all_reduce " + std::to_string(arB) + " vs f32 " + std::to_string(arF) +
                     ", reduce_scatter " + std::to_string(rsB) + " vs f32 " + std::to_string(rsF));
  }

  int32_t total = failures;
  comm.allReduce(world, &total, 1, DType::I32, ReduceOp::Sum);
  if (rank == 0)
    std::printf("gsl_mpi_comm_test: %d cases on %d ranks: %s\n", ran, n,
                total ? (std::to_string(total) + " failures").c_str() : "all passed");
  return total ? 1 : 0;
}
