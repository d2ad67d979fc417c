#include "runtime/TraceSummary.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/Loop.h"

namespace gsl::runtime {

namespace {

using nlohmann::json;

// A complete event ("ph": "X") of the file; times in microseconds.
struct Event {
  std::string cat, name;
  double ts = 0, dur = 0;
  int64_t pid = 0, tid = 0;
  const json* args = nullptr;  // its "args" object, or null
  double inner = 0;            // a function call's compile time (compileOverlap), a collective's waits (nest)
};

// A malformed file: the message after "gsl: error: ".
struct BadFile : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string quoted(const std::string& path) { return "'" + path + "'"; }

json readJson(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw BadFile("cannot read " + quoted(path) + ": it is a directory");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw BadFile("cannot read " + quoted(path) + ": " + std::strerror(errno));
  std::stringstream text;
  text << f.rdbuf();
  try {
    return json::parse(text.str());
  } catch (const json::parse_error& e) {
    // "[json.exception.parse_error.101] parse error at line 1, ...": the part after the tag.
    std::string what = e.what();
    const size_t tag = what.find("] ");
    throw BadFile(quoted(path) + " is not JSON: " + (tag == std::string::npos ? what : what.substr(tag + 2)));
  }
}

// The complete events of a trace document (other phases, the metadata,
// are skipped).
std::vector<Event> completeEvents(const json& doc, const std::string& path) {
  if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array())
    throw BadFile(quoted(path) + " is not a trace of gsl run --trace: it has no \"traceEvents\" array");
  std::vector<Event> out;
  const json& all = doc["traceEvents"];
  for (size_t i = 0; i < all.size(); ++i) {
    const json& e = all[i];
    auto bad = [&](const std::string& what) {
      return BadFile(quoted(path) + ": trace event " + std::to_string(i) + " " + what);
    };
    if (!e.is_object()) throw bad("is not an object");
    if (!e.contains("ph") || !e["ph"].is_string()) throw bad("has no \"ph\" string");
    if (e["ph"] != "X") continue;
    for (const char* k : {"name", "cat"})
      if (!e.contains(k) || !e[k].is_string()) throw bad("has no \"" + std::string(k) + "\" string");
    for (const char* k : {"ts", "dur"})
      if (!e.contains(k) || !e[k].is_number()) throw bad("has no \"" + std::string(k) + "\" number");
    for (const char* k : {"pid", "tid"})
      if (!e.contains(k) || !e[k].is_number_integer()) throw bad("has no \"" + std::string(k) + "\" integer");
    Event ev;
    ev.cat = e["cat"].get<std::string>();
    ev.name = e["name"].get<std::string>();
    ev.ts = e["ts"].get<double>();
    ev.dur = e["dur"].get<double>();
    if (ev.dur < 0) throw bad("has a negative \"dur\"");
    ev.pid = e["pid"].get<int64_t>();
    ev.tid = e["tid"].get<int64_t>();
    if (e.contains("args") && e["args"].is_object()) ev.args = &e["args"];
    out.push_back(std::move(ev));
  }
  return out;
}

// A function call's compile time: how long it overlapped a compile of its
// function, on its own thread (the first call compiles) or on another
// (a compile-ahead thread, or another rank's, that the call waited for).
void compileOverlap(std::vector<Event>& events) {
  std::map<std::string, std::vector<std::pair<double, double>>> compiles;  // name -> merged intervals
  for (const Event& e : events)
    if (e.cat == "compile") compiles[e.name].push_back({e.ts, e.ts + e.dur});
  for (auto& [name, iv] : compiles) {
    std::sort(iv.begin(), iv.end());
    std::vector<std::pair<double, double>> merged;
    for (const auto& i : iv)
      if (!merged.empty() && i.first <= merged.back().second) merged.back().second = std::max(merged.back().second, i.second);
      else merged.push_back(i);
    iv = std::move(merged);
  }
  for (Event& e : events) {
    if (e.cat != "function") continue;
    auto it = compiles.find(e.name);
    if (it == compiles.end()) continue;
    for (const auto& [from, to] : it->second) e.inner += std::max(0.0, std::min(to, e.ts + e.dur) - std::max(from, e.ts));
    e.inner = std::min(e.inner, e.dur);
  }
}

// The events nest by time on each thread (docs/trace.md): a wait inside a
// collective. Adds each wait's time to the innermost collective holding it.
void nest(std::vector<Event>& events) {
  std::map<std::pair<int64_t, int64_t>, std::vector<Event*>> threads;
  for (Event& e : events) threads[{e.pid, e.tid}].push_back(&e);
  constexpr double kSlack = 1e-6;  // µs: ts and dur are rounded separately
  for (auto& [thread, evs] : threads) {
    std::stable_sort(evs.begin(), evs.end(), [](const Event* a, const Event* b) {
      return a->ts != b->ts ? a->ts < b->ts : a->dur > b->dur;  // an outer event before its first inner one
    });
    std::vector<Event*> open;
    for (Event* e : evs) {
      while (!open.empty() && e->ts + e->dur > open.back()->ts + open.back()->dur + kSlack) open.pop_back();
      if (e->cat == "wait")
        for (auto it = open.rbegin(); it != open.rend(); ++it)
          if ((*it)->cat == "collective") {
            (*it)->inner += e->dur;
            break;
          }
      open.push_back(e);
    }
  }
}

std::string argString(const Event& e, const char* key) {
  if (!e.args || !e.args->contains(key)) return "";
  const json& v = (*e.args)[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array()) {
    std::string s;
    for (const json& x : v) s += (s.empty() ? "" : ",") + (x.is_string() ? x.get<std::string>() : x.dump());
    return s;
  }
  return v.dump();
}

// The integer argument `key`, or -1 when the event has none.
int64_t argInt(const Event& e, const char* key) {
  if (!e.args || !e.args->contains(key) || !(*e.args)[key].is_number_integer()) return -1;
  return (*e.args)[key].get<int64_t>();
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}
std::string ms(double us) { return fmt("%.3f", us / 1000.0); }
std::string count(int64_t n) { return std::to_string(n); }

// Rows of one table: the events of a key summed.
struct Sum {
  int64_t calls = 0;
  double total = 0, inner = 0;  // µs
  int64_t bytes = 0, sent = 0;
  bool hasBytes = false;
  std::map<std::string, int64_t> sources;  // compile: "source" argument -> count
};

// Group key: the rank (-1 summed over the ranks), then the table's key columns.
using Key = std::pair<int64_t, std::vector<std::string>>;

// The keys by rank, then by total time (largest first), then by key.
std::vector<const std::pair<const Key, Sum>*> sorted(const std::map<Key, Sum>& groups) {
  std::vector<const std::pair<const Key, Sum>*> rows;
  for (const auto& g : groups) rows.push_back(&g);
  std::stable_sort(rows.begin(), rows.end(), [](auto* a, auto* b) {
    if (a->first.first != b->first.first) return a->first.first < b->first.first;
    return a->second.total > b->second.total;
  });
  return rows;
}

// A table of text columns (left-aligned, the first `textColumns`) and
// numbers (right-aligned), indented by two spaces.
struct Table {
  Table(std::vector<std::string> h, size_t text) : head(std::move(h)), textColumns(text) {}
  std::vector<std::string> head;
  size_t textColumns;
  std::vector<std::vector<std::string>> rows;

  void print(std::ostream& os) const {
    std::vector<size_t> width(head.size());
    for (size_t c = 0; c < head.size(); ++c) {
      width[c] = head[c].size();
      for (const auto& r : rows) width[c] = std::max(width[c], r[c].size());
    }
    auto line = [&](const std::vector<std::string>& r) {
      std::string s = " ";
      for (size_t c = 0; c < r.size(); ++c) {
        const std::string pad(width[c] - r[c].size(), ' ');
        s += " " + (c < textColumns ? r[c] + pad : pad + r[c]);
      }
      while (!s.empty() && s.back() == ' ') s.pop_back();
      os << s << "\n";
    };
    line(head);
    for (const auto& r : rows) line(r);
  }
};

class Summary {
 public:
  Summary(std::vector<Event> events, bool byRank) : events_(std::move(events)), byRank_(byRank) {
    nest(events_);
    compileOverlap(events_);
    for (const Event& e : events_) {
      wall_ = std::max(wall_, e.ts + e.dur);
      ranks_.insert(e.pid);
    }
  }

  void print(std::ostream& os, const std::string& path) {
    const size_t n = ranks_.size();
    os << "trace " << path << ": " << n << (n == 1 ? " rank, " : " ranks, ") << events_.size()
       << " events, wall " << ms(wall_) << " ms (from the start of the run to the end of its last event)\n";
    if (byRank_)
      os << "times per rank; % wall: of the wall time\n";
    else
      os << "times summed over the ranks (--by-rank: per rank); % wall: of the ranks' time, " << n << " x the wall\n";
    functions(os);
    collectives(os);
    compiles(os);
    others(os);
    ranks(os);
    pipelines(os);
  }

 private:
  // The rank of a row: -1 unless --by-rank.
  int64_t rankOf(const Event& e) const { return byRank_ ? e.pid : -1; }

  std::string share(double us) const {
    const double whole = wall_ * (byRank_ ? 1.0 : (double)ranks_.size());
    return whole > 0 ? fmt("%.1f%%", 100.0 * us / whole) : "-";
  }

  // The events `pick` takes, grouped by `key` (and the rank under
  // --by-rank): their count, time and inner time; `add` sums the rest.
  template <class PickFn, class KeyFn, class AddFn>
  std::map<Key, Sum> group(PickFn pick, KeyFn key, AddFn add) const {
    std::map<Key, Sum> groups;
    for (const Event& e : events_) {
      if (!pick(e)) continue;
      Sum& s = groups[{rankOf(e), key(e)}];
      s.calls++;
      s.total += e.dur;
      s.inner += e.inner;
      add(e, s);
    }
    return groups;
  }

  // The head of a table: "rank" first under --by-rank.
  std::vector<std::string> head(std::vector<std::string> cols) const {
    if (byRank_) cols.insert(cols.begin(), "rank");
    return cols;
  }
  std::vector<std::string> row(const Key& k, std::vector<std::string> cols) const {
    if (byRank_) cols.insert(cols.begin(), std::to_string(k.first));
    return cols;
  }

  static bool is(const Event& e, const char* cat) { return e.cat == cat; }

  void functions(std::ostream& os) const {
    auto groups = group(
        [](const Event& e) { return is(e, "function"); },
        [](const Event& e) {
          const int64_t line = argInt(e, "line");
          return std::vector<std::string>{e.name, line >= 0 ? std::to_string(line) : "-"};
        },
        [](const Event&, Sum&) {});
    os << "\ntensor functions (the calls from fn main; compile: the part of a call that overlapped a compile of its "
          "function, on any thread; run: the rest)\n";
    Table t{head({"name", "line", "calls", "total ms", "compile ms", "run ms", "mean run ms", "% wall"}),
            byRank_ ? 2u : 1u};
    for (auto* g : sorted(groups)) {
      const Sum& s = g->second;
      const double run = std::max(0.0, s.total - s.inner);  // not -0.000 from rounding
      t.rows.push_back(row(g->first, {g->first.second[0], g->first.second[1], count(s.calls), ms(s.total),
                                      ms(s.inner), ms(run), ms(run / (double)s.calls), share(s.total)}));
    }
    t.print(os);
  }

  void collectives(std::ostream& os) const {
    auto groups = group(
        [](const Event& e) { return is(e, "collective"); },
        [](const Event& e) { return std::vector<std::string>{e.name, argString(e, "mesh"), argString(e, "axes")}; },
        [](const Event& e, Sum& s) {
          s.bytes += std::max<int64_t>(argInt(e, "bytes"), 0);
          s.sent += std::max<int64_t>(argInt(e, "bytes_sent"), 0);
        });
    os << "\ncollectives (bytes: the operands' size; sent: what the ranks sent; GB/s: bytes over the time outside "
          "the waits)\n";
    Table t{head({"name", "mesh", "axes", "calls", "total ms", "wait ms", "mean ms", "bytes", "sent", "GB/s",
                  "% wall"}),
            byRank_ ? 4u : 3u};
    for (auto* g : sorted(groups)) {
      const Sum& s = g->second;
      const double moving = s.total - s.inner;  // µs
      const auto& k = g->first.second;
      t.rows.push_back(row(g->first, {k[0], k[1].empty() ? "-" : k[1], k[2].empty() ? "-" : k[2], count(s.calls),
                                      ms(s.total), ms(s.inner), ms(s.total / (double)s.calls), count(s.bytes),
                                      count(s.sent), moving > 0 ? fmt("%.3f", (double)s.bytes / (moving * 1e3)) : "-",
                                      share(s.total)}));
    }
    t.print(os);
  }

  void compiles(std::ostream& os) const {
    auto groups = group(
        [](const Event& e) { return is(e, "compile"); }, [](const Event& e) { return std::vector<std::string>{e.name}; },
        [](const Event& e, Sum& s) {
          const std::string src = argString(e, "source");
          s.sources[src.empty() ? "-" : src]++;
        });
    os << "\ncompiles (every thread, compile-ahead threads included; source: llvm compiled, cache loaded from "
          "disk, linked already in the process)\n";
    Table t{head({"name", "compiles", "total ms", "mean ms", "llvm", "cache", "linked"}), byRank_ ? 2u : 1u};
    for (auto* g : sorted(groups)) {
      const Sum& s = g->second;
      auto source = [&](const char* k) {
        auto it = s.sources.find(k);
        return count(it == s.sources.end() ? 0 : it->second);
      };
      t.rows.push_back(row(g->first, {g->first.second[0], count(s.calls), ms(s.total), ms(s.total / (double)s.calls),
                                      source("llvm"), source("cache"), source("linked")}));
    }
    t.print(os);

    auto phases = group(
        [](const Event& e) { return is(e, "jit") || is(e, "rank pass"); },
        [](const Event& e) { return std::vector<std::string>{e.cat + " " + e.name}; }, [](const Event&, Sum&) {});
    os << "\ncompile phases (jit: inside the compiles; rank pass: building a per-rank program)\n";
    Table p{head({"phase", "count", "total ms", "mean ms"}), byRank_ ? 2u : 1u};
    for (auto* g : sorted(phases)) {
      const Sum& s = g->second;
      p.rows.push_back(row(g->first, {g->first.second[0], count(s.calls), ms(s.total), ms(s.total / (double)s.calls)}));
    }
    p.print(os);
  }

  // Events of the other categories (data reads, and any this reader does not know).
  void others(std::ostream& os) const {
    static const std::set<std::string> known = {"function", "collective", "wait", "compile", "jit", "rank pass"};
    auto groups = group(
        [](const Event& e) { return !known.count(e.cat); },
        [](const Event& e) { return std::vector<std::string>{e.cat, e.name}; },
        [](const Event& e, Sum& s) {
          const int64_t b = argInt(e, "bytes");
          if (b >= 0) {
            s.bytes += b;
            s.hasBytes = true;
          }
        });
    if (groups.empty()) return;
    os << "\nother events\n";
    Table t{head({"cat", "name", "calls", "total ms", "mean ms", "bytes", "% wall"}), byRank_ ? 3u : 2u};
    for (auto* g : sorted(groups)) {
      const Sum& s = g->second;
      const auto& k = g->first.second;
      t.rows.push_back(row(g->first, {k[0], k[1], count(s.calls), ms(s.total), ms(s.total / (double)s.calls),
                                      s.hasBytes ? count(s.bytes) : "-", share(s.total)}));
    }
    t.print(os);
  }

  // Each rank's own thread (tid 0): its calls and their compile time, its
  // collectives and its waits.
  void ranks(std::ostream& os) const {
    struct RankSum {
      double functions = 0, compile = 0, collectives = 0, wait = 0;
      int64_t waits = 0;
    };
    std::map<int64_t, RankSum> by;
    for (int64_t r : ranks_) by[r];
    for (const Event& e : events_) {
      if (e.tid != 0) continue;
      RankSum& s = by[e.pid];
      if (is(e, "function")) {
        s.functions += e.dur;
        s.compile += e.inner;
      }
      if (is(e, "collective")) s.collectives += e.dur;
      if (is(e, "wait")) {
        s.wait += e.dur;
        s.waits++;
      }
    }
    os << "\nranks (each rank's own thread; compile: its calls' compile time; % wall waiting: of the wall time)\n";
    Table t{{"rank", "functions ms", "compile ms", "collectives ms", "waits", "wait ms", "% wall waiting"}, 0};
    for (const auto& [r, s] : by)
      t.rows.push_back({std::to_string(r), ms(s.functions), ms(s.compile), ms(s.collectives), count(s.waits),
                        ms(s.wait), wall_ > 0 ? fmt("%.1f%%", 100.0 * s.wait / wall_) : "-"});
    t.print(os);
  }

  // The pipeline stages (docs/pipeline.md): each call whose event names its
  // schedule (args pipeline_*: this rank's stage s of S, M microbatches, R
  // rounds; T = M R + S - 1 iterations). Its first T collective_permutes
  // are the forward shifts, one at the start of each iteration; iteration
  // T - 1 ends at the next collective that moves data. The backward
  // pipeline's permutes, k per iteration when they are k T, mark its
  // iterations the same way (in reverse time), the last ending with the
  // last permute. An iteration is the bubble when stage s has no
  // microbatch in it (t - s outside 0 .. M R - 1): its time is idle, as is
  // the time waiting in the other iterations' collectives. Calls that
  // overlapped a compile are left out.
  void pipelines(std::ostream& os) const {
    struct Stage {
      int64_t stage = 0, calls = 0;
      ir::PipelineSchedule schedule;
      double loop = 0, bubble = 0, wait = 0;  // µs
    };
    std::map<std::pair<int64_t, std::string>, Stage> by;  // (rank, function)
    std::map<std::pair<int64_t, int64_t>, std::vector<const Event*>> threads;
    for (const Event& e : events_)
      if (is(e, "collective") || is(e, "wait")) threads[{e.pid, e.tid}].push_back(&e);
    for (auto& [k, evs] : threads)
      std::stable_sort(evs.begin(), evs.end(), [](const Event* a, const Event* b) { return a->ts < b->ts; });
    for (const Event& f : events_) {
      // (A call that compiled, or waited for a compile, is left out.)
      if (!is(f, "function") || argInt(f, "pipeline_stages") < 2 || f.inner > 0) continue;
      const int64_t s = argInt(f, "pipeline_stage");
      ir::PipelineSchedule sch;
      sch.stages = argInt(f, "pipeline_stages");
      sch.microbatches = argInt(f, "pipeline_microbatches");
      sch.rounds = argInt(f, "pipeline_rounds");
      sch.iterations = sch.microbatches * sch.rounds + sch.stages - 1;
      const int64_t T = sch.iterations;
      const double end = f.ts + f.dur;
      std::vector<const Event*> colls, perms, waits;
      auto it = threads.find({f.pid, f.tid});
      if (it == threads.end()) continue;
      for (const Event* e : it->second) {
        if (e->ts < f.ts || e->ts > end) continue;
        if (is(*e, "wait")) waits.push_back(e);
        else if (e->name != "shard_slice" && e->name != "pad_mask") colls.push_back(e);
        if (is(*e, "collective") && e->name == "collective_permute") perms.push_back(e);
      }
      if ((int64_t)perms.size() < T) continue;  // the stages were not split over ranks
      // [from, to) of each iteration, and whether it is the bubble.
      std::vector<std::tuple<double, double, bool>> iters;
      for (int64_t t = 0; t < T; ++t) {
        double to = end;
        if (t + 1 < T) {
          to = perms[t + 1]->ts;
        } else {
          for (const Event* c : colls)
            if (c->ts > perms[t]->ts && c != perms[t]) {
              to = c->ts;
              break;
            }
        }
        iters.emplace_back(perms[t]->ts, to, !sch.busy(s, t));
      }
      const int64_t rest = (int64_t)perms.size() - T;
      if (rest > 0 && rest % T == 0) {
        const int64_t k = rest / T;
        for (int64_t j = 0; j < T; ++j) {
          const Event* first = perms[T + j * k];
          const Event* last = perms[T + j * k + k - 1];
          const double to = j + 1 < T ? perms[T + (j + 1) * k]->ts : last->ts + last->dur;
          const int64_t t = T - 1 - j;
          iters.emplace_back(first->ts, to, !sch.busy(s, t));
        }
      }
      Stage& st = by[{f.pid, f.name}];
      st.stage = s;
      st.schedule = sch;
      st.calls++;
      for (const auto& [from, to, bubble] : iters) {
        st.loop += to - from;
        if (bubble) {
          st.bubble += to - from;
          continue;
        }
        for (const Event* w : waits)
          if (w->ts >= from && w->ts < to) st.wait += w->dur;
      }
    }
    if (by.empty()) return;
    os << "\npipeline stages (each rank's calls of a pipelined function: loop: its pipeline iterations, forward and "
          "backward; bubble: the iterations without a microbatch of its stage; wait: in the others' collectives; "
          "idle: (bubble + wait) / loop; predicted: (S - 1) / (M R + S - 1))\n";
    Table t{{"rank", "function", "stage", "S", "M", "R", "calls", "loop ms", "bubble ms", "wait ms", "idle",
             "predicted"},
            2};
    for (const auto& [k, st] : by) {
      const ir::PipelineSchedule& p = st.schedule;
      t.rows.push_back({std::to_string(k.first), k.second, std::to_string(st.stage), std::to_string(p.stages),
                        std::to_string(p.microbatches), std::to_string(p.rounds), count(st.calls), ms(st.loop),
                        ms(st.bubble), ms(st.wait), st.loop > 0 ? fmt("%.3f", (st.bubble + st.wait) / st.loop) : "-",
                        fmt("%.3f", p.bubble())});
    }
    t.print(os);
  }

  std::vector<Event> events_;
  bool byRank_;
  double wall_ = 0;  // µs
  std::set<int64_t> ranks_;
};

}  // namespace

int traceSummary(const std::string& path, const TraceSummaryOptions& options, std::ostream& out, std::ostream& err) {
  try {
    const json doc = readJson(path);
    Summary s(completeEvents(doc, path), options.byRank);
    std::ostringstream text;
    s.print(text, path);
    out << text.str();
    return 0;
  } catch (const BadFile& e) {
    err << "gsl: error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace gsl::runtime
