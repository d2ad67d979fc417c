// runtime/TraceFile and support/Trace.h: recording scopes, the events of a
// rank as trace-event JSON, the path check and the atomic write.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/TraceFile.h"
#include "runtime/TraceSummary.h"

using namespace gsl;
namespace fs = std::filesystem;

TEST_CASE("trace scopes record only while a recorder is current") {
  trace::Recorder rec;
  { trace::Scope off("function", "f"); CHECK(!off); }
  trace::current = &rec;
  {
    trace::Scope outer("function", "step");
    CHECK(outer);
    outer.arg("line", (int64_t)7);
    trace::Scope inner("collective", "all_reduce");
    inner.arg("axes", std::vector<std::string>{"data"});
  }
  trace::record("wait", "wait all_reduce", 100, 250);
  trace::current = nullptr;
  REQUIRE(rec.events.size() == 3);
  CHECK(rec.events[0].name == "all_reduce");  // in the order the scopes ended
  CHECK(rec.events[1].name == "step");
  CHECK(rec.events[1].startNs <= rec.events[0].startNs);
  CHECK(rec.events[0].startNs + rec.events[0].durNs <= rec.events[1].startNs + rec.events[1].durNs);
  CHECK(rec.events[2].durNs == 150);

  auto j = nlohmann::json::parse(runtime::rankTraceEvents(3, rec, 0));
  REQUIRE(j.size() == 6);  // 3 metadata + 3 complete events
  CHECK(j[0]["ph"] == "M");
  CHECK(j[0]["args"]["name"] == "rank 3");
  const auto& step = j[4];
  CHECK(step["ph"] == "X");
  CHECK(step["cat"] == "function");
  CHECK(step["pid"] == 3);
  CHECK(step["tid"] == 0);
  CHECK(step["args"]["line"] == 7);
  CHECK(j[3]["args"]["axes"] == nlohmann::json::array({"data"}));
  CHECK(j[5]["ts"].get<double>() == doctest::Approx(0.1));  // microseconds
  CHECK(j[5]["dur"].get<double>() == doctest::Approx(0.15));
}

TEST_CASE("trace file: path check and atomic replacement") {
  const fs::path dir = fs::temp_directory_path() / ("gsl_trace_unit_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  CHECK(runtime::traceFileProblem((dir / "t.json").string()) == "");
  CHECK(runtime::traceFileProblem((dir / "missing" / "t.json").string()) ==
        "directory '" + (dir / "missing").string() + "' does not exist");
  CHECK(runtime::traceFileProblem(dir.string()) == "'" + dir.string() + "' is a directory");

  const std::string path = (dir / "t.json").string();
  { std::ofstream(path) << "old"; }
  trace::Recorder r0, r1;
  trace::record("x", "y", 0, 0);  // no recorder: ignored
  r1.events.push_back({"compile", "main.0", 5000, 2000, {}});
  runtime::writeTraceFile(path, {runtime::rankTraceEvents(0, r0, 0), runtime::rankTraceEvents(1, r1, 0)});
  std::ifstream f(path);
  auto doc = nlohmann::json::parse(f);
  CHECK(doc["displayTimeUnit"] == "ms");
  CHECK(doc["traceEvents"].size() == 7);
  CHECK(doc["traceEvents"][6]["name"] == "main.0");
  CHECK(doc["traceEvents"][6]["dur"].get<double>() == doctest::Approx(2.0));
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
  CHECK(files == 1);  // no temporary file left
  fs::remove_all(dir);
}

TEST_CASE("compile time report: rows by category, summed, the rest as other, kernel counts") {
  trace::Recorder r;
  const int64_t ms = 1000000;
  // As a compile of two rank programs records them (nested events first).
  r.events.push_back({"pass", "verify", 0, 1 * ms, {}});
  r.events.push_back({"frontend", "front end", 0, 10 * ms, {}});
  r.events.push_back({"rank pass", "partition", 0, 2 * ms, {}});
  r.events.push_back({"jit", "optimise", 0, 30 * ms, {}});
  r.events.push_back({"compile", "f", 0, 40 * ms, {{"ops", int64_t(7)}, {"kernels", int64_t(2)}, {"kernel_calls", int64_t(3)}}});
  r.events.push_back({"rank pass", "partition", 0, 4 * ms, {}});
  r.events.push_back({"jit", "optimise", 0, 50 * ms, {}});
  r.events.push_back({"compile", "g", 0, 60 * ms, {{"ops", int64_t(5)}, {"kernels", int64_t(1)}, {"kernel_calls", int64_t(1)}, {"source", std::string("llvm")}}});
  const std::string s = runtime::compileTimeReport(r, 200 * ms);
  std::istringstream in(s);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  REQUIRE(lines.size() == 9);
  CHECK(lines[2] == "  front end                        0.0100    5.0%      1");
  CHECK(lines[3] == "  pass verify                      0.0010    0.5%      1");
  CHECK(lines[4] == "  rank pass partition              0.0060    3.0%      2");
  CHECK(lines[5] == "  jit optimise                     0.0800   40.0%      2");
  CHECK(lines[6] == "  other                            0.1030   51.5%      0");  // 200 - 10 - 1 - 6 - 80 ms
  CHECK(lines[7] == "  total                            0.2000  100.0%");
  CHECK(lines[8] == "kernels: 2 rank programs compiled, 12 ops, 3 kernel functions, 4 kernel calls");
}

TEST_CASE("trace summary: known events give known tables") {
  const fs::path dir = fs::temp_directory_path() / ("gsl_trace_summary_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "t.json").string();
  // Two ranks each call f (line 7) for 4 ms; rank 0 compiles f in its
  // first millisecond, so both calls overlap that compile for 1 ms. Their
  // all_reduces of 1 MB take 1.2 ms (0.5 ms of it waiting) and 0.4 ms.
  const int64_t ms = 1000000;
  const std::vector<std::pair<std::string, trace::Arg>> ar = {
      {"bytes", (int64_t)1000000}, {"bytes_sent", (int64_t)1000000}, {"mesh", std::string("m")},
      {"axes", std::vector<std::string>{"data"}}};
  trace::Recorder r0, r1;
  r0.events = {{"compile", "f", 0, ms, {}},
               {"wait", "wait all_reduce", 2 * ms, ms / 2, {}},
               {"collective", "all_reduce", 2 * ms, 12 * ms / 10, ar},
               {"function", "f", 0, 4 * ms, {{"line", (int64_t)7}}}};
  r1.events = {{"collective", "all_reduce", 26 * ms / 10, 4 * ms / 10, ar},
               {"function", "f", 0, 4 * ms, {{"line", (int64_t)7}}}};
  runtime::writeTraceFile(path, {runtime::rankTraceEvents(0, r0, 0), runtime::rankTraceEvents(1, r1, 0)});
  std::ostringstream out, err;
  REQUIRE(runtime::traceSummary(path, {}, out, err) == 0);
  CHECK(err.str() == "");
  const std::string s = out.str();
  INFO(s);
  CHECK(s.find("2 ranks, 6 events, wall 4.000 ms") != std::string::npos);
  CHECK(s.find("  f       7     2    8.000      2.000  6.000       3.000 100.0%\n") != std::string::npos);
  CHECK(s.find("  all_reduce m    data     2    1.600   0.500   0.800 2000000 2000000 1.818  20.0%\n") !=
        std::string::npos);
  CHECK(s.find("     0        4.000      1.000          1.200     1   0.500          12.5%\n") != std::string::npos);
  CHECK(s.find("     1        4.000      1.000          0.400     0   0.000           0.0%\n") != std::string::npos);

  std::ostringstream byRank;
  REQUIRE(runtime::traceSummary(path, {true}, byRank, err) == 0);
  CHECK(byRank.str().find("  1    f       7     1    4.000      1.000  3.000       3.000 100.0%\n") !=
        std::string::npos);

  std::ostringstream none, bad;
  CHECK(runtime::traceSummary((dir / "no.json").string(), {}, none, bad) == 1);
  CHECK(none.str() == "");
  CHECK(bad.str() == "gsl: error: cannot read '" + (dir / "no.json").string() + "': No such file or directory\n");
  fs::remove_all(dir);
}
