#include "runtime/TraceFile.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "backend/Communicator.h"

namespace gsl::runtime {

namespace fs = std::filesystem;
using nlohmann::json;

std::string traceFileProblem(const std::string& path) {
  if (path.empty()) return "the trace file name is empty";
  std::error_code ec;
  const fs::path p(path);
  if (fs::is_directory(p, ec)) return "'" + path + "' is a directory";
  const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  if (!fs::is_directory(dir, ec)) return "directory '" + dir.string() + "' does not exist";
  if (access(dir.c_str(), W_OK) != 0) return "directory '" + dir.string() + "' is not writable";
  return "";
}

std::string compileTimeReport(const trace::Recorder& rec, int64_t totalNs) {
  struct Row {
    std::string label;
    int64_t ns = 0;
    int64_t count = 0;
  };
  static const char* const kCats[] = {"frontend", "pass", "rank pass", "jit"};
  std::vector<Row> rows;
  auto rowFor = [&](const std::string& label) -> Row& {
    for (Row& r : rows)
      if (r.label == label) return r;
    rows.push_back({label, 0, 0});
    return rows.back();
  };
  // Rows in category order, each category's names as they first appear.
  for (const char* cat : kCats)
    for (const trace::Event& e : rec.events)
      if (e.cat == cat) {
        Row& r = rowFor(e.cat == "frontend" ? e.name : e.cat + " " + e.name);
        r.ns += std::max<int64_t>(e.durNs, 0);
        r.count++;
      }
  int64_t programs = 0, ops = 0, kernels = 0, calls = 0;
  for (const trace::Event& e : rec.events) {
    if (e.cat != "compile") continue;
    programs++;
    for (const auto& [k, v] : e.args) {
      const int64_t* n = std::get_if<int64_t>(&v);
      if (!n) continue;
      if (k == "ops") ops += *n;
      if (k == "kernels") kernels += *n;
      if (k == "kernel_calls") calls += *n;
    }
  }
  int64_t leaves = 0;
  for (const Row& r : rows) leaves += r.ns;
  rows.push_back({"other", std::max<int64_t>(totalNs - leaves, 0), 0});

  std::string out = "compile time (wall seconds; % of the total; count: times the phase ran)\n";
  char line[160];
  std::snprintf(line, sizeof line, "  %-28s %10s %7s %6s\n", "phase", "seconds", "%", "count");
  out += line;
  const double total = (double)std::max<int64_t>(totalNs, 1);
  for (const Row& r : rows) {
    std::snprintf(line, sizeof line, "  %-28s %10.4f %6.1f%% %6lld\n", r.label.c_str(), (double)r.ns * 1e-9,
                  100.0 * (double)r.ns / total, (long long)r.count);
    out += line;
  }
  std::snprintf(line, sizeof line, "  %-28s %10.4f %6.1f%%\n", "total", (double)totalNs * 1e-9, 100.0);
  out += line;
  std::snprintf(line, sizeof line,
                "kernels: %lld rank programs compiled, %lld ops, %lld kernel functions, %lld kernel calls\n",
                (long long)programs, (long long)ops, (long long)kernels, (long long)calls);
  out += line;
  return out;
}

std::string rankTraceEvents(int rank, const trace::Recorder& rec, int64_t originNs,
                            const std::vector<trace::Recorder>& ahead) {
  json events = json::array();
  const std::string label = "rank " + std::to_string(rank);
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"ts", 0}, {"pid", rank}, {"tid", 0},
                    {"args", {{"name", label}}}});
  events.push_back({{"name", "process_sort_index"}, {"ph", "M"}, {"ts", 0}, {"pid", rank}, {"tid", 0},
                    {"args", {{"sort_index", rank}}}});
  auto track = [&](const trace::Recorder& r, int tid, const std::string& name) {
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"ts", 0}, {"pid", rank}, {"tid", tid},
                      {"args", {{"name", name}}}});
    for (const trace::Event& e : r.events) {
      if (e.counter) {  // "ph": "C": one series per value (Perfetto: a track "name key" each)
        json values = json::object();
        for (const auto& [k, v] : e.values) values[k] = v;
        events.push_back({{"name", e.name},
                          {"cat", e.cat},
                          {"ph", "C"},
                          {"ts", (double)(e.startNs - originNs) / 1000.0},
                          {"pid", rank},
                          {"tid", tid},
                          {"args", std::move(values)}});
        continue;
      }
      json args = json::object();
      for (const auto& [k, v] : e.args) std::visit([&, &k = k](const auto& x) { args[k] = x; }, v);
      json ev = {{"name", e.name},
                 {"cat", e.cat},
                 {"ph", "X"},
                 {"ts", (double)(e.startNs - originNs) / 1000.0},
                 {"dur", (double)std::max<int64_t>(e.durNs, 0) / 1000.0},
                 {"pid", rank},
                 {"tid", tid}};
      if (!args.empty()) ev["args"] = std::move(args);
      events.push_back(std::move(ev));
    }
  };
  track(rec, 0, label);
  for (size_t t = 0; t < ahead.size(); ++t)
    if (!ahead[t].events.empty()) track(ahead[t], (int)t + 1, "compile ahead " + std::to_string(t + 1));
  return events.dump();
}

void writeTraceFile(const std::string& path, const std::vector<std::string>& rankEvents) {
  json all = json::array();
  for (const std::string& r : rankEvents)
    for (auto& e : json::parse(r)) all.push_back(std::move(e));
  const json doc = {{"traceEvents", std::move(all)}, {"displayTimeUnit", "ms"}};
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream f(tmp, std::ios::out | std::ios::trunc);
    if (f) f << doc.dump() << "\n";
    if (!f || !f.flush()) {
      std::remove(tmp.c_str());
      throw std::runtime_error(path + ": cannot write the trace file");
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw std::runtime_error(path + ": cannot write the trace file: " + ec.message());
  }
}

std::vector<std::string> gatherTraceEvents(backend::Communicator& comm, const std::string& mine) {
  const int n = comm.size();
  std::vector<int> world(n);
  for (int i = 0; i < n; ++i) world[i] = i;
  // Lengths first, then every rank's array padded to the longest.
  uint64_t len = mine.size();
  std::vector<uint64_t> lens(n);
  comm.allGather(world, &len, sizeof len, lens.data());
  uint64_t longest = 0;
  for (uint64_t l : lens) longest = std::max(longest, l);
  std::string padded = mine;
  padded.resize(longest, ' ');
  std::string all(longest * n, ' ');
  comm.allGather(world, padded.data(), longest, all.data());
  if (comm.rank() != 0) return {};
  std::vector<std::string> out;
  for (int r = 0; r < n; ++r) out.push_back(all.substr(r * longest, lens[r]));
  return out;
}

}  // namespace gsl::runtime
