#include "runtime/HostWalk.h"

#include <algorithm>
#include <tuple>

#include "passes/Pipeline.h"

namespace gsl::runtime {

using ir::Sharding;

// ------------------------------------------------------------------ PerRankPrograms

namespace {

auto fields(const Sharding& s) { return std::tie(s.mesh, s.dims, s.partial); }

bool lessSharding(const std::optional<Sharding>& a, const std::optional<Sharding>& b) {
  if (!a || !b) return !a && b;
  return fields(*a) < fields(*b);
}

}  // namespace

bool PerRankPrograms::Key::operator<(const Key& o) const {
  if (std::tie(fn, names, gather) != std::tie(o.fn, o.names, o.gather))
    return std::tie(fn, names, gather) < std::tie(o.fn, o.names, o.gather);
  return std::lexicographical_compare(in.begin(), in.end(), o.in.begin(), o.in.end(), lessSharding);
}

const ir::Function& PerRankPrograms::perRank(const frontend::Thunk& th,
                                             const std::vector<std::optional<Sharding>>& in, bool gather) {
  Key key{th.fn->name, {}, gather, in};
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cache_.find(key);
  if (it != cache_.end()) return *it->second;
  auto f = thunkForInputs(th, in);
  auto local = passes::buildPerRankProgram(mod_, *f, gather);
  return *(cache_[std::move(key)] = std::move(local));
}

std::unique_ptr<ir::Function> thunkForInputs(const frontend::Thunk& th,
                                             const std::vector<std::optional<Sharding>>& in) {
  auto f = th.fn->clone();
  // Inputs lie as given; extra arguments (training states) as the
  // expansion declared them; whole where nothing says otherwise.
  for (size_t i = 0; i < f->args.size(); ++i) {
    if (i < in.size()) f->args[i]->sharding = in[i];
    if (!f->args[i]->sharding) f->args[i]->sharding = Sharding::replicated("", f->args[i]->type.rank());
  }
  // A training step's new params and states must come back lying as they
  // are stored (their declared sharding, else whole); its aux outputs, last,
  // lie as propagation chooses.
  if (f->train && f->train->kind == ir::TrainRequest::Minimize)
    for (size_t k = 1; k + f->train->aux < f->results.size(); ++k)
      if (!f->resultShardings[k]) f->resultShardings[k] = Sharding::replicated("", f->results[k]->type.rank());
  return f;
}

const ir::Function& PerRankPrograms::gatherProgram(const std::vector<std::string>& names,
                                                   const std::vector<ir::TensorType>& types,
                                                   const std::vector<std::optional<Sharding>>& shardings) {
  Key key{"", names, true, shardings};
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cache_.find(key);
  if (it != cache_.end()) return *it->second;
  ir::Function g;
  g.name = "checkpoint";
  for (size_t i = 0; i < types.size(); ++i) {
    ir::Value* a = g.addArg(types[i]);
    a->sharding = shardings[i] ? shardings[i] : Sharding::replicated("", types[i].rank());
    g.results.push_back(a);
  }
  auto local = passes::buildPerRankProgram(mod_, g, true);
  return *(cache_[std::move(key)] = std::move(local));
}

bool isBatchLet(const frontend::Thunk& th) {
  if (th.leaves.size() != 2 || th.fn->results.size() != 2) return false;
  for (size_t i = 0; i < 2; ++i)
    if (th.leaves[i].kind != frontend::HostLeaf::Batch || th.fn->results[i] != th.fn->args[i]) return false;
  return true;
}

// ------------------------------------------------------------------ ShardingWalk

namespace {
// Batch halves taken by thunk `fn`: as it wants them.
void placeBatches(const ir::Function& fn, std::vector<WalkedValue>& in) {
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i].batch) {
      in[i].sharding = fn.wantedSharding(i);
      in[i].batch = false;
    }
}
}  // namespace

const std::map<std::string, WalkedValue>& ShardingWalk::walk(const std::vector<HostStmt>& body) {
  block(body);
  return scopes_.front();
}

WalkedValue ShardingWalk::leaf(const HostLeaf& l) {
  switch (l.kind) {
    case HostLeaf::Batch: {
      eval(*l.sub, true);  // the step number, whole
      return {l.type, std::nullopt, nullptr, 0, {}, true};
    }
    case HostLeaf::Minimize: {
      const Thunk& st = *l.sub;
      if (l.index > 0) {  // an aux output of the step its loss leaf (index 0) just walked
        auto it = steps_.find(&st);
        GSL_ASSERT(it != steps_.end(), "an aux output of a training step before its loss");
        const ir::Function& f = *it->second;
        const size_t r = f.resultShardings.size() - st.fn->train->aux + (size_t)(l.index - 1);
        return {l.type, f.resultShardings[r], nullptr, 0, {}, false};
      }
      std::vector<WalkedValue> in = inputs(st);
      placeBatches(*st.fn, in);
      const auto shardings = shardingsOf(in);
      const ir::Function& f = programs_.perRank(st, shardings, false);
      steps_[&st] = &f;
      visit(st, f, true, shardings);
      return {l.type, f.resultShardings[0], nullptr, 0, {}, false};
    }
    case HostLeaf::Evaluate: {
      // The loss on one validation batch, whole: its leaves are the
      // batch's two halves, as it wants them.
      const Thunk& st = *l.sub;
      std::vector<WalkedValue> in;
      for (const HostLeaf& lf : st.leaves) in.push_back({lf.type, std::nullopt, nullptr, 0, {}, true});
      placeBatches(*st.fn, in);
      const auto shardings = shardingsOf(in);
      visit(st, programs_.perRank(st, shardings, true), false, shardings);
      return {l.type, std::nullopt, nullptr, 0, {}, false};
    }
    default: break;
  }
  return {l.type, leafSharding(l), nullptr, 0, {}, false};
}

std::vector<WalkedValue> ShardingWalk::call(const Thunk& th, const std::vector<WalkedValue>& given, bool gather) {
  if (isBatchLet(th)) return given;
  std::vector<WalkedValue> in = given;
  placeBatches(*th.fn, in);
  std::vector<std::optional<Sharding>> shardings = shardingsOf(in);
  const ir::Function& f = programs_.perRank(th, shardings, gather);
  visit(th, f, false, shardings);
  std::vector<WalkedValue> out;
  for (size_t i = 0; i < f.resultShardings.size() && i < th.fn->results.size(); ++i)
    out.push_back({th.fn->results[i]->type, f.resultShardings[i], &th, (int)i, shardings, false});
  return out;
}

void ShardingWalk::forLoop(const HostStmt& s) {
  eval(s.lo, true);
  eval(s.hi, true);
  scopes_.back()[s.names[0]] = {ir::TensorType{ir::DType::I32, {}}, std::nullopt, nullptr, 0, {}, false};
  block(s.body);
}

void ShardingWalk::ifElse(const HostStmt& s) {
  eval(s.cond, true);
  block(s.body);
  block(s.elseBody);
}

void ShardingWalk::print(const HostStmt& s) {
  for (const auto& a : s.printArgs)
    if (a.value) eval(*a.value, true);
}

void ShardingWalk::save(const HostStmt& s) { eval(s.value, true); }

}  // namespace gsl::runtime
