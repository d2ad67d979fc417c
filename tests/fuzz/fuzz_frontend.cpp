// libFuzzer target over the whole front end (docs/fuzzing.md).
//
// The input bytes are a GSL source file. It is compiled as `gsl compile`
// would, without running anything:
//
//   parse + check (frontend::compileSource; diagnostics are collected, never
//   printed) -> --emit ast -> the global pipeline (verify, shape inference,
//   training expansion) -> the IR text round trip (print, parse, print:
//   equal) -> for every function, sharding propagation + SPMD partitioning
//   into the per-rank program (as `--emit spmd`, or for a host thunk as
//   `gsl run` builds it: whole inputs, gathered results), its cost
//   (`--stats`) and its LLVM IR (backend/jit/Codegen, unoptimised, checked
//   by LLVM's verifier).
//
// A user error must come back as diagnostics. Anything else is a finding:
// an internal error (GSL_ASSERT aborts), a crash, an uncaught exception, an
// ASan or UBSan report, a timeout or running out of memory, and the
// consistency checks below (fail() aborts with a message).
//
// One configuration (-np, -D) per input, so an input costs one compile:
// the input's `# run:`, `# args:` or `# EMIT:` comment lines (the test
// corpus's headers; their `-np N` and `-D NAME=VALUE` words) offer
// configurations, else -np 1, 2, 4 and 8 do; a hash of the input picks
// one. Mutants of one seed thus cover all of its configurations, and the
// fuzzer can mutate the header lines themselves.
//
// Bounds, so that every input takes well under libFuzzer's -timeout: the
// front end's limit on a program's ops (frontend::Options::maxOps, 250,000
// for the CLI) is kMaxOps here, and LLVM IR is generated only for per-rank
// programs of at most kCodegenMaxOps ops: a larger program is a "too large"
// user error here. Nothing here allocates tensor data.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "backend/jit/Codegen.h"
#include "frontend/Frontend.h"
#include "ir/IRParser.h"
#include "ir/Printer.h"
#include "passes/CostModel.h"
#include "passes/Pipeline.h"
#include "support/Diagnostics.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#ifndef GSL_SOURCE_DIR
#define GSL_SOURCE_DIR "."
#endif

namespace {

constexpr size_t kMaxConfigs = 8;
constexpr int64_t kMaxNp = 1 << 20;  // the CLI's limit on -np
constexpr int64_t kMaxOps = 4000;
constexpr size_t kCodegenMaxOps = 500;

// GSL_FUZZ_TIMING=1: the configuration and each stage's time on stderr.
const bool kTiming = std::getenv("GSL_FUZZ_TIMING") != nullptr;
using Clock = std::chrono::steady_clock;
std::map<std::string, double> gStageMs;
size_t gOps = 0;  // the front end's ops, all functions
struct Stage {
  const char* name;
  Clock::time_point t0 = Clock::now();
  explicit Stage(const char* n) : name(n) {}
  ~Stage() { gStageMs[name] += std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }
};

struct Config {
  int64_t np = 1;
  std::map<std::string, int64_t> defines;
};

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "gsl_fuzz_frontend: finding: %s\n", what.c_str());
  std::abort();
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Parses a decimal integer word (no overflow: at most 18 digits).
bool parseInt(const std::string& s, int64_t& out) {
  size_t i = !s.empty() && s[0] == '-' ? 1 : 0;
  if (i >= s.size() || s.size() - i > 18) return false;
  int64_t v = 0;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  out = s[0] == '-' ? -v : v;
  return true;
}

std::vector<Config> configsOf(const std::string& text) {
  std::vector<Config> out;
  std::istringstream in(text);
  std::string line;
  while (out.size() < kMaxConfigs && std::getline(in, line)) {
    size_t p = line.find_first_not_of(" \t");
    if (p == std::string::npos || line[p] != '#') continue;
    std::istringstream words(line.substr(p + 1));
    std::string w;
    words >> w;
    if (w != "run:" && w != "args:" && w != "EMIT:") continue;
    Config c;
    while (words >> w) {
      std::string v;
      if (w == "-np" || w == "--np") {
        int64_t n;
        if (words >> v && parseInt(v, n) && n >= 1 && n <= kMaxNp) c.np = n;
      } else if (w == "-D" && words >> v) {
        size_t eq = v.find('=');
        int64_t x;
        if (eq != std::string::npos && eq > 0 && parseInt(v.substr(eq + 1), x)) c.defines[v.substr(0, eq)] = x;
      }
    }
    out.push_back(c);
  }
  if (out.empty())
    for (int64_t np : {1, 2, 4, 8}) out.push_back(Config{np, {}});
  return out;
}

// Every diagnostic must name a real place and render.
void checkDiagnostics(const gsl::SourceManager& sm, const gsl::Diagnostics& diags) {
  for (const auto& d : diags.all()) {
    if (d.message.empty()) fail("a diagnostic without a message");
    if (d.loc.valid() && (d.loc.file >= sm.numFiles() || d.loc.line < 1 || d.loc.col < 1))
      fail("diagnostic '" + d.message + "' has the location " + std::to_string(d.loc.file) + ":" +
           std::to_string(d.loc.line) + ":" + std::to_string(d.loc.col));
    (void)diags.render(d);
  }
}

void lowerToLLVM(const gsl::ir::Function& f) {
  if (f.ops.size() > kCodegenMaxOps) return;
  // The default options at the AVX2 width (code generation alone: nothing
  // asks the host).
  static const gsl::backend::JitOptions opts = [] {
    gsl::backend::JitOptions o;
    o.vectorWidth = 8;
    return o;
  }();
  // Asserts that LLVM's verifier accepts the function (an internal error if not).
  gsl::backend::jit::Lowered l = gsl::backend::jit::lowerFunction(f, "gsl_fuzz", opts);
  if (!l.module || l.results.size() != f.results.size()) fail("codegen of @" + f.name + " returned no module");
}

void compileOne(const std::string& text, const Config& c, uint64_t hash) {
  gsl::SourceManager sm;
  gsl::Diagnostics diags(sm);
  gsl::frontend::Options o;
  o.np = c.np;
  o.defines = c.defines;
  o.importPath = {GSL_SOURCE_DIR "/stdlib"};
  o.maxOps = kMaxOps;
  std::unique_ptr<gsl::frontend::CheckedProgram> prog;
  {
    Stage st("frontend");
    try {
      // A name in no real folder: relative imports find only the stdlib.
      prog = gsl::frontend::compileSource("/nonexistent/gsl-fuzz/input.gsl", text, o, sm, diags);
    } catch (const gsl::UserError& e) {
      // Allowed only once its diagnostic is out.
      if (!diags.hasErrors()) fail(std::string("UserError without a diagnostic: ") + e.what());
    }
    checkDiagnostics(sm, diags);
  }
  if (!prog) {
    if (!diags.hasErrors()) fail("compileSource failed without reporting an error");
    return;
  }
  if (diags.hasErrors()) fail("compileSource reported an error but returned a program");
  gsl::ir::Module& mod = *prog->module;
  for (const auto& f : mod.functions) gOps += f->ops.size();
  {
    Stage st("global");
    for (const auto& a : prog->asts) (void)gsl::ast::printAST(*a);  // --emit ast
    gsl::passes::runGlobalPipeline(mod);
  }
  {
    // --emit ir, and its documented inverse: print(parse(print(m))) == print(m).
    Stage st("roundtrip");
    std::string printed = gsl::ir::printModule(mod);
    gsl::ir::IRParseResult back = gsl::ir::parseModule(printed);
    if (!back.module) fail("the printed IR does not parse back: " + back.error + "\n" + printed);
    std::string again = gsl::ir::printModule(*back.module);
    if (again != printed) fail("IR round trip differs:\n--- printed\n" + printed + "--- reparsed\n" + again);
  }
  for (const auto& f : mod.functions) {
    bool isUser = false;
    for (const auto& u : prog->userFunctions) isUser |= u == f->name;
    std::unique_ptr<gsl::ir::Function> local;
    {
      Stage st("spmd");
      auto copy = f->clone();
      // A host thunk as gsl run builds it (every other input): inputs whole
      // where nothing says otherwise, results gathered. Else as --emit spmd:
      // the function's own argument shardings, results as propagated.
      bool asRun = !isUser && (hash >> 32) % 2 == 1;
      if (asRun)
        for (auto* a : copy->args)
          if (!a->sharding) a->sharding = gsl::ir::Sharding::replicated("", a->type.rank());
      local = gsl::passes::buildPerRankProgram(mod, *copy, asRun);
      (void)gsl::passes::estimateCost(mod, *local);
    }
    Stage st("codegen");
    lowerToLLVM(*local);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  uint64_t hash = fnv1a(text);
  std::vector<Config> configs = configsOf(text);
  const Config& c = configs[hash % configs.size()];
  compileOne(text, c, hash);
  if (kTiming) {
    std::fprintf(stderr, "-np %lld:", (long long)c.np);
    for (const auto& [k, v] : c.defines) std::fprintf(stderr, " -D %s=%lld", k.c_str(), (long long)v);
    std::fprintf(stderr, " (%zu ops)", gOps);
    for (const auto& [name, ms] : gStageMs) std::fprintf(stderr, " %s %.1f ms", name.c_str(), ms);
    std::fprintf(stderr, "\n");
    gStageMs.clear();
    gOps = 0;
  }
  return 0;
}
