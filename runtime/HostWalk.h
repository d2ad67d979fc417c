// The one walk over a host script (`fn main`), shared by the run
// (runtime/HostRunner.cpp RankRunner), the memory estimate before it and the
// REPL's shardings of host variables (repl/Inputs.cpp, repl/Views.cpp).
//
// All three resolve a thunk's inputs the same way: a variable lies as the
// value it holds, `load` as its annotation, `opt.minimize(...)` as the
// training step's loss (its aux outputs as the step's other results),
// everything else whole (replicated); and all three
// get the thunk's per-rank program for those input shardings from one
// PerRankPrograms cache. HostWalker<V> holds that: the statements' dispatch,
// the variables' scopes and the inputs of a thunk. What a walker does with
// a thunk (run it, or only look at its program) and how it takes loops and
// branches (run them, or visit each body once) are its hooks.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "frontend/Frontend.h"
#include "ir/Module.h"
#include "support/Diagnostics.h"

namespace gsl::runtime {

// The per-rank programs of a module's thunks, built once per distinct
// input sharding (passes::buildPerRankProgram) and kept. Thread-safe: the
// ranks of a run share one.
class PerRankPrograms {
 public:
  explicit PerRankPrograms(const ir::Module& m) : mod_(m) {}
  const ir::Module& module() const { return mod_; }

  // The per-rank function of thunk `th` for inputs lying as `in`; with
  // `gather`, its results are made whole (replicated) on every rank.
  const ir::Function& perRank(const frontend::Thunk& th, const std::vector<std::optional<ir::Sharding>>& in,
                              bool gather);
  // A per-rank program that gathers the tensors `names` (of `types`, lying
  // as `shardings`) whole: a checkpoint's save.
  const ir::Function& gatherProgram(const std::vector<std::string>& names, const std::vector<ir::TensorType>& types,
                                    const std::vector<std::optional<ir::Sharding>>& shardings);

 private:
  // Which program: a thunk's function (or the gathered tensors' names),
  // whether results are gathered, and how the inputs lie; ordered by value.
  struct Key {
    std::string fn;
    std::vector<std::string> names;
    bool gather = false;
    std::vector<std::optional<ir::Sharding>> in;
    bool operator<(const Key& o) const;
  };
  const ir::Module& mod_;
  std::mutex mu_;
  std::map<Key, std::unique_ptr<ir::Function>> cache_;
};

// A copy of thunk `th`'s function as it is partitioned for inputs lying
// as `in`: its arguments lie as given (extra ones, training states, as the
// expansion declared them; whole where nothing says otherwise), and a
// training step's new params and states come back lying as they are stored.
std::unique_ptr<ir::Function> thunkForInputs(const frontend::Thunk& th,
                                             const std::vector<std::optional<ir::Sharding>>& in);

// How a host input lies, for every leaf but a variable, a batch and a
// training step: `load` as annotated, the rest (exists, start_step) whole.
// A batch lies as the thunk that takes it wants it (ir::Function::wantedSharding): its
// two halves are made (read from the file, generated) when a thunk takes
// them, this rank's block only.
inline std::optional<ir::Sharding> leafSharding(const frontend::HostLeaf& l) {
  return l.kind == frontend::HostLeaf::Load ? l.sharding : std::nullopt;
}

// Whether thunk `th` is `let (x, y) = batch(data, step)`: it passes on its
// two batch leaves as they are (the walk keeps them unmade).
bool isBatchLet(const frontend::Thunk& th);

// V: a host value; it has `std::optional<ir::Sharding> sharding`.
template <class V>
class HostWalker {
 public:
  virtual ~HostWalker() = default;

 protected:
  using HostStmt = frontend::HostStmt;
  using HostLeaf = frontend::HostLeaf;
  using Thunk = frontend::Thunk;

  std::vector<std::map<std::string, V>> scopes_{1};

  // Hooks. A leaf other than a variable (leafSharding says how it lies;
  // a training step's loss lies as the step's first result).
  virtual V leaf(const HostLeaf& l) = 0;
  // Thunk `th` on inputs `in` (lying as their shardings); with `gather`,
  // its results whole.
  virtual std::vector<V> call(const Thunk& th, const std::vector<V>& in, bool gather) = 0;
  virtual void forLoop(const HostStmt& s) = 0;
  virtual void ifElse(const HostStmt& s) = 0;
  virtual void print(const HostStmt& s) = 0;
  virtual void save(const HostStmt& s) = 0;
  virtual void saveCheckpoint(const HostStmt& s) = 0;
  // load_checkpoint(path): sets the params; nothing to walk without running.
  virtual void loadCheckpoint(const HostStmt&) {}
  // log_metric(name, value): its value, whole.
  virtual void logMetric(const HostStmt& s) { eval(s.value, true); }
  // log_moe(name, stats): its value, whole.
  virtual void logMoe(const HostStmt& s) { eval(s.value, true); }
  virtual void beforeStatement(const HostStmt&) {}

  void block(const std::vector<HostStmt>& b) {
    for (const auto& s : b) stmt(s);
  }

  void stmt(const HostStmt& s) {
    beforeStatement(s);
    switch (s.kind) {
      case HostStmt::Let: {
        auto vals = eval(s.value, false);
        for (size_t i = 0; i < s.names.size() && i < vals.size(); ++i) scopes_.back()[s.names[i]] = vals[i];
        break;
      }
      case HostStmt::Assign: {
        auto vals = eval(s.value, false);
        V* v = lookup(s.names[0]);
        GSL_ASSERT(v, "assignment to unknown host variable '" + s.names[0] + "'");
        if (!vals.empty()) *v = vals[0];
        break;
      }
      case HostStmt::For: forLoop(s); break;
      case HostStmt::If: ifElse(s); break;
      case HostStmt::Print: print(s); break;
      case HostStmt::Save: save(s); break;
      case HostStmt::Eval: eval(s.value, false); break;
      case HostStmt::SaveCheckpoint: saveCheckpoint(s); break;
      case HostStmt::LoadCheckpoint: loadCheckpoint(s); break;
      case HostStmt::LogMetric: logMetric(s); break;
      case HostStmt::LogMoe: logMoe(s); break;
    }
  }

  V* lookup(const std::string& n) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(n);
      if (f != it->end()) return &f->second;
    }
    return nullptr;
  }

  // The value of an input of a thunk.
  V input(const HostLeaf& l) {
    if (l.kind != HostLeaf::Var) return leaf(l);
    V* v = lookup(l.name);
    GSL_ASSERT(v, "host variable '" + l.name + "' has no value");
    return *v;
  }
  std::vector<V> inputs(const Thunk& th) {
    std::vector<V> in;
    for (const auto& l : th.leaves) in.push_back(input(l));
    return in;
  }
  static std::vector<std::optional<ir::Sharding>> shardingsOf(const std::vector<V>& vs) {
    std::vector<std::optional<ir::Sharding>> r;
    for (const V& v : vs) r.push_back(v.sharding);
    return r;
  }
  std::vector<V> eval(const Thunk& th, bool gather) { return call(th, inputs(th), gather); }
};

// What the walk without running knows of a host value: its (whole) type,
// how it lies, and the thunk result it came from.
struct WalkedValue {
  ir::TensorType type;
  std::optional<ir::Sharding> sharding;                // none: whole
  const frontend::Thunk* thunk = nullptr;              // none: a loop variable or a leaf
  int result = 0;                                      // which result of `thunk`
  std::vector<std::optional<ir::Sharding>> inputs;     // how its leaves lay
  bool batch = false;  // a batch half not made yet: it lies as its taker wants
};

// The walk without running (the memory estimate, the REPL): statements in
// order, each loop body once, both branches of an if; every thunk's
// per-rank program is built for the shardings the run would give its
// inputs (host variables keep the sharding of the result they hold).
class ShardingWalk : public HostWalker<WalkedValue> {
 public:
  explicit ShardingWalk(PerRankPrograms& programs) : programs_(programs) {}
  // Walks `body`; returns every variable it binds (inner scopes included:
  // the last binding of a name wins).
  const std::map<std::string, WalkedValue>& walk(const std::vector<HostStmt>& body);

 protected:
  // Every thunk, with the per-rank program built for it from inputs lying
  // as `in`; `step` for a training step (its arguments after the thunk's
  // own: the step counter and the optimizer states).
  virtual void visit(const Thunk& th, const ir::Function& perRank, bool step,
                     const std::vector<std::optional<ir::Sharding>>& in) {
    (void)th, (void)perRank, (void)step, (void)in;
  }
  PerRankPrograms& programs_;

 private:
  // The per-rank program of each training step walked last (its aux
  // outputs' leaves come right after its loss's).
  std::map<const Thunk*, const ir::Function*> steps_;
  WalkedValue leaf(const HostLeaf& l) override;
  std::vector<WalkedValue> call(const Thunk& th, const std::vector<WalkedValue>& in, bool gather) override;
  void forLoop(const HostStmt& s) override;
  void ifElse(const HostStmt& s) override;
  void print(const HostStmt& s) override;
  void save(const HostStmt& s) override;
  void saveCheckpoint(const HostStmt&) override {}
};

}  // namespace gsl::runtime
