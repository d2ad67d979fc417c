// What a run shows and logs of its training (rank 0): the progress line
// on stderr (step, loss, the metrics log_metric and log_moe gave, tokens/s, ETA; in
// place on a terminal, every tenth of the loop otherwise) and, with --log,
// one JSON line per training step.
#pragma once
#include <chrono>
#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/Tensor.h"

namespace gsl::runtime {

// The telemetry of one MoE layer, as stdlib/moe.gsl's moe_stats lays it
// out (docs/moe.md, "Telemetry"): E tokens-per-expert counts, then
// kMoeStats numbers.
struct MoeLayerStats {
  std::vector<double> tokens;  // the assignments each expert took, over the batch
  double dropped = 0, overload = 0, entropy = 0, aux = 0;
  double tokensMin() const;
  double tokensMean() const;
  double tokensMax() const;
};
inline constexpr int64_t kMoeStats = 4;  // stdlib/moe.gsl's MOE_STATS
// The layers of `v`, f32[E + kMoeStats] (one layer) or f32[L, E + kMoeStats].
std::vector<MoeLayerStats> moeLayers(const backend::Tensor& v);
// At most this many experts: the --log record has every expert's count;
// more: their min, mean and max.
inline constexpr size_t kMoeTokensListed = 16;

class Progress {
 public:
  // `rank`: only rank 0 shows and logs. `line`: the progress line is shown
  // (RunOptions::progress).
  Progress(int rank, bool line) : rank_(rank), line_(line) {}

  // --log `path` (none if empty): opened, truncated, on rank 0. Throws
  // RankError when it cannot be written.
  void openLog(const std::string& path);

  // The loops being run (the line's step, total and ETA): enterLoop at a
  // loop's start, iteration(i) before each run of its body and
  // iterationEnded() after it (the line of a step run in it shows then,
  // with the metrics logged in that iteration), leaveLoop at its end.
  void enterLoop(int64_t lo, int64_t hi) { loops_.push_back({lo, hi, lo}); }
  void iteration(int64_t i) { loops_.back().i = i; }
  void iterationEnded() {
    if (pending_ && pending_->depth == loops_.size()) show();
  }
  void leaveLoop() { loops_.pop_back(); }

  // A training step: stepStarts() before it runs (the first starts the
  // clock), stepDone() after it, with the optimizer's step number `t`, the
  // loss and the tokens of its inputs (`examples`: rows, not tokens).
  void stepStarts();
  void stepDone(int64_t t, double loss, int64_t tokens, bool examples);

  // log_metric(name, value): into the last step's --log record and the
  // progress line (from the next step's line on).
  void metric(const std::string& name, const backend::Tensor& v);
  // log_moe(name, stats): the MoE layers' telemetry (moeLayers) into the
  // last step's --log record (`name`: one object per layer) and, summed
  // up, the progress line (`name drop 3.1% over 1.42`: the mean dropped
  // fraction over the layers, the largest overload factor).
  void moe(const std::string& name, const std::vector<MoeLayerStats>& layers);

  // Writes the --log record of the last step (when the next step starts
  // or the run ends).
  void flushLogRecord();
  // Shows the line of the last step, if it has not been shown.
  void show();
  // Clears a line shown in place (on a terminal), before other output.
  void clear();

 private:
  // The line of the last step, shown when its loop iteration ends, so that
  // it has the metrics the program logged in that iteration; a metric
  // logged at an earlier step says which.
  struct Line {
    int64_t step = 0, done = 0, total = 0;
    size_t depth = 0;  // the loops around the step (shown when the innermost one's iteration ends)
    double loss = 0, rate = 0, eta = -1;
    bool examples = false, hasInputs = false;
  };
  struct Loop {
    int64_t lo, hi, i;
  };
  struct Metric {
    std::string name, text;
    int64_t step;  // the loop step that logged it
  };

  int rank_;
  bool line_;
  std::vector<Loop> loops_;
  std::chrono::steady_clock::time_point trainStart_;
  double compileAtStart_ = 0;  // jitThreadReadySeconds() at trainStart_
  int64_t stepsRun_ = 0;
  std::optional<Line> pending_;
  bool shown_ = false;  // a line is shown in place
  std::ofstream log_;
  // The --log record of the last step, written when the next step starts
  // or the run ends (metric() adds to it); the metrics' latest values, in
  // the order they were first logged (the progress line).
  std::optional<nlohmann::ordered_json> logRecord_;
  std::vector<Metric> metrics_;
  // Shows `text` as metric `name` on the progress line.
  void lineMetric(const std::string& name, const std::string& text);
};

}  // namespace gsl::runtime
