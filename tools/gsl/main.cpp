// The `gsl` command line: run | check | compile (spec section 4).
// Exit codes: 0 ok, 1 user error (diagnostic printed), 2 usage error.
#include <CLI/CLI.hpp>

#include <iostream>

#include "frontend/Frontend.h"
#include "ir/Printer.h"
#include "passes/Pipeline.h"
#include "runtime/Host.h"

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
  gsl::passes::runPipeline(*prog->module);
  rc = 0;
  return prog;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gsl: a small language for sharded neural-network models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "gsl 0.1");

  Common runC, checkC, compileC;
  uint64_t seed = 0;
  std::string engine = "interp";
  bool mpi = false;
  auto* run = app.add_subcommand("run", "run fn main of a program");
  addCommon(run, runC);
  run->add_option("--seed", seed, "global random seed (params, random_uniform)");
  run->add_option("--engine", engine, "execution engine")->check(CLI::IsMember({"interp", "jit"}));
  run->add_flag("--mpi", mpi, "run the ranks as OpenMPI processes");

  auto* check = app.add_subcommand("check", "parse, type, shape and sharding checks only");
  addCommon(check, checkC);

  std::string emit, fn;
  auto* compile = app.add_subcommand("compile", "print a compiler stage");
  addCommon(compile, compileC);
  compile->add_option("--emit", emit, "what to print")
      ->required()
      ->check(CLI::IsMember({"ast", "ir", "sharded", "spmd", "llvm"}));
  compile->add_option("--fn", fn, "only this function (with --emit ir)");

  // The spec spells the rank count `-np N` (as mpirun does); CLI11 reads a
  // single dash as a one-letter option, so rewrite it to --np first.
  std::vector<std::string> args;
  for (int i = argc - 1; i >= 1; --i) {
    std::string a = argv[i];
    if (a == "-np") a = "--np";
    else if (a.rfind("-np=", 0) == 0) a = "--np=" + a.substr(4);
    args.push_back(a);
  }
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

  gsl::SourceManager sm;
  gsl::Diagnostics diags(sm);
  int rc = 0;

  if (*run) {
    if (engine == "jit") {
      std::cerr << "gsl: usage error: --engine jit is not built yet; the reference interpreter (--engine interp) is the engine\n";
      return 2;
    }
    if (mpi) {
      std::cerr << "gsl: usage error: --mpi is not built yet (ranks are not partitioned yet; see README, Status)\n";
      return 2;
    }
    auto prog = build(runC, sm, diags, rc);
    if (!prog) return rc;
    if (!prog->host.hasMain) {
      std::cerr << runC.file << ": error: the program has no fn main() to run\n";
      return 1;
    }
    gsl::runtime::RunOptions ro;
    ro.seed = seed;
    ro.engine = engine;
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
    if (emit == "sharded" || emit == "spmd" || emit == "llvm") {
      std::cerr << "gsl: usage error: --emit " << emit << " is not built yet (see README, Status)\n";
      return 2;
    }
    auto prog = build(compileC, sm, diags, rc);
    if (!prog) return rc;
    if (emit == "ast") {
      for (const auto& a : prog->asts) {
        if (prog->asts.size() > 1) std::cout << "# file " << sm.name(a->file) << "\n";
        std::cout << gsl::ast::printAST(*a);
      }
      return 0;
    }
    if (!fn.empty()) {
      auto* f = prog->module->findFunction(fn);
      if (!f) {
        std::cerr << "gsl: error: no function '" << fn << "' in " << compileC.file << "\n";
        return 1;
      }
      std::cout << gsl::ir::printFunction(*f);
      return 0;
    }
    std::cout << gsl::ir::printModule(*prog->module);
    return 0;
  }
  return 0;
}
