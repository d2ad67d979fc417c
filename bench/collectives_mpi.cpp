// Bandwidth of GSL's MPI backend (MpiComm::allReduce) against a raw
// MPI_Allreduce on the same buffer, in the same run. Start under mpirun
// (`make bench` does: bench/run_mpi_bench.sh).
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "runtime/MpiComm.h"

int main(int argc, char** argv) {
  gsl::runtime::MpiSession session(&argc, &argv);
  gsl::runtime::MpiComm comm;
  bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  size_t floats = quick ? (16 << 10) : (1 << 20);
  int reps = quick ? 3 : 20;
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
  double gsl = time([&] {
    comm.allReduce(group, buf.data(), floats, gsl::ir::DType::F32, gsl::backend::ReduceOp::Sum);
  });
  double raw = time([&] { MPI_Allreduce(MPI_IN_PLACE, buf.data(), (int)floats, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); });
  if (comm.rank() == 0) {
    double gb = (double)floats * 4 * reps / 1e9;
    std::printf("MPI backend, %d ranks, %zu KiB, %d reps\n", comm.size(), floats * 4 >> 10, reps);
    std::printf("  MpiComm all_reduce: %6.2f GB/s   raw MPI_Allreduce: %6.2f GB/s   ratio gsl/raw = %.2f\n", gb / gsl,
                gb / raw, raw / gsl);
  }
  return 0;
}
