#include "passes/LoopPartition.h"

#include "ir/Loop.h"
#include "passes/SpmdPartitioner.h"
#include "support/Diagnostics.h"

namespace gsl::passes {

using namespace ir;

namespace {

// The normal form (ir/Sharding.h) without partial axes.
Sharding decidedOf(const std::optional<Sharding>& s, int rank) {
  Sharding t = normalForm(s, rank);
  t.partial.clear();
  return t;
}

}  // namespace

void partitionLoop(const Module& m, partitioner::Partitioner& b, const Op& op) {
  const LoopInfo info(op);
  const Function& body = *op.body;
  // How each body argument lies: carried values keep one sharding in every
  // iteration (their argument's, the fixed point of propagation), the
  // invariants theirs; the index is a replicated scalar.
  std::unique_ptr<Function> g = body.clone();
  std::vector<Sharding> argS;
  for (size_t k = 0; k < op.operands.size(); ++k) {
    Value* a = g->args[k + 1];
    argS.push_back(decidedOf(a->sharding, a->type.rank()));
    a->sharding = annotationOf(argS.back());
  }
  g->args[0]->sharding = std::nullopt;
  g->resultShardings.assign(g->results.size(), std::nullopt);
  std::vector<Sharding> outS;  // per-iteration outputs (rows)
  for (size_t j = 0; j < g->results.size(); ++j) {
    Sharding s = j < info.carried ? argS[j] : decidedOf(g->results[j]->sharding, g->results[j]->type.rank());
    // The partitioner reads mesh "" in resultShardings as replicated.
    g->resultShardings[j] = s.mesh.empty() ? Sharding::replicated("", g->results[j]->type.rank()) : s;
    if (j >= info.carried) outS.push_back(s);
  }
  std::unique_ptr<Function> local = partitionFunction(m, *g);

  std::vector<Value*> operands;
  for (size_t k = 0; k < op.operands.size(); ++k)
    operands.push_back(b.reshard(b.local(op.operands[k]), argS[k]).v);
  std::vector<TensorType> types;
  for (size_t j = 0; j < local->results.size(); ++j) {
    TensorType t = local->results[j]->type;
    if (j >= info.carried) t.shape.insert(t.shape.begin(), info.trip);
    types.push_back(t);
  }
  Op* l = b.emitLoop(std::move(operands), op.attrs, types, std::move(local));
  std::vector<partitioner::LocalValue> results;
  for (size_t j = 0; j < l->results.size(); ++j) {
    Sharding s;
    if (j < info.carried) {
      s = argS[j];
    } else {
      s = outS[j - info.carried];
      if (s.mesh.empty()) s = Sharding::replicated("", op.results[j]->type.rank());
      else s.dims.insert(s.dims.begin(), std::vector<std::string>{});
    }
    results.push_back(b.tag({l->results[j], s}));
  }
  b.setResults(std::move(results));
}

}  // namespace gsl::passes
