// The `gsl` command line: run | check | compile (spec section 4), repl, trace summary.
// Exit codes: 0 ok, 1 user error (diagnostic printed), 2 usage error.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>

#include <unistd.h>

#include "frontend/Frontend.h"
#include "ir/Printer.h"
#include "backend/jit/JitEngine.h"
#include "backend/jit/ObjectCache.h"
#include "passes/CostModel.h"
#include "passes/Pipeline.h"
#include "repl/Repl.h"
#include "runtime/Host.h"
#include "runtime/Memory.h"
#include "runtime/AutoSharding.h"
#include "runtime/Calibrate.h"
#include "runtime/MpiComm.h"
#include "runtime/MpiLaunch.h"
#include "runtime/TraceFile.h"
#include "runtime/TraceSummary.h"
#include "support/Interrupt.h"

namespace {

struct Common {
  std::string file;
  int64_t np = 1;
  std::vector<std::string> defines;
  std::string autocast;  // --autocast bf16: mixed precision (passes/Autocast.h)
  bool remat = false;    // --remat: loops' backward passes recompute their whole body
  bool noUpdateSharding = false;  // --no-update-sharding: every replica updates every param whole
};

void addCommon(CLI::App* app, Common& c) {
  app->add_option("file", c.file, "GSL source file")->required();
  app->add_option("--np", c.np, "number of ranks (the predefined const NP)")->check(CLI::Range(1, 1 << 20));
  app->add_option("-D", c.defines, "override a const: -D NAME=VALUE (repeatable)");
  app->add_option("--autocast", c.autocast,
                  "mixed precision: run f32 matmuls and einsums in this dtype (bf16), params stay f32")
      ->check(CLI::IsMember({"bf16"}));
  app->add_flag("--remat", c.remat,
                "training: a loop's backward pass recomputes its whole body instead of reading the matmul and "
                "einsum results the forward pass saved (less memory, more compute; docs/loops.md)");
  app->add_flag("--no-update-sharding", c.noUpdateSharding,
                "training: every data-parallel replica updates every param whole and holds all optimizer states "
                "(all_reduce of the gradients), instead of 1/N of each (reduce_scatter, all_gather; docs/memory.md)");
}

// Parses -D NAME=VALUE items; a malformed one is a usage error.
bool parseDefines(const Common& c, gsl::frontend::Options& o) {
  for (const auto& d : c.defines) {
    auto eq = d.find('=');
    std::string k = d.substr(0, eq), v = eq == std::string::npos ? "" : d.substr(eq + 1);
    char* end = nullptr;
    errno = 0;
    long long x = v.empty() ? 0 : std::strtoll(v.c_str(), &end, 10);
    if (eq != std::string::npos && !k.empty() && !v.empty() && *end != '\0' && errno == 0) {
      // Not an integer: a float const (-D LR=0.001, -D LR=1e-3).
      errno = 0;
      double f = std::strtod(v.c_str(), &end);
      if (*end == '\0' && std::isfinite(f) && errno == 0) {
        o.defines.erase(k);
        o.floatDefines[k] = f;
        continue;
      }
      if (*end == '\0' && errno == ERANGE) {
        std::cerr << "gsl: usage error: -D " << d << ": the value does not fit in a 64-bit float\n";
        return false;
      }
    }
    if (eq == std::string::npos || k.empty() || v.empty() || *end != '\0') {
      std::cerr << "gsl: usage error: -D expects NAME=INTEGER or NAME=NUMBER, got '" << d << "'\n";
      return false;
    }
    if (errno == ERANGE) {
      std::cerr << "gsl: usage error: -D " << d << ": the value does not fit in a 64-bit integer\n";
      return false;
    }
    o.floatDefines.erase(k);
    o.defines[k] = x;
  }
  return true;
}

// Front end + pass pipeline. Prints diagnostics; null on error.
std::unique_ptr<gsl::frontend::CheckedProgram> build(const Common& c, gsl::SourceManager& sm,
                                                     gsl::Diagnostics& diags, int& rc,
                                                     const gsl::passes::PrintAfter* print = nullptr) {
  gsl::frontend::Options o;
  o.np = c.np;
  o.importPath = gsl::frontend::defaultImportPath();
  if (!parseDefines(c, o)) {
    rc = 2;
    return nullptr;
  }
  auto prog = [&] {
    gsl::trace::Scope t("frontend", "front end");  // --time-passes
    return gsl::frontend::compileFile(c.file, o, sm, diags);
  }();
  diags.print(std::cerr);
  if (!prog) {
    rc = 1;
    return nullptr;
  }
  if (c.autocast == "bf16") prog->module->autocast = gsl::ir::DType::BF16;
  prog->module->remat = c.remat;
  prog->module->updateSharding = !c.noUpdateSharding;
  gsl::passes::runGlobalPipeline(*prog->module, print);
  rc = 0;
  return prog;
}

// `gsl run --mpi`: runs this command again under mpirun, one process per
// rank (runtime/MpiLaunch.h), without --mpi and the launcher's own options.
int launchMpirun(const std::vector<std::string>& revArgs, const gsl::runtime::MpiLaunchOptions& lo) {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  std::vector<std::string> args;
  for (auto it = revArgs.rbegin(); it != revArgs.rend(); ++it) {
    if (*it == "--mpi") continue;
    bool dropped = false;
    for (const char* o : {"--hostfile", "--host", "--mpirun-args"}) {
      if (*it == o) {  // and its value
        if (std::next(it) != revArgs.rend()) ++it;
        dropped = true;
      } else if (it->rfind(std::string(o) + "=", 0) == 0) {
        dropped = true;
      }
    }
    if (!dropped) args.push_back(*it);
  }
  return gsl::runtime::launchUnderMpirun(n > 0 ? std::string(self, n) : "gsl", args, lo);
}

// The per-rank memory limit of `gsl run` (runtime/Host.h, checkMemory):
// --max-memory if given (0: no check), else the machine's available memory
// shared by the ranks on this machine (all NP ranks, except under a bare
// mpirun: OMPI_COMM_WORLD_LOCAL_SIZE). False on a malformed size.
bool memoryLimit(const std::string& flag, int64_t np, gsl::runtime::RunOptions& ro) {
  if (!flag.empty()) {
    auto v = gsl::runtime::parseByteSize(flag);
    if (!v) {
      std::cerr << "gsl: usage error: --max-memory expects a size such as 512M or 8G, got '" << flag << "'\n";
      return false;
    }
    ro.maxMemory = *v;
    ro.maxMemorySource = "--max-memory " + flag;
    return true;
  }
  auto avail = gsl::runtime::availableMemory();
  if (!avail) return true;  // no /proc/meminfo: no check
  int64_t local = np;
  if (const char* l = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE")) local = std::max(1, std::atoi(l));
  ro.maxMemory = *avail / (uint64_t)std::max<int64_t>(1, local);
  ro.maxMemorySource = "the available memory, " + gsl::runtime::formatBytes(*avail) +
                       (local > 1 ? ", shared by " + std::to_string(local) + " ranks" : "") +
                       "; --max-memory sets the limit";
  return true;
}

// The machine model `gsl calibrate` wrote (docs/cost-model.md) for thread
// or MPI ranks; a file it cannot read is a warning and the default model.
gsl::passes::MachineModel machineModel(bool mpi) {
  std::string error;
  gsl::passes::MachineModel m = gsl::passes::loadMachineModel(
      gsl::passes::machineModelDir(gsl::backend::defaultCompileCacheDir()), mpi ? "mpi" : "threads", &error);
  if (!error.empty()) std::cerr << "gsl: warning: " << error << "\n";
  return m;
}

// `--stats json`: per-rank figures of the module and of each function.
nlohmann::ordered_json statsJson(const gsl::ir::Module& mod,
                                 const std::vector<std::unique_ptr<gsl::ir::Function>>& perRank,
                                 const std::vector<std::string>& userFns, const std::string& only,
                                 const gsl::backend::JitOptions& jit, const gsl::runtime::MemoryEstimate& est,
                                 const gsl::passes::MachineModel& machine) {
  const auto& training = est.training;
  uint64_t paramBytes = 0;
  for (const auto& p : mod.params)
    paramBytes += (uint64_t)gsl::ir::TensorType{p.type.dtype, gsl::ir::localShape(mod, p.type, p.sharding)}
                      .byteSize();
  nlohmann::ordered_json fns = nlohmann::ordered_json::object();
  for (const auto& f : perRank) {
    bool user = std::find(userFns.begin(), userFns.end(), f->name) != userFns.end();
    if (only.empty() ? !user : f->name != only) continue;
    // The peak bytes of the JIT's buffer planner (liveness-based reuse) for
    // the per-rank program (planned without compiling it: --stats stays
    // fast for a 600B-param model), then the cost model's figures.
    nlohmann::ordered_json entry = {{"jit_peak_bytes", gsl::backend::jitPlannedPeakBytes(*f, jit)}};
    entry.update(gsl::passes::costJson(gsl::passes::estimateCost(mod, *f, machine)));
    fns[f->name] = std::move(entry);
  }
  nlohmann::ordered_json out = {{"np", mod.np}, {"param_bytes_per_rank", paramBytes}, {"functions", std::move(fns)}};
  // The training step of fn main, as the run's memory estimate measures it.
  if (training) {
    nlohmann::ordered_json collectives = nlohmann::ordered_json::object();
    uint64_t sent = 0;
    for (const auto& [kind, v] : training->cost.collectives) {
      collectives[gsl::ir::opName(kind)] = {{"calls", v.calls}, {"bytes", v.bytes}};
      sent += v.bytes;
    }
    out["training"] = {{"param_bytes", training->paramBytes},
                       {"grad_bytes", training->gradBytes},
                       {"optimizer_state_bytes", training->stateBytes},
                       {"input_bytes", training->inputBytes},
                       {"activation_bytes", training->activationBytes},
                       {"result_bytes", training->resultBytes},
                       {"peak_bytes", training->peak()},
                       {"collective_bytes", sent},
                       {"collectives", std::move(collectives)},
                       {"predicted_seconds", gsl::passes::costJson(training->cost)["predicted_seconds"]}};
  }
  // The run's estimate per rank, as --max-memory checks it: params, states
  // and the largest computation (a training step, a checkpoint's group).
  out["memory"] = {{"param_bytes", est.paramBytes},
                   {"optimizer_state_bytes", est.stateBytes},
                   {"largest_computation_bytes", est.activationBytes},
                   {"total_bytes", est.total()}};
  // What the predicted seconds were computed with (docs/cost-model.md).
  out["machine_model"] = {{"source", machine.source}, {"transport", machine.transport}};
  if (machine.calibrated()) out["machine_model"]["cpu"] = machine.cpu, out["machine_model"]["date"] = machine.date;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gsl: a small language for sharded neural-network models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "gsl 0.1");

  Common runC, checkC, compileC;
  uint64_t seed = 0;
  std::string engine = "jit";  // parsed into runtime::Engine after the command line
  bool mpi = false;
  auto* run = app.add_subcommand("run", "run fn main of a program");
  addCommon(run, runC);
  run->add_option("--seed", seed, "global random seed (params, random_uniform)");
  run->add_option("--engine", engine, "execution engine")->check(CLI::IsMember({"interp", "jit"}));
  auto* mpiFlag = run->add_flag("--mpi", mpi, "run the ranks as OpenMPI processes");
  // Where the ranks run (docs/cluster.md): mpirun's own options.
  std::string hostfile, hostList, mpirunArgs;
  run->add_option("--hostfile", hostfile, "with --mpi: the hosts to run the ranks on (mpirun --hostfile)")
      ->needs(mpiFlag);
  run->add_option("--host", hostList, "with --mpi: the hosts to run the ranks on, such as a:4,b:4 (mpirun --host)")
      ->needs(mpiFlag);
  run->add_option("--mpirun-args", mpirunArgs, "with --mpi: further options for mpirun, as one string")
      ->needs(mpiFlag);
  std::string resume, logPath;
  bool noProgress = false;
  run->add_option("--resume", resume, "continue training from a checkpoint written by save_checkpoint");
  run->add_option("--log", logPath, "write one JSON object per training step to this file");
  std::vector<std::string> checkpointEvery;
  run->add_option("--checkpoint-every", checkpointEvery,
                  "N PATH: write a checkpoint to PATH after every N-th training step (atomically, as save_checkpoint)")
      ->expected(2);
  run->add_flag("--no-progress", noProgress, "no training progress line");
  // The persistent compile cache (docs/compile-cache.md).
  std::string cacheDir;
  bool noCache = false, cacheStats = false;
  run->add_option("--cache-dir", cacheDir,
                  "compile cache directory (default: $XDG_CACHE_HOME/gsl, else ~/.cache/gsl)");
  run->add_flag("--no-cache", noCache, "neither read nor write the compile cache");
  run->add_flag("--cache-stats", cacheStats,
                "at the end, print how many compiled functions were loaded from the cache and how many compiled");
  std::string tracePath;
  run->add_option("--trace", tracePath,
                  "write a Chrome/Perfetto trace of the run (compiles, calls, collectives, waits) to this file");
  bool perfMap = false;
  run->add_flag("--perf-map", perfMap,
                "append the JIT's functions and kernels to /tmp/perf-PID.map, for perf report (docs/trace.md)");
  std::string maxMemory;
  run->add_option("--max-memory", maxMemory,
                  "refuse to start when one rank would need more memory than this (512M, 8G; 0: no check; "
                  "default: the available memory shared by the ranks)");

  // `--stats` belongs to compile (it runs nothing); run names it instead of
  // CLI11's "not expected" message.
  std::string runStats;
  run->add_option("--stats", runStats)->group("");

  auto* check = app.add_subcommand("check", "parse, type, shape and sharding checks only");
  addCommon(check, checkC);

  std::string emit, fn;  // emit: parsed into passes::EmitKind after the command line
  std::vector<std::string> emitNames;
  for (gsl::passes::EmitKind k : gsl::passes::kEmitKinds) emitNames.push_back(gsl::passes::emitKindName(k));
  auto* compile = app.add_subcommand("compile", "print a compiler stage");
  addCommon(compile, compileC);
  compile->add_option("--emit", emit, "what to print")
      ->check(CLI::IsMember(emitNames));
  compile->add_option("--fn", fn, "only this function");
  gsl::passes::PrintAfter printAfter;
  std::vector<std::string> passNames = gsl::passes::passNames();
  passNames.push_back("all");
  compile->add_option("--print-after", printAfter.passes,
                      "also print the IR after this pass to stderr (repeatable; all: every pass that runs)")
      ->check(CLI::IsMember(passNames));
  bool timePasses = false;
  compile->add_flag("--time-passes", timePasses,
                    "compile every per-rank program with the JIT (no persistent cache) and print to stderr where "
                    "the time went: front end, each pass, LLVM's phases, kernel counts");
  bool stats = false;
  std::string statsFormat;
  auto* statsOpt = compile->add_option("--stats", statsFormat, "print per-rank costs instead (json)")
                       ->check(CLI::IsMember({"json"}))
                       ->each([&](const std::string&) { stats = true; });
  bool statsMpi = false;
  compile->add_flag("--mpi", statsMpi,
                    "with --stats: the memory estimate of MPI ranks (a process each, as gsl run --mpi), not of "
                    "thread ranks")
      ->needs(statsOpt);

  // `gsl repl [FILE] [-np N] [-D K=V]...` (repl/Repl.h).
  Common replC;
  bool replEcho = false;
  auto* repl = app.add_subcommand("repl", "interactive exploration of shardings");
  repl->add_option("file", replC.file, "GSL file to load at the start");
  repl->add_option("--np", replC.np, "number of ranks (the predefined const NP)")->check(CLI::Range(1, 1 << 20));
  repl->add_option("-D", replC.defines, "override a const: -D NAME=VALUE (repeatable)");
  repl->add_flag("--echo", replEcho, "echo input lines after a prompt when stdin is not a terminal (transcripts)");

  // `gsl trace summary FILE [--by-rank]` (runtime/TraceSummary.h).
  auto* traceCmd = app.add_subcommand("trace", "read a trace file written by gsl run --trace");
  traceCmd->require_subcommand(1);
  std::string summaryFile;
  gsl::runtime::TraceSummaryOptions summaryOptions;
  auto* summary = traceCmd->add_subcommand(
      "summary", "tables of the trace: tensor-function calls, collectives, compiles, waits (docs/trace.md)");
  summary->add_option("file", summaryFile, "a trace file of gsl run --trace")->required();
  summary->add_flag("--by-rank", summaryOptions.byRank, "a row per rank instead of summed over the ranks");

  // `gsl calibrate [-np N] [--mpi] [--quick] [--dir D]` (runtime/Calibrate.h).
  gsl::runtime::CalibrateOptions calibrateO;
  bool calibrateMpi = false;
  auto* calibrate = app.add_subcommand(
      "calibrate", "measure this machine's GEMM, memory and collective rates for the cost model (docs/cost-model.md)");
  calibrate->add_option("--np", calibrateO.np, "ranks the collectives are measured on (default 2)")
      ->check(CLI::Range(2, 1024));
  calibrate->add_flag("--mpi", calibrateMpi, "measure the collectives on MPI ranks (this host's shared memory)");
  calibrate->add_flag("--quick", calibrateO.quick, "fewer rounds and smaller inputs (tests)");
  calibrate->add_option("--dir", calibrateO.dir,
                        "where machine.json goes (default: $GSL_MACHINE_DIR, else the compile cache directory)");

  // `gsl plan FILE -np N` (runtime/AutoSharding.h).
  Common planC;
  std::string planMaxMemory, planWrite;
  bool planMpi = false, planKeepMesh = false;
  int64_t planExhaustive = 64;
  auto* plan = app.add_subcommand(
      "plan", "search the open annotations and the mesh for the fastest predicted step (docs/cost-model.md)");
  addCommon(plan, planC);
  plan->add_option("--max-memory", planMaxMemory, "per-rank memory limit such as 8G (default: none)");
  plan->add_flag("--mpi", planMpi, "predict for MPI ranks (the machine file's mpi section, a process per rank)");
  plan->add_flag("--keep-mesh", planKeepMesh, "keep the mesh's axis sizes as written");
  plan->add_option("--exhaustive", planExhaustive,
                   "search every combination when a mesh has at most this many (default 64)")
      ->check(CLI::Range((int64_t)1, (int64_t)1 << 20));
  plan->add_option("--write", planWrite, "write the program with the chosen annotations to this file");
  std::string planCandidates, planFn;
  plan->add_option("--fn", planFn, "minimise this tensor function's predicted time (its arguments searched) "
                                   "instead of the training step's");
  plan->add_option("--candidates", planCandidates,
                   "write every plan evaluated to this directory (plan_NNN.gsl and candidates.json: "
                   "bench/plan_check.sh)");

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

  if (*traceCmd) return gsl::runtime::traceSummary(summaryFile, summaryOptions, std::cout, std::cerr);
  if (*plan) {
    gsl::runtime::PlanSearchOptions po;
    po.file = planC.file;
    po.frontend.np = planC.np;
    po.frontend.importPath = gsl::frontend::defaultImportPath();
    if (!parseDefines(planC, po.frontend)) return 2;
    po.autocast = planC.autocast == "bf16";
    po.remat = planC.remat;
    po.updateSharding = !planC.noUpdateSharding;
    po.mpi = planMpi;
    po.keepMesh = planKeepMesh;
    po.exhaustive = planExhaustive;
    po.keepCandidates = !planCandidates.empty();
    po.only = planFn;
    if (!planMaxMemory.empty()) {
      auto v = gsl::runtime::parseByteSize(planMaxMemory);
      if (!v) {
        std::cerr << "gsl: usage error: --max-memory expects a size such as 512M or 8G, got '" << planMaxMemory
                  << "'\n";
        return 2;
      }
      po.maxMemory = *v;
    }
    po.machine = machineModel(planMpi);
    const gsl::runtime::PlanResult r = gsl::runtime::searchPlan(po);
    if (!r.ok) {
      std::cerr << (r.error.find(": error: ") != std::string::npos ? r.error : "gsl: error: " + r.error + "\n");
      return 1;
    }
    gsl::runtime::printPlan(r, po, std::cout);
    if (!planWrite.empty()) {
      std::ofstream out(planWrite);
      out << r.text;
      if (!out.flush()) {
        std::cerr << "gsl: error: cannot write " << planWrite << "\n";
        return 1;
      }
      std::cout << "wrote " << planWrite << "\n";
    }
    if (!planCandidates.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(planCandidates, ec);
      nlohmann::ordered_json index = nlohmann::ordered_json::array();
      for (size_t i = 0; i < r.candidates.size(); ++i) {
        const auto& c = r.candidates[i];
        char name[32];
        std::snprintf(name, sizeof name, "plan_%03zu.gsl", i);
        std::ofstream(planCandidates + "/" + name) << c.text;
        index.push_back({{"file", name},
                         {"ok", c.score.ok},
                         {"chosen", c.chosen},
                         {"predicted_seconds", c.score.seconds},
                         {"bytes_sent", c.score.bytesSent},
                         {"memory_bytes", c.score.memoryBytes}});
      }
      std::ofstream out(planCandidates + "/candidates.json");
      out << index.dump(1) << "\n";
      if (!out.flush()) {
        std::cerr << "gsl: error: cannot write " << planCandidates << "/candidates.json\n";
        return 1;
      }
      std::cout << "wrote " << r.candidates.size() << " plans to " << planCandidates << "\n";
    }
    return 0;
  }
  if (*calibrate) {
    if (calibrateO.dir.empty()) calibrateO.dir = gsl::passes::machineModelDir(gsl::backend::defaultCompileCacheDir());
    if (calibrateO.dir.empty()) {
      std::cerr << "gsl: usage error: no directory for machine.json (neither XDG_CACHE_HOME nor HOME is set): give --dir\n";
      return 2;
    }
    // The ranks mpirun started (launchMpirun drops --mpi from their command line).
    if (gsl::runtime::MpiSession::launchedByMpirun()) return gsl::runtime::calibrateMpiRank(calibrateO, std::cout);
    if (!calibrateMpi) return gsl::runtime::calibrateThreads(calibrateO, std::cout);
    gsl::runtime::MpiLaunchOptions lo;
    lo.np = calibrateO.np;
    std::vector<std::string> revArgs = originalArgs;
    if (calibrate->get_option("--dir")->count() == 0) {  // the ranks write where this process would
      revArgs.insert(revArgs.begin(), "--dir");  // revArgs is reversed: "--dir DIR" at the end
      revArgs.insert(revArgs.begin(), calibrateO.dir);
    }
    return launchMpirun(revArgs, lo);
  }
  if (*repl) {
    gsl::frontend::Options o;
    if (!parseDefines(replC, o)) return 2;
    if (!o.floatDefines.empty()) {
      std::cerr << "gsl: usage error: -D " << o.floatDefines.begin()->first
                << ": the REPL takes integer -D values only (declare the float const in the session)\n";
      return 2;
    }
    gsl::repl::ReplOptions ro;
    ro.file = replC.file;
    ro.np = replC.np;
    ro.defines = o.defines;
    ro.echo = replEcho;
    return gsl::repl::runRepl(ro);
  }
  // The command line's words, parsed once into the compiler's types (CLI11
  // has checked their spelling).
  using gsl::passes::EmitKind;
  const std::optional<EmitKind> emitKind = gsl::passes::parseEmitKind(emit);
  const gsl::runtime::Engine engineKind = engine == "interp" ? gsl::runtime::Engine::Interp : gsl::runtime::Engine::Jit;

  if (*compile && !emitKind && !stats && !timePasses) {
    std::cerr << "gsl: usage error: compile needs --emit ast|ir|sharded|spmd|llvm, --stats json or --time-passes\n";
    return 2;
  }
  gsl::SourceManager sm;
  gsl::Diagnostics diags(sm);
  int rc = 0;

  if (*run) {
    if (run->get_option("--stats")->count() > 0) {
      std::cerr << "gsl: usage error: --stats is an option of gsl compile, which prints the per-rank costs "
                   "without running: gsl compile FILE -np N --stats json\n";
      return 2;
    }
    if (run->get_option("--trace")->count() > 0) {
      std::string problem = gsl::runtime::traceFileProblem(tracePath);
      if (!problem.empty()) {
        std::cerr << "gsl: error: cannot write the trace file: " << problem << "\n";
        return 1;
      }
    }
    bool underMpirun = gsl::runtime::MpiSession::launchedByMpirun();
    // Ctrl-C: the ranks stop at their next safe point; a second one exits
    // at once (removing temp files). Ranks under mpirun get it as SIGUSR1
    // (runtime/MpiLaunch.h), handled from the start: the default action
    // would end the rank.
    if (underMpirun) {
      gsl::installInterruptHandler(SIGUSR1, "", 130);
      gsl::installInterruptHandler(SIGINT, "", 130);
    }
    // NP: under a bare mpirun or srun, the MPI world size unless -np says
    // otherwise (an error); with --host, its slot count unless -np is given.
    const bool npGiven = run->get_option("--np")->count() > 0;
    if (underMpirun) {
      int world = gsl::runtime::MpiSession::worldSize();
      if (npGiven && runC.np != world) {
        if (gsl::runtime::MpiSession::worldRank() == 0)  // once, not once per rank
          std::cerr << "gsl: usage error: -np " << runC.np << " disagrees with the MPI world size " << world
                  << " (the ranks mpirun or srun started); leave out -np or give -np " << world << "\n";
        return 2;
      }
      runC.np = world;
    }
    gsl::runtime::MpiLaunchOptions lo;
    if (mpi && !underMpirun) {
      if (!hostList.empty()) {
        auto slots = gsl::runtime::hostListSlots(hostList);
        if (!slots) {
          std::cerr << "gsl: usage error: --host expects HOST[:SLOTS],... such as a:4,b:4, got '" << hostList << "'\n";
          return 2;
        }
        if (!npGiven) runC.np = *slots;
      }
      if (!hostfile.empty() && !npGiven) {
        std::cerr << "gsl: usage error: --hostfile needs -np N (how many ranks to start)\n";
        return 2;
      }
      auto words = gsl::runtime::splitMpirunArgs(mpirunArgs);
      if (!words) {
        std::cerr << "gsl: usage error: --mpirun-args has an unterminated quote: " << mpirunArgs << "\n";
        return 2;
      }
      lo.np = runC.np;
      lo.hostfile = hostfile;
      lo.hosts = hostList;
      lo.mpirunArgs = *words;
    }
    const bool multiHost = !lo.hostfile.empty() || !lo.hosts.empty();
    gsl::runtime::RunOptions ro;
    ro.jit = gsl::backend::jitOptionsFromEnvironment();
    if (!memoryLimit(maxMemory, runC.np, ro)) return 2;
    auto prog = build(runC, sm, diags, rc);
    if (!prog) return rc;
    if (!prog->host.hasMain) {
      std::cerr << runC.file << ": error: the program has no fn main() to run\n";
      return 1;
    }
    ro.seed = seed;
    if (!checkpointEvery.empty()) {
      const std::string& n = checkpointEvery[0];
      char* end = nullptr;
      errno = 0;
      long long every = std::strtoll(n.c_str(), &end, 10);
      if (n.empty() || *end || errno || every < 1) {
        std::cerr << "gsl: usage error: --checkpoint-every takes a number of steps >= 1 and a path, got '" << n
                  << "'\n";
        return 2;
      }
      if (prog->module->optimizers.empty()) {
        std::cerr << "gsl: usage error: --checkpoint-every: the program does not train (it declares no optimizer)\n";
        return 2;
      }
      ro.checkpointEvery = every;
      ro.checkpointPath = checkpointEvery[1];
    }
    if (mpi && !underMpirun) {
      // Compile errors once, here, before any rank starts; on one host the
      // memory check too (on several, each rank checks its host's share).
      if (!multiHost) {
        gsl::Diagnostics rdiags(sm);
        bool fits = gsl::runtime::checkMemory(gsl::runtime::estimateMemory(*prog, ro), ro, rdiags);
        rdiags.print(std::cerr);
        if (!fits) return 1;
        setenv("GSL_MPI_MEMORY_CHECKED", "1", 1);  // the ranks see it (mpirun -x GSL_*)
      }
      return launchMpirun(originalArgs, lo);
    }
    if (underMpirun && gsl::runtime::underGslLauncher() && std::getenv("GSL_MPI_MEMORY_CHECKED"))
      ro.maxMemory = 0;  // checked before mpirun
    ro.engine = engineKind;
    ro.mpi = underMpirun;
    ro.resume = resume;
    ro.logPath = logPath;
    ro.tracePath = tracePath;
    {
      std::vector<std::string> files;  // the kernels' names in the map: FILE:LINE.OP...
      for (int i = 0; i < sm.numFiles(); ++i) files.push_back(std::filesystem::path(sm.name(i)).filename().string());
      gsl::backend::jitWritePerfMap(perfMap, std::move(files));
    }
    ro.progress = !noProgress;
    {
      gsl::backend::CompileCacheConfig cc;
      cc.enabled = !noCache && engineKind == gsl::runtime::Engine::Jit;
      cc.dir = cacheDir.empty() ? gsl::backend::defaultCompileCacheDir() : cacheDir;
      if (const char* m = std::getenv("GSL_CACHE_MAX")) {
        auto bytes = gsl::backend::parseCacheSize(m);
        if (!bytes) {
          std::cerr << "gsl: usage error: GSL_CACHE_MAX must be a size such as 512M or 2G, got '" << m << "'\n";
          return 2;
        }
        cc.maxBytes = *bytes;
      }
      // A testing knob: entries of another gsl version must miss.
      if (const char* v = std::getenv("GSL_CACHE_VERSION")) cc.version = v;
      gsl::backend::setCompileCacheConfig(cc);
    }
    std::string lastCheckpoint;
    ro.lastCheckpoint = &lastCheckpoint;
    if (!underMpirun) gsl::installInterruptHandler(SIGINT, "gsl: interrupted\n", 130);
    gsl::Diagnostics rdiags(sm);
    bool ok = false;
    try {
      ok = gsl::runtime::runMain(*prog, ro, rdiags);
    } catch (const gsl::Interrupted&) {
      rdiags.print(std::cerr);
      // Under gsl's launcher the ranks end normally (no mpirun error
      // report); the launcher sees rank 0's line and exits 130.
      bool rank0 = !underMpirun || std::getenv("OMPI_COMM_WORLD_RANK") == nullptr ||
                   std::string(std::getenv("OMPI_COMM_WORLD_RANK")) == "0";
      if (rank0) std::cerr << "gsl: interrupted" << std::endl;
      // A training run: where to --resume from, or that there is nothing.
      if (rank0 && !prog->module->optimizers.empty()) {
        if (lastCheckpoint.empty())
          std::cerr << "gsl: note: this run wrote no checkpoint (--checkpoint-every N PATH, or save_checkpoint(path) "
                       "in the training loop, writes one to --resume from)"
                    << std::endl;
        else
          std::cerr << "gsl: note: the last checkpoint written is " << lastCheckpoint << " (--resume "
                    << lastCheckpoint << " continues from it)" << std::endl;
      }
      return underMpirun && gsl::runtime::underGslLauncher() ? 0 : 130;
    }
    rdiags.print(std::cerr);
    if (cacheStats) {
      // One line per process, written at once (MPI ranks share stderr),
      // naming the rank under mpirun.
      gsl::backend::JitCacheStats st = gsl::backend::jitCacheStats();
      const char* mpiRank = underMpirun ? std::getenv("OMPI_COMM_WORLD_RANK") : nullptr;
      const std::string line = std::string("gsl: compile cache") + (mpiRank ? std::string(" (rank ") + mpiRank + ")" : "") +
                               ": " + std::to_string(st.loaded) + " loaded, " + std::to_string(st.compiled) +
                               " compiled, " + std::to_string(st.rebuilt) + " rebuilt\n";
      std::cerr << std::flush;
      std::fputs(line.c_str(), stderr);
      std::fflush(stderr);
    }
    return ok ? 0 : 1;
  }
  if (*check) {
    auto prog = build(checkC, sm, diags, rc);
    // One line on success, so a clean check is visibly a check that ran.
    if (prog) std::cout << checkC.file << ": ok at -np " << checkC.np << " (no errors)\n";
    return rc;
  }
  if (*compile) {
    if (!printAfter.passes.empty()) printAfter.os = &std::cerr;
    // --time-passes: this thread's passes and compiles are timed into `timed`.
    gsl::trace::Recorder timed;
    const int64_t timeStart = gsl::trace::nowNs();
    if (timePasses) gsl::trace::current = &timed;
    auto prog = build(compileC, sm, diags, rc, &printAfter);
    if (!prog) {
      gsl::trace::current = nullptr;
      return rc;
    }
    gsl::ir::Module& mod = *prog->module;
    if (timePasses) {
      if (!fn.empty() && !mod.findFunction(fn)) {
        gsl::trace::current = nullptr;
        std::cerr << "gsl: error: no function '" << fn << "' in " << compileC.file << "\n";
        return 1;
      }
      const gsl::backend::JitOptions jitOptions = gsl::backend::jitOptionsFromEnvironment();
      for (auto& f : mod.functions) {
        if (!fn.empty() && f->name != fn) continue;
        auto copy = f->clone();
        auto local = gsl::passes::buildPerRankProgram(mod, *copy, false);
        gsl::backend::jitCompile(*local, jitOptions);
      }
      gsl::trace::current = nullptr;
      std::cerr << gsl::runtime::compileTimeReport(timed, gsl::trace::nowNs() - timeStart);
      if (!emitKind && !stats) return 0;
    }
    if (emitKind == EmitKind::Ast) {
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
    if (stats || emitKind == EmitKind::Sharded || emitKind == EmitKind::Spmd || emitKind == EmitKind::Llvm) {
      for (auto& f : mod.functions) {
        auto copy = f->clone();
        perRank.push_back(gsl::passes::buildPerRankProgram(mod, *copy, false, &printAfter));
        if (emitKind == EmitKind::Sharded) f = std::move(copy);
      }
    }
    if (stats) {
      gsl::runtime::RunOptions ro;
      ro.jit = gsl::backend::jitOptionsFromEnvironment();
      ro.mpi = statsMpi;
      ro.machine = machineModel(statsMpi);
      std::cout << statsJson(mod, perRank, prog->userFunctions, fn, ro.jit, gsl::runtime::estimateMemory(*prog, ro),
                             ro.machine)
                       .dump(2)
                << "\n";
      return 0;
    }
    if (emitKind == EmitKind::Llvm) {
      // The optimised LLVM IR of each per-rank program, as the JIT compiles it.
      const gsl::backend::JitOptions jitOptions = gsl::backend::jitOptionsFromEnvironment();
      for (auto& f : perRank)
        if (selected(*f)) std::cout << gsl::backend::jitEmitLLVM(*f, true, jitOptions) << "\n";
      return 0;
    }
    if (emitKind == EmitKind::Spmd) {
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
