// End-to-end numeric tests: every tests/programs/*.gsl (not lib/) is
// compiled, its `fn main` run by the interpreter, and the printed lines
// compared with the program's `# expect: <line>` comments, in order.
//
// Comparison is token by token (whitespace ignored; `[ ] ( ) , :` are
// tokens of their own). A token that is an integer in the expectation
// (`3`, `-2`) must match exactly, so an i32 result is not confused with an
// f32 one. Any other numeric token (`3.0`, `0.09003057`, `1e-05`, `inf`,
// `nan`) matches an f32-formatted number within relative tolerance 1e-5
// (absolute 1e-6 near zero). Every other token must match exactly.
//
// Headers: `# args: -np 4 --seed 3 -D K=5` sets the compile/run options.
// Each program runs in a fresh temporary working directory, so its
// save/load files never touch the source tree.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "frontend/Frontend.h"
#include "passes/Pipeline.h"
#include "runtime/Host.h"

namespace fs = std::filesystem;

namespace {

struct ProgramSpec {
  std::vector<std::string> expect;
  gsl::frontend::Options opts;
  uint64_t seed = 0;
  std::string argError;  // non-empty: the `# args:` header could not be parsed
};

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

ProgramSpec readSpec(const std::string& path) {
  ProgramSpec p;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::string t = trim(line);
    if (t.rfind("# expect:", 0) == 0) {
      std::string rest = t.substr(9);
      if (!rest.empty() && rest[0] == ' ') rest = rest.substr(1);
      p.expect.push_back(rest);
    } else if (t.rfind("# args:", 0) == 0) {
      std::istringstream ss(t.substr(7));
      std::string a;
      while (ss >> a) {
        std::string v;
        if (a == "-np" && ss >> v) {
          p.opts.np = std::stoll(v);
        } else if (a == "--seed" && ss >> v) {
          p.seed = std::stoull(v);
        } else if (a == "-D" && ss >> v && v.find('=') != std::string::npos) {
          p.opts.defines[v.substr(0, v.find('='))] = std::stoll(v.substr(v.find('=') + 1));
        } else {
          p.argError = "unknown or incomplete argument '" + a + "' in '# args:'";
        }
      }
    }
  }
  return p;
}

std::vector<std::string> tokens(const std::string& line) {
  std::vector<std::string> r;
  std::string cur;
  auto flush = [&] {
    if (!cur.empty()) r.push_back(cur);
    cur.clear();
  };
  for (char c : line) {
    if (c == ' ' || c == '\t' || c == '\r') {
      flush();
    } else if (c == '[' || c == ']' || c == '(' || c == ')' || c == ',' || c == ':') {
      flush();
      r.push_back(std::string(1, c));
    } else {
      cur += c;
    }
  }
  flush();
  return r;
}

bool parseNumber(const std::string& s, double& v) {
  if (s.empty()) return false;
  char* end = nullptr;
  v = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && s.find_first_of("xX") == std::string::npos;
}

bool isIntegerToken(const std::string& s) {
  size_t i = (s[0] == '-' || s[0] == '+') ? 1 : 0;
  return i < s.size() && std::all_of(s.begin() + i, s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool tokenMatches(const std::string& want, const std::string& got) {
  double w, g;
  if (!parseNumber(want, w)) return want == got;
  if (isIntegerToken(want)) return want == got;
  if (!parseNumber(got, g) || isIntegerToken(got)) return false;
  if (std::isnan(w)) return std::isnan(g);
  if (std::isinf(w)) return g == w;
  return std::fabs(g - w) <= std::max(1e-6, 1e-5 * std::fabs(w));
}

bool lineMatches(const std::string& want, const std::string& got) {
  auto tw = tokens(want), tg = tokens(got);
  if (tw.size() != tg.size()) return false;
  for (size_t i = 0; i < tw.size(); ++i)
    if (!tokenMatches(tw[i], tg[i])) return false;
  return true;
}

std::vector<std::string> splitLines(const std::string& s) {
  std::vector<std::string> r;
  std::istringstream ss(s);
  std::string line;
  while (std::getline(ss, line)) r.push_back(line);
  return r;
}

// A fresh temporary directory made the working directory for its lifetime.
struct TempCwd {
  fs::path dir, old;
  TempCwd() {
    old = fs::current_path();
    char tmpl[] = "/tmp/gsl_program_test.XXXXXX";
    char* p = mkdtemp(tmpl);
    REQUIRE(p);
    dir = p;
    fs::current_path(dir);
  }
  ~TempCwd() {
    std::error_code ec;
    fs::current_path(old, ec);
    fs::remove_all(dir, ec);
  }
};

std::vector<fs::path> programs() {
  std::vector<fs::path> r;
  for (const auto& e : fs::directory_iterator(fs::path(GSL_SOURCE_DIR) / "tests" / "programs"))
    if (e.is_regular_file() && e.path().extension() == ".gsl") r.push_back(e.path());
  std::sort(r.begin(), r.end());
  return r;
}

void runProgram(const fs::path& path, gsl::runtime::Engine engine) {
  ProgramSpec spec = readSpec(path.string());
  REQUIRE_MESSAGE(spec.argError.empty(), spec.argError);
  REQUIRE_MESSAGE(!spec.expect.empty(), path.filename().string() << " has no '# expect:' lines");
  spec.opts.importPath = {path.parent_path().string(), std::string(GSL_SOURCE_DIR) + "/stdlib"};

  gsl::SourceManager sm;
  gsl::Diagnostics diags(sm);
  auto prog = gsl::frontend::compileFile(path.string(), spec.opts, sm, diags);
  if (!prog) {
    std::ostringstream d;
    diags.print(d);
    FAIL("compiling " << path.filename().string() << " failed:\n" << d.str());
  }
  REQUIRE_MESSAGE(prog->host.hasMain, path.filename().string() << " has no fn main");
  // The global passes, as `gsl run` runs them (grad and minimize thunks get
  // their reverse sweep here).
  gsl::passes::runGlobalPipeline(*prog->module);

  std::ostringstream out;
  bool ok;
  {
    TempCwd cwd;
    gsl::runtime::RunOptions ro;
    ro.seed = spec.seed;
    ro.out = &out;
    ro.engine = engine;
    ok = gsl::runtime::runMain(*prog, ro, diags);
  }
  std::ostringstream d;
  diags.print(d);
  CHECK_MESSAGE(ok, "running " << path.filename().string() << " failed:\n" << d.str() << "output so far:\n"
                                << out.str());

  std::vector<std::string> got = splitLines(out.str());
  size_t n = std::max(got.size(), spec.expect.size());
  int mismatches = 0;
  for (size_t i = 0; i < n; ++i) {
    const std::string w = i < spec.expect.size() ? spec.expect[i] : "<no more expected lines>";
    const std::string g = i < got.size() ? got[i] : "<no more output>";
    if (i < spec.expect.size() && i < got.size() && lineMatches(w, g)) continue;
    ++mismatches;
    CHECK_MESSAGE(false, path.filename().string() << " output line " << (i + 1) << ":\n  expected: " << w
                                                   << "\n  got:      " << g);
    if (mismatches >= 10) break;
  }
}

}  // namespace

TEST_CASE("tests/programs: printed output matches the # expect: lines") {
  static const std::vector<fs::path> all = programs();
  static std::vector<std::string> names;
  if (names.empty())
    for (const auto& p : all) names.push_back(p.filename().string());
  REQUIRE(!all.empty());
  for (size_t i = 0; i < all.size(); ++i) {
    // Every program on both engines: the reference interpreter and the JIT.
    SUBCASE(names[i].c_str()) {
      runProgram(all[i], gsl::runtime::Engine::Interp);
      runProgram(all[i], gsl::runtime::Engine::Jit);
    }
  }
}

TEST_CASE("programs test: the output comparison itself") {
  CHECK(lineMatches("[0.09003057, 0.24472848, 0.66524094]", "[0.090030573, 0.24472847, 0.66524096]"));
  CHECK(lineMatches("x [[1.0, 2.0],", "x [[1.0,2.0],"));
  CHECK(lineMatches(" [3.0, 4.0]]", "[3.0, 4.0]]"));
  CHECK(lineMatches("1e-05 -inf nan", "1e-05 -inf nan"));
  CHECK(lineMatches("0.0", "1e-07"));      // absolute tolerance near zero
  CHECK(lineMatches("-0.0", "0.0"));
  CHECK_FALSE(lineMatches("3", "3.0"));    // i32 and f32 differ
  CHECK_FALSE(lineMatches("3.0", "3"));
  CHECK_FALSE(lineMatches("1.0", "1.0001"));
  CHECK_FALSE(lineMatches("true", "false"));
  CHECK_FALSE(lineMatches("[1.0, 2.0]", "[1.0, 2.0, 3.0]"));
  CHECK_FALSE(lineMatches("inf", "-inf"));
  CHECK_FALSE(lineMatches("sum 1.0", "total 1.0"));
}
