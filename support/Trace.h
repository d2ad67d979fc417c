// Timed events of one rank for `gsl run --trace` (the file is written by
// runtime/TraceFile). Every layer records into the calling thread's recorder,
// `trace::current`, which is null unless tracing is on: a hook costs one
// branch when it is off.
//
//   trace::Scope s("function", f.name);   // an event from here to the end of the scope
//   if (s) s.arg("bytes", n);             // arguments, only computed when tracing
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace gsl::trace {

using Arg = std::variant<int64_t, std::string, std::vector<std::string>>;

// A complete event: [startNs, startNs + durNs) on the steady clock; or,
// with `counter`, a counter event ("ph": "C") at startNs whose series are
// `values` (MoE telemetry, runtime/HostRunner.cpp).
struct Event {
  std::string cat;   // "compile", "function", "collective", "wait"; counters: "moe"
  std::string name;
  int64_t startNs = 0, durNs = 0;
  std::vector<std::pair<std::string, Arg>> args;
  bool counter = false;
  std::vector<std::pair<std::string, double>> values;  // a counter's series, in order
};

// One rank's events, in the order their scopes ended. Used by one thread.
struct Recorder {
  std::vector<Event> events;
};

// The calling thread's recorder (set by the run for each rank thread), or null.
inline thread_local Recorder* current = nullptr;

inline int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Records an event lasting from its construction to its destruction into
// the current recorder, if any (also when the scope ends by an exception).
class Scope {
 public:
  Scope(std::string_view cat, std::string_view name) : rec_(current) {
    if (!rec_) return;
    ev_.cat = cat;
    ev_.name = name;
    ev_.startNs = nowNs();
  }
  ~Scope() {
    if (!rec_) return;
    ev_.durNs = nowNs() - ev_.startNs;
    rec_->events.push_back(std::move(ev_));
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

  explicit operator bool() const { return rec_ != nullptr; }
  void arg(std::string key, Arg value) {
    if (rec_) ev_.args.emplace_back(std::move(key), std::move(value));
  }

 private:
  Recorder* rec_;
  Event ev_;
};

// Records an already-measured interval (for example a wait that ended
// inside a lock) into the current recorder, if any.
inline void record(std::string_view cat, std::string_view name, int64_t startNs, int64_t endNs) {
  if (!current) return;
  Event e;
  e.cat = cat;
  e.name = name;
  e.startNs = startNs;
  e.durNs = endNs - startNs;
  current->events.push_back(std::move(e));
}

// Records a counter event (the values of some series now) into the current
// recorder, if any.
inline void counter(std::string_view cat, std::string_view name, std::vector<std::pair<std::string, double>> values) {
  if (!current) return;
  Event e;
  e.cat = cat;
  e.name = name;
  e.startNs = nowNs();
  e.counter = true;
  e.values = std::move(values);
  current->events.push_back(std::move(e));
}

}  // namespace gsl::trace
