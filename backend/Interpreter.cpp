#include "backend/Interpreter.h"

#include <limits>
#include <unordered_map>

#include "support/Diagnostics.h"

namespace gsl::backend {

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
    Tensor out;
    try {
      out = evalOp(op, in, ctx);
    } catch (const CommError&) {
      throw;
    } catch (const RuntimeError&) {
      throw;
    } catch (const std::runtime_error& e) {
      throw RuntimeError(op.loc, e.what());
    }
    GSL_ASSERT(out.type() == op.result->type, std::string("interpret: ") + op.info().mnemonic +
                                                  " produced " + out.type().str() + ", expected " +
                                                  op.result->type.str());
    in.clear();
    // Free operands whose last use this was, then keep the result if it is read later.
    for (const ir::Value* v : op.operands)
      if (lastUse[v] == i) env.erase(v);
    if (needed(op.result)) env[op.result] = std::move(out);
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
