// Paired timing for the benches that set a GSL call beside a reference:
// each side runs untimed first (its first calls pay for fresh pages, lazy
// set-up and cold caches), then the sides are timed in alternating rounds,
// the order swapped every round, and each side's median round is kept.
// Timing one side first and once made GSL's MPI all_reduce look 0.40x raw
// MPI at 4 MiB (and 1.7x with the order swapped) when the two are equal.
#pragma once
#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace gsl::bench {

struct PairedTimes {
  double gsl = 0, reference = 0;  // seconds, median round of each side
};

// `timeGsl` and `timeReference` run one timed round and return its seconds
// (a collective bench synchronises the ranks inside, so every rank calls
// the same sequence). `warmups` untimed rounds of each side come first.
inline PairedTimes timePaired(const std::function<double()>& timeGsl, const std::function<double()>& timeReference,
                              int rounds = 5, int warmups = 1) {
  for (int i = 0; i < warmups; ++i) {
    timeGsl();
    timeReference();
  }
  std::vector<double> g, r;
  for (int i = 0; i < rounds; ++i) {
    if (i % 2 == 0) {
      g.push_back(timeGsl());
      r.push_back(timeReference());
    } else {
      r.push_back(timeReference());
      g.push_back(timeGsl());
    }
  }
  auto median = [](std::vector<double>& v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  return {median(g), median(r)};
}

}  // namespace gsl::bench
