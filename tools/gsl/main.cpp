// The `gsl` command line: run | check | compile (spec section 4).
// Exit codes: 0 ok, 1 user error (diagnostic printed), 2 usage error.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstring>
#include <iostream>

#include <unistd.h>

#include "frontend/Frontend.h"
#include "ir/Printer.h"
#include "backend/jit/JitEngine.h"
#include "passes/CostModel.h"
#include "passes/Pipeline.h"
#include "passes/SpmdPartitioner.h"
#include "repl/Repl.h"
#include "runtime/Host.h"
#include "runtime/MpiComm.h"

namespace {

struct Common {
  std::string file;
  int64_t np = 1;
  std::vector<std::string> defines;
};

void addCommon(CLI::App* app, Common& c) {
  app->add_option("file", c.file, "GSL source file")->required();
  app->add_option("--np", c.np, "number of ranks (the predefined const NP)")->check(CLI::Range(1, 1 << 20));
  app->add_option("-D", c.defines, "override a const: -D NAME=VALUE (repeatable)");
}

// Parses -D NAME=VALUE items; a malformed one is a usage error.
bool parseDefines(const Common& c, gsl::frontend::Options& o) {
  for (const auto& d : c.defines) {
    auto eq = d.find('=');
    std::string k = d.substr(0, eq), v = eq == std::string::npos ? "" : d.substr(eq + 1);
    char* end = nullptr;
    long long x = v.empty() ? 0 : std::strtoll(v.c_str(), &end, 10);
    if (eq == std::string::npos || k.empty() || v.empty() || *end != '\0') {
      std::cerr << "gsl: usage error: -D expects NAME=INTEGER, got '" << d << "'\n";
      return false;
    }
    o.defines[k] = x;
  }
  return true;
}

// Front end + pass pipeline. Prints diagnostics; null on error.
std::unique_ptr<gsl::frontend::CheckedProgram> build(const Common& c, gsl::SourceManager& sm,
                                                     gsl::Diagnostics& diags, int& rc) {
  gsl::frontend::Options o;
  o.np = c.np;
  o.importPath = gsl::frontend::defaultImportPath();
  if (!parseDefines(c, o)) {
    rc = 2;
    return nullptr;
  }
  auto prog = gsl::frontend::compileFile(c.file, o, sm, diags);
  diags.print(std::cerr);
  if (!prog) {
    rc = 1;
    return nullptr;
  }
  gsl::passes::runGlobalPipeline(*prog->module);
  rc = 0;
  return prog;
}

// `gsl run --mpi`: re-runs this command under mpirun, one process per rank.
int launchMpirun(const std::vector<std::string>& revArgs, int64_t np) {
  std::vector<std::string> cmd = {"mpirun", "-np", std::to_string(np), "--oversubscribe"};
  if (geteuid() == 0) cmd.push_back("--allow-run-as-root");
  // Shared memory and loopback only: works offline and in containers.
  for (const char* a : {"--mca", "btl", "self,vader", "--mca", "btl_vader_single_copy_mechanism", "none"})
    cmd.push_back(a);
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  cmd.push_back(n > 0 ? std::string(self, n) : "gsl");
  for (auto it = revArgs.rbegin(); it != revArgs.rend(); ++it)
    if (*it != "--mpi") cmd.push_back(*it);
  std::vector<char*> argv;
  for (auto& c : cmd) argv.push_back(c.data());
  argv.push_back(nullptr);
  execvp("mpirun", argv.data());
  std::cerr << "gsl: error: cannot start mpirun (install openmpi-bin): " << std::strerror(errno) << "\n";
  return 1;
}

std::string statsJson(const gsl::ir::Module& mod, const std::vector<std::unique_ptr<gsl::ir::Function>>& perRank,
                      const std::vector<std::string>& userFns, const std::string& only) {
  uint64_t paramBytes = 0;
  for (const auto& p : mod.params)
    paramBytes += (uint64_t)gsl::ir::TensorType{p.type.dtype, gsl::passes::localShape(mod, p.type, p.sharding)}
                      .numElements() * 4;
  std::string s = "{\n  \"np\": " + std::to_string(mod.np) + ",\n  \"param_bytes_per_rank\": " +
                  std::to_string(paramBytes) + ",\n  \"functions\": {";
  bool first = true;
  for (const auto& f : perRank) {
    bool user = std::find(userFns.begin(), userFns.end(), f->name) != userFns.end();
    if (only.empty() ? !user : f->name != only) continue;
    // The cost model's figures, plus the peak bytes of the JIT's buffer
    // planner (liveness-based reuse) for the compiled per-rank program.
    std::string cost = gsl::passes::costJson(gsl::passes::estimateCost(mod, *f), 4);
    cost.insert(cost.find('\n') + 1,
                "      \"jit_peak_bytes\": " + std::to_string(gsl::backend::jitPeakBytes(*f)) + ",\n");
    s += std::string(first ? "\n" : ",\n") + "    \"" + f->name + "\": " + cost;
    first = false;
  }
  return s + (first ? "}" : "\n  }") + "\n}\n";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gsl: a small language for sharded neural-network models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "gsl 0.1");

  Common runC, checkC, compileC;
  uint64_t seed = 0;
  std::string engine = "jit";
  bool mpi = false;
  auto* run = app.add_subcommand("run", "run fn main of a program");
  addCommon(run, runC);
  run->add_option("--seed", seed, "global random seed (params, random_uniform)");
  run->add_option("--engine", engine, "execution engine")->check(CLI::IsMember({"interp", "jit"}));
  run->add_flag("--mpi", mpi, "run the ranks as OpenMPI processes");
  std::string resume, logPath;
  bool noProgress = false;
  run->add_option("--resume", resume, "continue training from a checkpoint written by save_checkpoint");
  run->add_option("--log", logPath, "write one JSON object per training step to this file");
  run->add_flag("--no-progress", noProgress, "no training progress line");

  auto* check = app.add_subcommand("check", "parse, type, shape and sharding checks only");
  addCommon(check, checkC);

  std::string emit, fn;
  auto* compile = app.add_subcommand("compile", "print a compiler stage");
  addCommon(compile, compileC);
  compile->add_option("--emit", emit, "what to print")
      ->check(CLI::IsMember({"ast", "ir", "sharded", "spmd", "llvm"}));
  compile->add_option("--fn", fn, "only this function");
  bool stats = false;
  std::string statsFormat;
  compile->add_option("--stats", statsFormat, "print per-rank costs instead (json)")
      ->check(CLI::IsMember({"json"}))
      ->each([&](const std::string&) { stats = true; });

  // `gsl repl [FILE] [-np N] [-D K=V]...` (repl/Repl.h).
  Common replC;
  bool replEcho = false;
  auto* repl = app.add_subcommand("repl", "interactive exploration of shardings");
  repl->add_option("file", replC.file, "GSL file to load at the start");
  repl->add_option("--np", replC.np, "number of ranks (the predefined const NP)")->check(CLI::Range(1, 1 << 20));
  repl->add_option("-D", replC.defines, "override a const: -D NAME=VALUE (repeatable)");
  repl->add_flag("--echo", replEcho, "echo input lines after a prompt when stdin is not a terminal (transcripts)");

  // The spec spells the rank count `-np N` (as mpirun does); CLI11 reads a
  // single dash as a one-letter option, so rewrite it to --np first.
  std::vector<std::string> args;
  for (int i = argc - 1; i >= 1; --i) {
    std::string a = argv[i];
    if (a == "-np") a = "--np";
    else if (a.rfind("-np=", 0) == 0) a = "--np=" + a.substr(4);
    args.push_back(a);
  }
  const std::vector<std::string> originalArgs = args;  // parse() consumes `args`
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }

  if (*repl) {
    gsl::frontend::Options o;
    if (!parseDefines(replC, o)) return 2;
    gsl::repl::ReplOptions ro;
    ro.file = replC.file;
    ro.np = replC.np;
    ro.defines = o.defines;
    ro.echo = replEcho;
    return gsl::repl::runRepl(ro);
  }
  if (*compile && emit.empty() && !stats) {
    std::cerr << "gsl: usage error: compile needs --emit ast|ir|sharded|spmd|llvm or --stats json\n";
    return 2;
  }
  gsl::SourceManager sm;
  gsl::Diagnostics diags(sm);
  int rc = 0;

  if (*run) {
    bool underMpirun = gsl::runtime::MpiSession::launchedByMpirun();
    if (mpi && !underMpirun) return launchMpirun(originalArgs, runC.np);
    auto prog = build(runC, sm, diags, rc);
    if (!prog) return rc;
    if (!prog->host.hasMain) {
      std::cerr << runC.file << ": error: the program has no fn main() to run\n";
      return 1;
    }
    gsl::runtime::RunOptions ro;
    ro.seed = seed;
    ro.engine = engine;
    ro.mpi = underMpirun;
    ro.resume = resume;
    ro.logPath = logPath;
    ro.progress = !noProgress;
    gsl::Diagnostics rdiags(sm);
    bool ok = gsl::runtime::runMain(*prog, ro, rdiags);
    rdiags.print(std::cerr);
    return ok ? 0 : 1;
  }
  if (*check) {
    auto prog = build(checkC, sm, diags, rc);
    return rc;
  }
  if (*compile) {
    auto prog = build(compileC, sm, diags, rc);
    if (!prog) return rc;
    gsl::ir::Module& mod = *prog->module;
    if (emit == "ast") {
      for (const auto& a : prog->asts) {
        if (prog->asts.size() > 1) std::cout << "# file " << sm.name(a->file) << "\n";
        std::cout << gsl::ast::printAST(*a);
      }
      return 0;
    }
    if (!fn.empty() && !mod.findFunction(fn)) {
      std::cerr << "gsl: error: no function '" << fn << "' in " << compileC.file << "\n";
      return 1;
    }
    auto selected = [&](const gsl::ir::Function& f) { return fn.empty() || f.name == fn; };
    // ir: the global IR; sharded: after propagation; spmd: the per-rank programs.
    std::vector<std::unique_ptr<gsl::ir::Function>> perRank;
    if (emit == "sharded" || emit == "spmd" || emit == "llvm" || stats) {
      for (auto& f : mod.functions) {
        auto copy = f->clone();
        perRank.push_back(gsl::passes::buildPerRankProgram(mod, *copy, false));
        if (emit == "sharded") f = std::move(copy);
      }
    }
    if (stats) {
      std::cout << statsJson(mod, perRank, prog->userFunctions, fn);
      return 0;
    }
    if (emit == "llvm") {
      // The optimised LLVM IR of each per-rank program, as the JIT compiles it.
      for (auto& f : perRank)
        if (selected(*f)) std::cout << gsl::backend::jitEmitLLVM(*f, true) << "\n";
      return 0;
    }
    if (emit == "spmd") {
      std::cout << "# per-rank program for np = " << mod.np << " (one program, run by every rank)\n";
      for (auto& m : mod.meshes) std::cout << m.str() << "\n";
      for (auto& f : perRank)
        if (selected(*f)) std::cout << "\n" << gsl::ir::printFunction(*f);
      return 0;
    }
    if (!fn.empty()) {
      std::cout << gsl::ir::printFunction(*mod.findFunction(fn));
      return 0;
    }
    std::cout << gsl::ir::printModule(mod);
    return 0;
  }
  return 0;
}
