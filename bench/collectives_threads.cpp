// Bandwidth of the thread backend's collectives against a plain memcpy of
// the same bytes (the reference, measured in the same run).
//   all_gather: each of R ranks receives blocks of B bytes -> compare
//   with R threads each memcpy'ing (R-1)*B bytes.
//   all_reduce: compare with a reduce-scatter + all-gather over R threads
//   written independently (std::barrier), on the same bytes.
//   small all_reduce (the gradients of a small model: 4 B to 8 KiB, at 2 and
//   8 ranks): microseconds per call, against R threads that each publish
//   their buffer, wait at a std::barrier, sum all R buffers and wait again
//   (written independently; the least a rendezvous-based call can do).
// Each side is warmed up and the sides alternate (bench/Paired.h); the
// figures are median rounds.
#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bench/Paired.h"
#include "runtime/ThreadComm.h"

using Clock = std::chrono::steady_clock;

static double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Runs body(r) on R threads (the same pattern as the ranks); returns the
// seconds until all of them finished.
static double onThreads(int R, const std::function<void(int)>& body) {
  auto t0 = Clock::now();
  std::vector<std::thread> ts;
  for (int r = 0; r < R; ++r) ts.emplace_back(body, r);
  for (auto& t : ts) t.join();
  return secondsSince(t0);
}

static double threadsMemcpy(int R, size_t bytes, int reps) {
  std::vector<std::vector<char>> src(R, std::vector<char>(bytes, 1));
  std::vector<std::vector<char>> dst(R, std::vector<char>(bytes * R));
  return onThreads(R, [&](int r) {
    for (int k = 0; k < reps; ++k)
      for (int p = 0; p < R; ++p)
        if (p != r) std::memcpy(dst[r].data() + p * bytes, src[p].data(), bytes);
  });
}

static double threadsAllGather(int R, size_t bytes, int reps) {
  std::vector<std::vector<char>> src(R, std::vector<char>(bytes, 1));
  std::vector<std::vector<char>> dst(R, std::vector<char>(bytes * R));
  std::vector<int> group(R);
  for (int i = 0; i < R; ++i) group[i] = i;
  auto t0 = Clock::now();
  gsl::runtime::runRanksOrThrow(R, [&](int r, gsl::backend::Communicator& c) {
    for (int k = 0; k < reps; ++k) c.allGather(group, src[r].data(), bytes, dst[r].data());
  });
  return secondsSince(t0);
}

static double threadsAllReduce(int R, size_t floats, int reps) {
  std::vector<std::vector<float>> buf(R, std::vector<float>(floats, 1.0f));
  std::vector<int> group(R);
  for (int i = 0; i < R; ++i) group[i] = i;
  auto t0 = Clock::now();
  gsl::runtime::runRanksOrThrow(R, [&](int r, gsl::backend::Communicator& c) {
    for (int k = 0; k < reps; ++k)
      c.allReduce(group, buf[r].data(), floats, gsl::ir::DType::F32, gsl::backend::ReduceOp::Sum);
  });
  return secondsSince(t0);
}

// The reference for all_reduce, written independently of GSL's
// communicator: R threads and a std::barrier, a reduce-scatter (thread r
// sums chunk r of the R buffers into a buffer of its own) then an
// all-gather (every thread copies the R reduced chunks into its buffer).
static double threadsReduceScatterAllGather(int R, size_t floats, int reps) {
  std::vector<std::vector<float>> buf(R, std::vector<float>(floats, 1.0f));
  const size_t chunk = (floats + R - 1) / R;
  std::vector<std::vector<float>> part(R, std::vector<float>(chunk));
  std::barrier sync(R);
  return onThreads(R, [&](int r) {
    for (int k = 0; k < reps; ++k) {
      const size_t lo = std::min(floats, r * chunk), len = std::min(floats, lo + chunk) - lo;
      std::memcpy(part[r].data(), buf[0].data() + lo, len * 4);
      for (int p = 1; p < R; ++p)
        for (size_t i = 0; i < len; ++i) part[r][i] += buf[p][lo + i];
      sync.arrive_and_wait();  // every chunk reduced; nobody reads buf any more
      for (int p = 0; p < R; ++p) {
        const size_t plo = std::min(floats, p * chunk), plen = std::min(floats, plo + chunk) - plo;
        std::memcpy(buf[r].data() + plo, part[p].data(), plen * 4);
      }
      sync.arrive_and_wait();  // every buffer written; parts may be reused
    }
  });
}

// Small all_reduce reference: seconds per call.
static double threadsSmallReference(int R, size_t floats, int reps) {
  std::vector<std::vector<float>> in(R, std::vector<float>(floats, 1.0f)), out = in;
  std::barrier sync(R);
  return onThreads(R, [&](int r) {
    for (int k = 0; k < reps; ++k) {
      sync.arrive_and_wait();  // every input written
      std::memcpy(out[r].data(), in[0].data(), floats * 4);
      for (int p = 1; p < R; ++p)
        for (size_t i = 0; i < floats; ++i) out[r][i] += in[p][i];
      sync.arrive_and_wait();  // nobody reads the inputs any more
      std::memcpy(in[r].data(), out[r].data(), floats * 4);
    }
  }) / reps;
}

int main(int argc, char** argv) {
  bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  const int R = 8;
  const size_t bytes = quick ? (64 << 10) : (4 << 20);
  const int reps = quick ? 2 : 10;
  const int rounds = quick ? 1 : 5;
  auto ag = gsl::bench::timePaired([&] { return threadsAllGather(R, bytes, reps); },
                                   [&] { return threadsMemcpy(R, bytes, reps); }, rounds);
  double gb = (double)R * (R - 1) * bytes * reps / 1e9;
  std::printf("thread backend, %d ranks, %zu KiB per rank, %d reps per round, median of %d alternating rounds after a warm-up\n",
              R, bytes >> 10, reps, rounds);
  std::printf("  all_gather : %7.2f GB/s   memcpy of the same bytes: %7.2f GB/s   ratio all_gather/memcpy = %.2f\n",
              gb / ag.gsl, gb / ag.reference, ag.reference / ag.gsl);
  size_t floats = bytes / 4;
  auto ar = gsl::bench::timePaired([&] { return threadsAllReduce(R, floats, reps); },
                                   [&] { return threadsReduceScatterAllGather(R, floats, reps); }, rounds);
  double gbr = (double)R * R * bytes * reps / 1e9;
  std::printf("  all_reduce : %7.2f GB/s   reduce-scatter + all-gather reference: %7.2f GB/s   ratio all_reduce/reference = %.2f\n",
              gbr / ar.gsl, gbr / ar.reference, ar.reference / ar.gsl);
  const int smallReps = quick ? 200 : 5000;
  for (int r : {2, 8})
    for (size_t b : {size_t(4), size_t(128), size_t(8192)}) {
      auto t = gsl::bench::timePaired([&] { return threadsAllReduce(r, b / 4, smallReps) / smallReps; },
                                      [&] { return threadsSmallReference(r, b / 4, smallReps); }, rounds);
      std::printf("  small all_reduce, %d ranks, %5zu B: %8.2f us per call   two-barrier reference: %8.2f us   ratio = %.2f\n",
                  r, b, t.gsl * 1e6, t.reference * 1e6, t.gsl / t.reference);
    }
  return 0;
}
