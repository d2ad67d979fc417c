// The programs of the session: :spmd (a function's or the training
// step's per-rank program, collectives marked), :cost (its per-rank
// costs, its loops' per iteration), :ir (the global IR) and :llvm (the
// LLVM IR the JIT makes of a per-rank program).
#include "repl/Session.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "ir/Loop.h"
#include "ir/Printer.h"
#include "passes/CostModel.h"
#include "repl/CallPaths.h"
#include "repl/Explain.h"
#include "repl/Lookup.h"
#include "repl/MoeLayers.h"
#include "repl/Text.h"

#if defined(GSL_REPL_HAVE_JIT) && __has_include("backend/jit/JitEngine.h")
#include "backend/jit/JitEngine.h"
#define GSL_REPL_JIT 1
#endif

namespace gsl::repl {

bool Session::program(const std::string& fn, Program& p) {
  Build* b = current();
  if (!b) return false;
  const Build* sb = nullptr;
  if (fn == "step" && !b->prog->module->findFunction(fn) && !isFunctionDecl(*b, fn)) {
    const Step* st = step(&sb);
    if (!st) {
      error("fn main runs no opt.minimize(...): there is no training step (:cost step and :spmd step show it)");
      return false;
    }
    p = {sb, st->thunk->fn, st->perRank->clone(), stepTitle(*sb, *st)};
    return true;
  }
  ir::Function* f = userFunction(*b, fn, true);
  if (!f) return false;
  p = {b, f, perRank(*b->prog->module, *f), "fn " + fn};
  return true;
}

void Session::spmd(const std::string& fn) {
  Program p;
  if (!program(fn, p)) return;
  const Build* b = p.build;
  const ir::Module& mod = *b->prog->module;
  auto& local = p.local;
  out_ << "# per-rank program of " << (p.global->train ? p.title : fn) << " for np = " << mod.np
       << " (one program, run by every rank)\n";
  for (const auto& m : mod.meshes) out_ << "# " << m.str() << "\n";
  // The collectives, from the ops; their lines of the printed program are
  // marked by the values they define.
  std::string text = ir::printFunction(*local);  // numbers the values
  // Collectives in loop bodies (at any depth) are marked too and counted
  // apart: they run once per iteration.
  std::map<std::string, int> count, inLoops;
  std::set<std::string> marked;
  std::function<void(const ir::Function&, bool)> mark = [&](const ir::Function& g, bool inLoop) {
    for (const auto& op : g.ops) {
      if (op->info().volume) {  // the collectives that communicate (op table)
        ++(inLoop ? inLoops : count)[op->info().mnemonic];
        marked.insert("%" + std::to_string(op->result->id) + " = ");
      }
      if (op->body) mark(*op->body, true);
    }
  };
  mark(*local, false);
  std::istringstream lines(text);
  for (std::string l; std::getline(lines, l);) {
    size_t st = l.find_first_not_of(' '), eq = l.find(" = ");
    bool coll = st != std::string::npos && eq != std::string::npos && eq > st &&
                marked.count(l.substr(st, eq + 3 - st)) > 0;
    if (color_) out_ << (coll ? paint(l, "1;33") : l) << "\n";
    else out_ << (coll ? ">> " : "   ") << l << "\n";
  }
  if (count.empty() && inLoops.empty()) out_ << "# no collectives: every rank computes on its own blocks\n";
  else {
    out_ << "# collectives:";
    for (const auto& [k, n] : count) out_ << " " << n << " " << k;
    if (!inLoops.empty()) {
      out_ << (count.empty() ? "" : ";") << " in loop bodies, each iteration:";
      for (const auto& [k, n] : inLoops) out_ << " " << n << " " << k;
      out_ << " (:cost counts them per iteration x trip count)";
    }
    out_ << "\n";
  }
  out_ << pipelineText(pipelineLoops(mod, *p.global, *local), p.global->train ? "step" : "call", "# ");
}

void Session::cost(const std::string& fn) {
  Program p;
  if (!program(fn, p)) return;
  const Build* b = p.build;
  const ir::Function* f = p.global;
  const ir::Module& mod = *b->prog->module;
  auto& local = p.local;
  passes::Cost c = passes::estimateCost(mod, *local, machine_);
  out_ << p.title << ", per rank (np = " << mod.np << "):\n" << costTable({&c}, {""});
  // A training step: what it holds per rank, as `gsl compile --stats
  // json`'s "training" counts it (states as the step's arguments lie, split
  // over the data axes by weight-update sharding or FSDP).
  if (f->train && f->train->kind == ir::TrainRequest::Minimize && local->args.size() >= f->train->states.size()) {
    const ir::TrainRequest& tr = *f->train;
    uint64_t params = 0, grads = 0, states = 0;
    for (const auto& q : mod.params)
      params += (uint64_t)ir::TensorType{q.type.dtype, ir::localShape(mod, q.type, q.sharding)}.byteSize();
    for (size_t i = 1; i <= tr.params.size() && i < local->results.size(); ++i)
      grads += (uint64_t)local->results[i]->type.byteSize();
    for (size_t k = local->args.size() - tr.states.size(); k < local->args.size(); ++k)
      states += (uint64_t)local->args[k]->type.byteSize();
    out_ << "  training memory: params " << thousands(params) << " B, gradients " << thousands(grads)
         << " B, optimizer states " << thousands(states) << " B (weight-update sharding "
         << (mod.updateSharding ? "on" : "off") << ")\n";
  }
  // Its pipelines: schedule, shifts, bubble.
  out_ << pipelineText(pipelineLoops(mod, *f, *local), f->train ? "step" : "call", "");
  // Its loops: the totals above count each body once per iteration.
  std::vector<const ir::Op*> loops, named;
  collectLoops(*local, loops);
  collectLoops(*f, named);
  std::map<const ir::Op*, const ir::Op*> parentOf;  // a loop in a loop body -> that loop
  std::function<void(const ir::Function&, const ir::Op*)> parents = [&](const ir::Function& g, const ir::Op* p) {
    for (const auto& op : g.ops)
      if (op->body) {
        parentOf[op.get()] = p;
        parents(*op->body, op.get());
      }
  };
  parents(*local, nullptr);
  auto nameOf = [&](size_t i) -> const ir::Op& {
    return i < named.size() && loops.size() == named.size() ? *named[i] : *loops[i];
  };
  for (size_t i = 0; i < loops.size(); ++i) {
    const ir::Op& loop = nameOf(i);
    std::string where = "included above";
    if (const ir::Op* p = parentOf[loops[i]]) {
      size_t pi = std::find(loops.begin(), loops.end(), p) - loops.begin();
      where = "included in each iteration of " + loopText(*b, nameOf(pi));
    }
    const int64_t trip = ir::LoopInfo(*loops[i]).trip;
    passes::Cost one = passes::estimateCost(mod, *loops[i]->body, machine_);
    passes::Cost all = one;
    all.flops *= (uint64_t)trip;
    all.gemmSeconds *= (double)trip;
    all.otherSeconds *= (double)trip;
    all.collectiveSeconds *= (double)trip;
    for (auto& [k, v] : all.collectives) v.calls *= (uint64_t)trip, v.bytes *= (uint64_t)trip;
    out_ << "inside " << loopText(*b, loop) << ", " << where << ": per iteration x " << trip << "\n"
         << costTable({&one, &all}, {"per iteration", "x " + std::to_string(trip)});
  }
  // Its MoE layers (a training step: those of its loss function's forward pass).
  int64_t forward = -1;
  if (f->train) {
    const ir::Function* lossFn = mod.findFunction(f->train->loss);
    forward = lossFn ? countMoeLayers(*lossFn) : 0;
  }
  out_ << moeLayersText(*b, mod, *f, *local, forward);
  out_ << machine_.describe();
}

void Session::ir(const std::string& fn) {
  Build* b = current();
  if (!b) return;
  ir::Module& m = *b->prog->module;
  if (!fn.empty()) {
    if (ir::Function* f = userFunction(*b, fn, true)) out_ << ir::printFunction(*f);
    return;
  }
  out_ << "np = " << m.np << "\n";
  for (const auto& mesh : m.meshes) out_ << mesh.str() << "\n";
  for (const auto& p : m.params) {
    out_ << "param @" << p.name << " : " << p.type.str();
    if (p.sharding) out_ << " " << p.sharding->str();
    out_ << " = " << p.init.str() << "\n";
  }
  for (const auto& name : b->prog->userFunctions)
    if (ir::Function* f = m.findFunction(name)) out_ << "\n" << ir::printFunction(*f);
}

void Session::llvm(const std::string& fn) {
#ifdef GSL_REPL_JIT
  Build* b = current();
  if (!b) return;
  ir::Function* f = userFunction(*b, fn, true);
  if (!f) return;
  auto local = perRank(*b->prog->module, *f);
  out_ << "; LLVM IR of the per-rank program of " << fn << " (np = " << b->prog->module->np << "), after O3\n"
       << backend::jitEmitLLVM(*local, true);
#else
  (void)fn;
  out_ << "the LLVM JIT is not available in this build (backend/jit is not built), so there is no LLVM IR to show\n";
#endif
}

}  // namespace gsl::repl
