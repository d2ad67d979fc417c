// What one rank holds of the model between host statements: its blocks
// of the params, what training keeps (optimizer states, step counters),
// and the engine that runs its per-rank programs on them. The host-script
// runner (runtime/HostRunner.cpp) owns one; a training step
// (runtime/TrainingStep.h) and the checkpoints (runtime/HostCheckpoint.h)
// read and replace its parts.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "backend/Engine.h"
#include "backend/jit/JitEngine.h"
#include "runtime/Batches.h"
#include "runtime/Host.h"
#include "runtime/SpmdProgram.h"

namespace gsl::runtime {

// What training keeps on a rank: the optimizer states ("optimizer/opt/
// param/slot" -> this rank's block), step counters per optimizer, and the
// whole states --resume read (sliced when the step that uses them is built).
struct TrainingState {
  std::map<std::string, HostValue> states;
  std::map<std::string, ir::TensorType> stateTypes;  // each state's whole type
  std::map<std::string, int64_t> steps;
  std::map<std::string, backend::Tensor> resumed;  // whole; kept by every later save (none is dropped)
  int64_t startStep = 0;                           // start_step(): the last step --resume read

  static std::string stateKey(const std::string& opt, const std::string& param, const std::string& slot) {
    return "optimizer/" + opt + "/" + param + "/" + slot;
  }
};

struct RankModel {
  // Rank `rank`'s blocks of the params as initialised (SpmdProgram), and
  // its engine (opts.engine) running on `comm`.
  RankModel(SpmdProgram& p, const RunOptions& o, int r, backend::Communicator& comm) : prog(p), rank(r) {
    const ir::Module& m = p.module();
    for (const auto& param : m.params) params[param.name] = p.localParam(param, r);
    backend::KernelContext ctx;
    ctx.seed = o.seed;
    ctx.rank = r;
    ctx.comm = &comm;
    ctx.param = [this](const std::string& n) -> const backend::Tensor& { return params.at(n); };
    ctx.mesh = [&m](const std::string& n) -> const ir::Mesh& { return *m.findMesh(n); };
    engine = o.engine == Engine::Jit ? backend::makeJitEngine(ctx, o.jit) : backend::makeInterpreterEngine(ctx);
  }
  RankModel(const RankModel&) = delete;
  RankModel& operator=(const RankModel&) = delete;

  SpmdProgram& prog;
  int rank;
  std::map<std::string, backend::Tensor> params;
  std::unique_ptr<backend::Engine> engine;
  TrainingState training;
};

}  // namespace gsl::runtime
