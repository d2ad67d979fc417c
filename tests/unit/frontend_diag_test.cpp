// The diagnostics corpus, front end: every tests/diag/*.gsl is compiled and
// must produce exactly the diagnostics its `# expect:` lines list, in order
// (see diag_cases.h for the format).
#include <doctest/doctest.h>

#include <map>

#include "diag_cases.h"
#include "frontend/Frontend.h"

using namespace diagtest;

namespace {

const fs::path kDiagDir = fs::path(GSL_SOURCE_DIR) / "tests" / "diag";

}  // namespace

TEST_CASE("diag corpus: every case reports exactly its expected diagnostics") {
  auto files = caseFiles(kDiagDir);
  // The project asks for at least 25 distinct user errors.
  REQUIRE(files.size() >= 40);
  for (const auto& path : files) {
    SUBCASE(path.filename().string().c_str()) {
      Case c = readCase(path);
      // A case without expectations would assert nothing.
      REQUIRE_MESSAGE(!c.expect.empty(), path.string() << " has no # expect: lines");
      bool expectsError = false;
      for (const auto& e : c.expect) expectsError |= e.find(" error: ") != std::string::npos || e.rfind("error: ", 0) == 0;
      REQUIRE_MESSAGE(expectsError, path.string() << " expects no error");
      gsl::SourceManager sm;
      gsl::Diagnostics diags(sm);
      auto prog = gsl::frontend::compileFile(path.string(), options(c), sm, diags);
      CHECK(prog == nullptr);
      CHECK(showAll(diags, path) == join(c.expect));
    }
  }
}

TEST_CASE("diag corpus: the case names are distinct errors") {
  // Each file names its error; no two cases expect the same first message.
  std::map<std::string, std::string> seen;
  for (const auto& path : caseFiles(kDiagDir)) {
    Case c = readCase(path);
    if (c.expect.empty()) continue;
    std::string first = c.expect[0].substr(c.expect[0].find("error: "));
    auto [it, fresh] = seen.emplace(first, path.filename().string());
    CHECK_MESSAGE(fresh, path.filename().string() << " repeats " << it->second << ": " << first);
  }
}

TEST_CASE("diag rendering: file:line:col, the source line, and a caret under the column") {
  const fs::path path = kDiagDir / "unknown_name.gsl";
  Case c = readCase(path);
  gsl::SourceManager sm;
  gsl::Diagnostics diags(sm);
  CHECK(gsl::frontend::compileFile(path.string(), options(c), sm, diags) == nullptr);
  REQUIRE(diags.all().size() == 1);
  const auto& d = diags.all()[0];
  CHECK(d.severity == gsl::Severity::Error);
  CHECK(diags.render(d) == path.string() + ":4:14: error: unknown name 'y' (did you mean 'x'?)\n"
                                           "      return x + y\n"
                                           "                 ^\n");
}

TEST_CASE("diag rendering: the caret counts characters, not bytes, and keeps tabs") {
  gsl::SourceManager sm;
  gsl::Diagnostics diags(sm);
  gsl::frontend::Options o;
  auto prog = gsl::frontend::compileSource("mem.gsl", "fn main() {\n\tprint(\"größe\", y)\n}\n", o, sm, diags);
  CHECK(prog == nullptr);
  REQUIRE(diags.all().size() == 1);
  CHECK(diags.render(diags.all()[0]) == "mem.gsl:2:17: error: unknown name 'y'\n"
                                        "    \tprint(\"größe\", y)\n"
                                        "    \t               ^\n");
}

TEST_CASE("diag rendering: a diagnostic without a location has no source line") {
  gsl::SourceManager sm;
  gsl::Diagnostics diags(sm);
  gsl::frontend::Options o;
  o.defines["HIDDEN"] = 3;
  CHECK(gsl::frontend::compileSource("mem.gsl", "const D = 4\n", o, sm, diags) == nullptr);
  REQUIRE(diags.all().size() == 1);
  CHECK(diags.render(diags.all()[0]) == "gsl: error: -D HIDDEN=3: the program declares no const 'HIDDEN'\n");
}
