// The diagnostics corpus, run time: every tests/diag/run/*.gsl compiles
// cleanly, and running its fn main (in a fresh temp folder holding the
// case's `# fixture:` files) must produce exactly the diagnostics its
// `# expect:` lines list (see diag_cases.h for the format).
#include <doctest/doctest.h>

#include <stdlib.h>
#include <unistd.h>

#include <sstream>

#include "backend/Npy.h"
#include "diag_cases.h"
#include "ir/Type.h"
#include "passes/Pipeline.h"
#include "runtime/Host.h"

using namespace diagtest;

namespace {

const fs::path kRunDir = fs::path(GSL_SOURCE_DIR) / "tests" / "diag" / "run";

// A fresh temp folder that is the working directory while this lives.
struct TempCwd {
  fs::path dir, old;
  TempCwd() {
    char tmpl[] = "/tmp/gsl_diag_test.XXXXXX";
    REQUIRE(mkdtemp(tmpl));
    dir = tmpl;
    old = fs::current_path();
    fs::current_path(dir);
  }
  ~TempCwd() {
    fs::current_path(old);
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

// "f32[4, 3]" -> the type.
gsl::ir::TensorType parseType(const std::string& s) {
  auto lb = s.find('[');
  auto dt = gsl::ir::parseDType(s.substr(0, lb));
  REQUIRE_MESSAGE(dt, "bad fixture type " << s);
  gsl::ir::TensorType t{*dt, {}};
  if (lb != std::string::npos) {
    std::istringstream ss(s.substr(lb + 1, s.find(']') - lb - 1));
    for (std::string d; std::getline(ss, d, ',');) t.shape.push_back(std::stoll(d));
  }
  return t;
}

// Writes one `# fixture:` into the current folder.
void makeFixture(const std::string& spec) {
  std::istringstream ss(spec);
  std::string name, rest;
  ss >> name;
  std::getline(ss >> std::ws, rest);
  if (rest == "directory") {
    fs::create_directory(name);
    return;
  }
  if (rest == "empty") {
    std::ofstream{name};
    return;
  }
  if (rest.rfind("text ", 0) == 0) {
    std::ofstream(name) << rest.substr(5);
    return;
  }
  if (rest.rfind("bytes ", 0) == 0) {  // raw bytes, \xNN escapes allowed
    std::string b, t = rest.substr(6);
    for (size_t i = 0; i < t.size(); ++i) {
      if (t[i] == '\\' && i + 3 < t.size() && t[i + 1] == 'x') {
        b += (char)std::stoi(t.substr(i + 2, 2), nullptr, 16);
        i += 3;
      } else {
        b += t[i];
      }
    }
    std::ofstream(name, std::ios::binary) << b;
    return;
  }
  bool truncated = false;
  if (auto p = rest.rfind(" truncated"); p != std::string::npos && p + 10 == rest.size()) {
    truncated = true;
    rest = rest.substr(0, p);
  }
  std::vector<double> vals;
  if (auto eq = rest.find('='); eq != std::string::npos) {
    std::istringstream vs(rest.substr(eq + 1));
    for (double v; vs >> v;) vals.push_back(v);
    rest = rest.substr(0, eq);
  }
  while (!rest.empty() && rest.back() == ' ') rest.pop_back();
  gsl::ir::TensorType t = parseType(rest);
  size_t n = (size_t)t.numElements();
  vals.resize(n, 0.0);
  gsl::backend::Tensor x;
  if (t.dtype == gsl::ir::DType::F32) x = gsl::backend::Tensor::fromF32(t.shape, std::vector<float>(vals.begin(), vals.end()));
  else if (t.dtype == gsl::ir::DType::I32) x = gsl::backend::Tensor::fromI32(t.shape, std::vector<int32_t>(vals.begin(), vals.end()));
  else FAIL("fixture dtype must be f32 or i32: " << spec);
  gsl::backend::writeNpy(name, x);
  if (truncated) fs::resize_file(name, fs::file_size(name) - 4);  // drop the last element
}

}  // namespace

TEST_CASE("run-time diag corpus: every case fails at run time with exactly its expected diagnostics") {
  auto files = caseFiles(kRunDir);
  REQUIRE(files.size() >= 5);
  for (const auto& path : files) {
    SUBCASE(path.filename().string().c_str()) {
      Case c = readCase(path);
      REQUIRE_MESSAGE(!c.expect.empty(), path.string() << " has no # expect: lines");
      TempCwd cwd;
      for (const auto& f : c.fixtures) makeFixture(f);
      gsl::SourceManager sm;
      gsl::Diagnostics diags(sm);
      auto prog = gsl::frontend::compileFile(path.string(), options(c), sm, diags);
      INFO("compile-time diagnostics:\n" << showAll(diags, path));
      REQUIRE(prog != nullptr);
      REQUIRE(diags.all().empty());
      gsl::passes::runGlobalPipeline(*prog->module);  // as `gsl run` does
      std::ostringstream out;
      gsl::runtime::RunOptions ro;
      ro.engine = gsl::runtime::Engine::Interp;  // as before the default became the JIT
      ro.out = &out;
      gsl::Diagnostics rdiags(sm);
      CHECK_FALSE(gsl::runtime::runMain(*prog, ro, rdiags));
      CHECK(showAll(rdiags, path) == join(c.expect));
    }
  }
}

TEST_CASE("run-time diag: output printed before the error is kept") {
  const fs::path path = kRunDir / "load_in_loop.gsl";
  Case c = readCase(path);
  TempCwd cwd;
  for (const auto& f : c.fixtures) makeFixture(f);
  gsl::SourceManager sm;
  gsl::Diagnostics diags(sm);
  auto prog = gsl::frontend::compileFile(path.string(), options(c), sm, diags);
  REQUIRE(prog != nullptr);
  gsl::passes::runGlobalPipeline(*prog->module);
  std::ostringstream out;
  gsl::runtime::RunOptions ro;
  ro.engine = gsl::runtime::Engine::Interp;  // as before the default became the JIT
  ro.out = &out;
  gsl::Diagnostics rdiags(sm);
  CHECK_FALSE(gsl::runtime::runMain(*prog, ro, rdiags));
  // Two prints (of two zero vectors) happened before the third load failed.
  std::string s = out.str();
  CHECK(std::count(s.begin(), s.end(), '\n') == 2);
}
