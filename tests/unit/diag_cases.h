// The diagnostics corpus (tests/diag/*.gsl, tests/diag/run/*.gsl): reading a
// case and rendering diagnostics for comparison with its expectations.
//
// A case is one small bad program. Its comments say what it expects:
//   # expect: LINE:COL: error: MESSAGE      (also `note:`; in order, all of them)
//   # expect: error: MESSAGE                (a diagnostic without a location)
//   # expect: inc/other.gsl:3:14: error: M  (in another file, relative to the case's folder)
//   # args: -np 4 -D NAME=VALUE            (gsl command-line options)
//   # fixture: NAME TYPE [= V0 V1 ...]      (run cases: a .npy file written before running;
//   # fixture: NAME TYPE truncated           its last element cut off;
//   # fixture: NAME directory                a folder;
//   # fixture: NAME text CONTENT             a text file;
//   # fixture: NAME bytes CONTENT            raw bytes, \xNN escapes allowed)
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "frontend/Frontend.h"
#include "support/Diagnostics.h"

namespace diagtest {

namespace fs = std::filesystem;

struct Case {
  fs::path path;
  std::vector<std::string> args;
  std::vector<std::string> expect;
  std::vector<std::string> fixtures;
};

inline std::string afterPrefix(const std::string& line, const std::string& prefix) {
  return line.rfind(prefix, 0) == 0 ? line.substr(prefix.size()) : std::string();
}

inline Case readCase(const fs::path& p) {
  Case c;
  c.path = p;
  std::ifstream in(p);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (auto e = afterPrefix(line, "# expect: "); !e.empty()) c.expect.push_back(e);
    if (auto f = afterPrefix(line, "# fixture: "); !f.empty()) c.fixtures.push_back(f);
    if (auto a = afterPrefix(line, "# args: "); !a.empty()) {
      std::istringstream ss(a);
      for (std::string w; ss >> w;) c.args.push_back(w);
    }
  }
  return c;
}

// The .gsl files directly in `dir`, sorted (subfolders are not cases).
inline std::vector<fs::path> caseFiles(const fs::path& dir) {
  std::vector<fs::path> r;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".gsl") r.push_back(e.path());
  std::sort(r.begin(), r.end());
  return r;
}

// `# args:` -> front-end options (the subset of gsl's command line a case may use).
inline gsl::frontend::Options options(const Case& c) {
  gsl::frontend::Options o;
  o.importPath = {GSL_SOURCE_DIR "/stdlib"};
  for (size_t i = 0; i < c.args.size(); ++i) {
    const std::string& a = c.args[i];
    if ((a == "-np" || a == "--np") && i + 1 < c.args.size()) {
      o.np = std::stoll(c.args[++i]);
    } else if (a == "-D" && i + 1 < c.args.size()) {
      const std::string& d = c.args[++i];
      auto eq = d.find('=');
      REQUIRE_MESSAGE(eq != std::string::npos, "bad -D in # args: " << d);
      // An integer, else a float (-D LR=0.001), as gsl's parseDefines.
      std::string v = d.substr(eq + 1);
      size_t used = 0;
      long long x = std::stoll(v, &used);
      if (used == v.size()) o.defines[d.substr(0, eq)] = x;
      else o.floatDefines[d.substr(0, eq)] = std::stod(v);
    } else {
      FAIL("unsupported # args: option '" << a << "' in " << c.path.string());
    }
  }
  return o;
}

// One diagnostic as a case writes it: LINE:COL: SEVERITY: MESSAGE, with a
// file prefix only when it is not the case's own file.
inline std::string show(const gsl::Diagnostics& diags, const gsl::Diagnostic& d, const fs::path& casePath) {
  std::string sev = d.severity == gsl::Severity::Error ? "error" : "note";
  if (!d.loc.valid()) return sev + ": " + d.message;
  std::string where;
  fs::path file = diags.sources().name(d.loc.file);
  if (fs::weakly_canonical(file) != fs::weakly_canonical(casePath))
    where = fs::relative(fs::weakly_canonical(file), fs::weakly_canonical(casePath.parent_path()))
                .lexically_normal()
                .generic_string() +
            ":";
  return where + std::to_string(d.loc.line) + ":" + std::to_string(d.loc.col) + ": " + sev + ": " + d.message;
}

inline std::string join(const std::vector<std::string>& v) {
  std::string r;
  for (const auto& s : v) r += s + "\n";
  return r;
}

inline std::string showAll(const gsl::Diagnostics& diags, const fs::path& casePath) {
  std::vector<std::string> got;
  for (const auto& d : diags.all()) got.push_back(show(diags, d, casePath));
  return join(got);
}

}  // namespace diagtest
