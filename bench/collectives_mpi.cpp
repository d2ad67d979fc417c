// Bandwidth of GSL's MPI backend (MpiComm::allReduce, MpiComm::allToAll)
// against raw MPI_Allreduce / MPI_Alltoall on the same buffers, in the same
// run, over whatever transport mpirun chose. Start under mpirun (`make
// bench` does: bench/run_mpi_bench.sh on one host, shared memory;
// bench/multihost_bench.sh across two hosts, TCP). Each side is warmed up
// and the sides alternate (bench/Paired.h); the figures are median rounds.
//   bench_collectives_mpi [--quick] [--kib N] [--reps R]   (N: buffer per rank, KiB)
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/Paired.h"
#include "runtime/MpiComm.h"

int main(int argc, char** argv) {
  gsl::runtime::MpiSession session(&argc, &argv);
  gsl::runtime::MpiComm comm;
  bool quick = false;
  size_t kib = 0;
  int repsGiven = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick") quick = true;
    else if (a == "--kib" && i + 1 < argc) kib = std::stoul(argv[++i]);
    else if (a == "--reps" && i + 1 < argc) repsGiven = std::stoi(argv[++i]);
  }
  size_t floats = kib ? kib * 256 : quick ? (16 << 10) : (1 << 20);
  floats -= floats % (size_t)comm.size();  // all_to_all: equal blocks
  int reps = repsGiven > 0 ? repsGiven : quick ? 3 : 20;
  const int rounds = quick ? 1 : 7;
  std::vector<float> buf(floats, 1.0f);
  std::vector<int> group(comm.size());
  for (int i = 0; i < comm.size(); ++i) group[i] = i;
  auto time = [&](auto fn) {
    MPI_Barrier(MPI_COMM_WORLD);
    auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < reps; ++k) fn();
    MPI_Barrier(MPI_COMM_WORLD);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  auto ar = gsl::bench::timePaired(
      [&] {
        return time([&] {
          comm.allReduce(group, buf.data(), floats, gsl::ir::DType::F32, gsl::backend::ReduceOp::Sum);
        });
      },
      [&] { return time([&] { MPI_Allreduce(MPI_IN_PLACE, buf.data(), (int)floats, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); }); },
      rounds);
  std::vector<float> out(floats);
  const size_t block = floats * 4 / (size_t)comm.size();  // bytes to each rank
  auto a2a = gsl::bench::timePaired(
      [&] { return time([&] { comm.allToAll(group, buf.data(), block, out.data()); }); },
      [&] {
        return time([&] {
          MPI_Alltoall(buf.data(), (int)(block / 4), MPI_FLOAT, out.data(), (int)(block / 4), MPI_FLOAT, MPI_COMM_WORLD);
        });
      },
      rounds);
  double gsl = ar.gsl, raw = ar.reference, gslA2a = a2a.gsl, rawA2a = a2a.reference;
  if (comm.rank() == 0) {
    double mb = (double)floats * 4 * reps / 1e6;  // the buffer per rank per call
    std::printf("MPI backend, %d ranks, %zu KiB per rank, %d reps per round, median of %d alternating rounds after a warm-up\n",
                comm.size(), floats * 4 >> 10, reps, rounds);
    std::printf("  MpiComm all_reduce: %8.1f MB/s   raw MPI_Allreduce: %8.1f MB/s   ratio gsl/raw = %.2f\n", mb / gsl,
                mb / raw, raw / gsl);
    std::printf("  MpiComm all_to_all: %8.1f MB/s   raw MPI_Alltoall:  %8.1f MB/s   ratio gsl/raw all_to_all = %.2f\n",
                mb / gslA2a, mb / rawA2a, rawA2a / gslA2a);
  }
  return 0;
}
