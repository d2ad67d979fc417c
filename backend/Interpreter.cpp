#include "backend/Interpreter.h"

#include <cstring>
#include <limits>
#include <unordered_map>

#include "ir/Loop.h"
#include "support/Diagnostics.h"

namespace gsl::backend {

// Runs a loop op (ir/Loop.h) on its operands' values: the body once per
// iteration on (i, carried.., invariants..); per-iteration outputs are
// copied into row i of their stacked results.
static std::vector<Tensor> runLoop(const ir::Op& op, const std::vector<Tensor>& in,
                                   const KernelContext& ctx) {
  const ir::LoopInfo loop(op);
  std::vector<Tensor> args(in.size() + 1);
  for (size_t k = 0; k < in.size(); ++k) args[k + 1] = in[k];
  std::vector<Tensor> stacked;
  for (size_t m = 0; m < loop.outputs; ++m) stacked.emplace_back(op.results[loop.carried + m]->type);
  for (int64_t t = 0; t < loop.trip; ++t) {
    const int64_t i = loop.reverse ? loop.trip - 1 - t : t;
    args[0] = Tensor::scalarI32((int32_t)i);
    std::vector<Tensor> outs = interpret(*op.body, args, ctx);
    for (size_t j = 0; j < loop.carried; ++j) args[j + 1] = std::move(outs[j]);
    for (size_t m = 0; m < loop.outputs; ++m) {
      const Tensor& y = outs[loop.carried + m];
      if (y.size())
        std::memcpy(static_cast<char*>(stacked[m].raw()) + i * y.bytes(), y.raw(), y.bytes());
    }
  }
  std::vector<Tensor> results(args.begin() + 1, args.begin() + 1 + (std::ptrdiff_t)loop.carried);
  for (Tensor& s : stacked) results.push_back(std::move(s));
  return results;
}

std::vector<Tensor> interpret(const ir::Function& f, const std::vector<Tensor>& args,
                              const KernelContext& ctx) {
  GSL_ASSERT(args.size() == f.args.size(),
             "interpret: function '" + f.name + "' takes " + std::to_string(f.args.size()) +
                 " arguments, got " + std::to_string(args.size()));

  // Index of the last op reading each value; results are kept to the end.
  constexpr size_t kKeep = std::numeric_limits<size_t>::max();
  std::unordered_map<const ir::Value*, size_t> lastUse;
  for (size_t i = 0; i < f.ops.size(); ++i)
    for (const ir::Value* v : f.ops[i]->operands) lastUse[v] = i;
  for (const ir::Value* v : f.results) lastUse[v] = kKeep;
  auto needed = [&](const ir::Value* v) { return lastUse.count(v) > 0; };

  std::unordered_map<const ir::Value*, Tensor> env;
  for (size_t i = 0; i < args.size(); ++i) {
    const ir::Value* a = f.args[i];
    GSL_ASSERT(args[i].defined() && args[i].type() == a->type,
               "interpret: argument " + std::to_string(i) + " of '" + f.name + "' has type " +
                   (args[i].defined() ? args[i].type().str() : std::string("<undefined>")) +
                   ", expected " + a->type.str());
    if (needed(a)) env[a] = args[i];
  }

  std::vector<Tensor> in;
  for (size_t i = 0; i < f.ops.size(); ++i) {
    const ir::Op& op = *f.ops[i];
    in.clear();
    for (const ir::Value* v : op.operands) {
      auto it = env.find(v);
      GSL_ASSERT(it != env.end(), std::string("interpret: operand of ") + op.info().mnemonic +
                                      " is used before it is defined (or after it was freed)");
      in.push_back(it->second);
    }
    std::vector<Tensor> outs;
    try {
      if (op.kind == ir::OpKind::Loop) outs = runLoop(op, in, ctx);
      else outs.push_back(evalOp(op, in, ctx));
    } catch (const CommError&) {
      throw;
    } catch (const RuntimeError&) {
      throw;
    } catch (const std::runtime_error& e) {
      throw RuntimeError(op.loc, e.what());
    }
    GSL_ASSERT(outs.size() == op.results.size(), std::string("interpret: ") + op.info().mnemonic +
                                                     " produced the wrong number of results");
    for (size_t k = 0; k < outs.size(); ++k)
      GSL_ASSERT(outs[k].type() == op.results[k]->type,
                 std::string("interpret: ") + op.info().mnemonic + " produced " + outs[k].type().str() +
                     ", expected " + op.results[k]->type.str());
    in.clear();
    // Free operands whose last use this was, then keep the results read later.
    for (const ir::Value* v : op.operands)
      if (lastUse[v] == i) env.erase(v);
    for (size_t k = 0; k < outs.size(); ++k)
      if (needed(op.results[k])) env[op.results[k]] = std::move(outs[k]);
  }

  std::vector<Tensor> results;
  for (const ir::Value* v : f.results) {
    auto it = env.find(v);
    GSL_ASSERT(it != env.end(), "interpret: a result of '" + f.name + "' is not defined");
    results.push_back(it->second);
  }
  return results;
}

}  // namespace gsl::backend
