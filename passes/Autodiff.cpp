#include "passes/Autodiff.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "ir/GradRules.h"
#include "support/Diagnostics.h"

namespace gsl::passes {

using ir::DType;
using ir::Op;
using ir::OpKind;
using ir::Value;

Gradients appendGradient(const ir::Module& m, ir::Function& f, Value* loss,
                         const std::vector<std::string>& params, bool wrtArgs) {
  GSL_ASSERT(loss, "appendGradient: no loss");
  GSL_ASSERT(loss->type == (ir::TensorType{DType::F32, {}}),
             "appendGradient: the loss must be an f32 scalar, got " + loss->type.str());
  // The forward ops, fixed before anything is appended.
  std::vector<Op*> fwd;
  for (auto& op : f.ops) fwd.push_back(op.get());
  bool inF = loss->def ? std::find(fwd.begin(), fwd.end(), loss->def) != fwd.end()
                       : std::find(f.args.begin(), f.args.end(), loss) != f.args.end();
  GSL_ASSERT(inF, "appendGradient: the loss is not a value of function '" + f.name + "'");
  std::set<std::string> wrt(params.begin(), params.end());
  for (const auto& n : params)
    GSL_ASSERT(m.findParam(n), "appendGradient: no param named '" + n + "'");

  // Active values: those that depend on a differentiated input.
  std::unordered_set<const Value*> active;
  if (wrtArgs)
    for (Value* a : f.args)
      if (a->type.dtype == DType::F32) active.insert(a);
  for (Op* op : fwd) {
    if (op->result->type.dtype != DType::F32) continue;
    if (op->kind == OpKind::Param) {
      if (wrt.count(op->attrs.getString("name"))) active.insert(op->result);
    } else if (op->info().grad) {
      for (Value* v : op->operands)
        if (active.count(v)) {
          active.insert(op->result);
          break;
        }
    }
  }

  // The reverse sweep. Only active values receive adjoints, so only ops on
  // a path from a differentiated input to the loss are visited.
  ir::GradBuilder b(f);
  std::unordered_map<const Value*, Value*> adj;
  std::map<std::string, Value*> paramAdj;
  auto accumulate = [&](Value*& slot, Value* g) { slot = slot ? b.add(slot, g) : g; };
  if (active.count(loss)) {
    b.setLoc(loss->def ? loss->def->loc : f.loc);
    adj[loss] = b.scalar(1.0);
  }
  for (auto it = fwd.rbegin(); it != fwd.rend(); ++it) {
    Op* op = *it;
    auto a = adj.find(op->result);
    if (a == adj.end()) continue;
    b.setLoc(op->loc);
    if (op->kind == OpKind::Param) {
      accumulate(paramAdj[op->attrs.getString("name")], a->second);
      continue;
    }
    std::vector<bool> wanted;
    for (Value* v : op->operands) wanted.push_back(active.count(v) > 0);
    b.setWanted(wanted);
    std::vector<Value*> og(op->operands.size(), nullptr);
    op->info().grad(b, *op, a->second, og);
    GSL_ASSERT(og.size() == op->operands.size(),
               std::string("gradient rule of ") + op->info().mnemonic + " returned the wrong number of adjoints");
    for (size_t i = 0; i < og.size(); ++i) {
      if (!og[i] || !wanted[i]) continue;
      Value* v = op->operands[i];
      GSL_ASSERT(og[i]->type == v->type, std::string("gradient rule of ") + op->info().mnemonic +
                                             " gave operand " + std::to_string(i) + " an adjoint of type " +
                                             og[i]->type.str() + ", expected " + v->type.str());
      accumulate(adj[v], og[i]);
    }
  }
  b.setWanted({});
  b.setLoc(f.loc);

  Gradients out;
  for (const auto& n : params) {
    auto p = paramAdj.find(n);
    const ir::TensorType& t = m.findParam(n)->type;
    out.params.push_back(p != paramAdj.end() ? p->second : b.constant(0.0, t.dtype, t.shape));
  }
  if (wrtArgs)
    for (Value* a : f.args) {
      if (a->type.dtype != DType::F32) {
        out.args.push_back(nullptr);
        continue;
      }
      auto g = adj.find(a);
      out.args.push_back(g != adj.end() ? g->second : b.zerosLike(a));
    }
  return out;
}

}  // namespace gsl::passes
