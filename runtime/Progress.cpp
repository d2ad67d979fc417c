// What a run shows and logs of its training: the progress line and the
// --log records, made from the steps' losses and the metrics logged.
#include "runtime/Progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "backend/jit/JitEngine.h"
#include "runtime/SpmdProgram.h"

namespace gsl::runtime {

void Progress::openLog(const std::string& path) {
  if (rank_ != 0 || path.empty()) return;
  log_.open(path, std::ios::out | std::ios::trunc);
  if (!log_) throw RankError({}, path + ": cannot write the metrics log");
}

void Progress::stepStarts() {
  if (stepsRun_ != 0) return;
  trainStart_ = std::chrono::steady_clock::now();
  compileAtStart_ = backend::jitThreadReadySeconds();
}

void Progress::stepDone(int64_t t, double loss, int64_t tokens, bool examples) {
  ++stepsRun_;
  if (rank_ != 0) return;
  // Compile time is not training time: tokens/s and the ETA leave it out.
  const double compileS = backend::jitThreadReadySeconds() - compileAtStart_;
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - trainStart_).count();
  elapsed = std::max(elapsed - compileS, 1e-9);
  double tps = elapsed > 0 ? (double)(tokens * stepsRun_) / elapsed : 0;
  if (log_.is_open()) {
    // The loss as its float prints (shortest digits); a NaN or infinite
    // loss is null (JSON has no number for it).
    nlohmann::ordered_json line = {{"step", t},
                                   {"loss", std::strtod(backend::formatF32((float)loss).c_str(), nullptr)},
                                   {examples ? "examples_per_s" : "tokens_per_s", (int64_t)tps},
                                   {"elapsed_s", elapsed},
                                   {"compile_s", backend::jitCompileSeconds()}};
    flushLogRecord();
    logRecord_ = line;
  }
  if (!line_) return;
  // The step as the program numbers it (the loop's variable), and how
  // many of the loop's steps are done; without a loop, the optimizer's
  // step number.
  Line p;
  p.step = t;
  if (!loops_.empty()) {
    p.step = loops_.back().i;
    p.done = loops_.back().i - loops_.back().lo + 1;
    p.total = loops_.back().hi - loops_.back().lo;
  }
  p.depth = loops_.size();
  p.loss = loss;
  p.rate = tps;
  p.examples = examples;
  p.hasInputs = tokens > 0;
  if (p.total > p.done && stepsRun_ > 0) p.eta = elapsed / (double)stepsRun_ * (double)(p.total - p.done);
  pending_ = p;
  if (loops_.empty()) show();  // else when the loop's iteration ends (its metrics logged)
}

void Progress::show() {
  if (!pending_) return;
  const Line p = *pending_;
  pending_.reset();
  std::string line = "step " + std::to_string(p.step);
  if (p.total) line += "  " + std::to_string(p.done) + "/" + std::to_string(p.total);
  line += "  loss " + backend::formatF32((float)p.loss);
  for (const Metric& m : metrics_) {
    line += "  " + m.name + " " + m.text;
    if (m.step != p.step) line += " (step " + std::to_string(m.step) + ")";
  }
  char tail[96];
  if (p.hasInputs) {  // a loss of no inputs has no throughput
    std::snprintf(tail, sizeof tail, "  %.0f %s/s", p.rate, p.examples ? "examples" : "tokens");
    line += tail;
  }
  if (p.eta >= 0) {
    std::snprintf(tail, sizeof tail, "  ETA %.0fs", p.eta);
    line += tail;
  }
  static const bool tty = isatty(2);
  if (tty) {
    std::cerr << "\r\033[K" << line << std::flush;
    shown_ = true;
  } else {
    int64_t every = p.total > 0 ? std::max<int64_t>(1, p.total / 10) : 10;
    if (p.done % every == 0 || p.done == p.total || stepsRun_ == 1) std::cerr << line << "\n";
  }
}

void Progress::flushLogRecord() {
  if (!logRecord_) return;
  log_ << logRecord_->dump() << "\n";
  log_.flush();
  logRecord_.reset();
}

void Progress::lineMetric(const std::string& name, const std::string& text) {
  const int64_t step = loops_.empty() ? 0 : loops_.back().i;
  auto it = std::find_if(metrics_.begin(), metrics_.end(), [&](const Metric& m) { return m.name == name; });
  if (it == metrics_.end()) metrics_.push_back({name, text, step});
  else *it = {name, text, step};
}

void Progress::metric(const std::string& name, const backend::Tensor& v) {
  if (rank_ != 0) return;
  std::string text = v.dtype() == ir::DType::F32 ? backend::formatF32((float)v.item()) : std::to_string((int64_t)v.item());
  lineMetric(name, text);
  if (logRecord_) {
    if (v.dtype() == ir::DType::F32) (*logRecord_)[name] = std::strtod(text.c_str(), nullptr);
    else (*logRecord_)[name] = (int64_t)v.item();
  }
}

double MoeLayerStats::tokensMin() const { return tokens.empty() ? 0 : *std::min_element(tokens.begin(), tokens.end()); }
double MoeLayerStats::tokensMax() const { return tokens.empty() ? 0 : *std::max_element(tokens.begin(), tokens.end()); }
double MoeLayerStats::tokensMean() const {
  double s = 0;
  for (double t : tokens) s += t;
  return tokens.empty() ? 0 : s / (double)tokens.size();
}

std::vector<MoeLayerStats> moeLayers(const backend::Tensor& v) {
  const ir::Shape& sh = v.shape();
  const int64_t k = sh.back(), layers = sh.size() == 2 ? sh[0] : 1, e = k - kMoeStats;
  // Each number as its f32 prints (shortest digits), so the log and the
  // trace show what `print` would.
  auto at = [&](int64_t i) { return std::strtod(backend::formatF32((float)v.at(i)).c_str(), nullptr); };
  std::vector<MoeLayerStats> out;
  for (int64_t l = 0; l < layers; ++l) {
    MoeLayerStats s;
    for (int64_t j = 0; j < e; ++j) s.tokens.push_back(at(l * k + j));
    s.dropped = at(l * k + e);
    s.overload = at(l * k + e + 1);
    s.entropy = at(l * k + e + 2);
    s.aux = at(l * k + e + 3);
    out.push_back(std::move(s));
  }
  return out;
}

void Progress::moe(const std::string& name, const std::vector<MoeLayerStats>& layers) {
  if (rank_ != 0 || layers.empty()) return;
  // A JSON number: an integer when the value is one (token counts), else
  // the double of the f32's shortest digits.
  auto num = [](double x) -> nlohmann::ordered_json {
    if (x == std::floor(x) && std::fabs(x) < 9e15) return (int64_t)x;
    return x;
  };
  if (logRecord_) {
    nlohmann::ordered_json all = nlohmann::ordered_json::array();
    for (size_t l = 0; l < layers.size(); ++l) {
      const MoeLayerStats& s = layers[l];
      nlohmann::ordered_json o = {{"layer", (int64_t)l}};
      if (s.tokens.size() <= kMoeTokensListed) {
        nlohmann::ordered_json t = nlohmann::ordered_json::array();
        for (double x : s.tokens) t.push_back(num(x));
        o["tokens"] = t;
      } else {
        o["tokens_min"] = num(s.tokensMin());
        o["tokens_mean"] = num(std::strtod(backend::formatF32((float)s.tokensMean()).c_str(), nullptr));
        o["tokens_max"] = num(s.tokensMax());
      }
      o["dropped"] = num(s.dropped);
      o["overload"] = num(s.overload);
      o["entropy"] = num(s.entropy);
      o["aux"] = num(s.aux);
      all.push_back(std::move(o));
    }
    (*logRecord_)[name] = std::move(all);
  }
  double dropped = 0, overload = 0;
  for (const MoeLayerStats& s : layers) {
    dropped += s.dropped / (double)layers.size();
    overload = std::max(overload, s.overload);
  }
  char text[64];
  std::snprintf(text, sizeof text, "drop %.1f%% over %.2f", 100.0 * dropped, overload);
  lineMetric(name, text);
}

void Progress::clear() {
  if (shown_) {
    std::cerr << "\r\033[K" << std::flush;
    shown_ = false;
  }
}

}  // namespace gsl::runtime
