#include "passes/ShapeInference.h"

#include "ir/Loop.h"

namespace gsl::passes {

// Infers the types of f's ops in order; a loop's body first, then the
// loop's results from it (ir/Loop.h).
static std::string inferFunction(ir::Function& f, const std::string& where) {
  for (auto& op : f.ops) {
    std::vector<ir::TensorType> in;
    for (ir::Value* v : op->operands) in.push_back(v->type);
    if (op->kind == ir::OpKind::Loop) {
      if (auto e = inferFunction(*op->body, where); !e.empty()) return e;
      std::vector<ir::TensorType> out;
      std::string e = ir::inferLoopTypes(in, op->attrs, *op->body, out);
      if (!e.empty()) return where + ": loop: " + e;
      for (size_t i = 0; i < out.size() && i < op->results.size(); ++i) op->results[i]->type = out[i];
      continue;
    }
    if (!op->info().infer) continue;  // param, constant: type is given
    ir::TensorType out;
    std::string e = ir::inferType(op->kind, in, op->attrs, out);
    if (!e.empty()) return where + ": " + op->info().mnemonic + ": " + e;
    op->result->type = out;
  }
  return "";
}

std::string inferShapes(ir::Module& m) {
  for (auto& f : m.functions)
    if (auto e = inferFunction(*f, "@" + f->name); !e.empty()) return e;
  return "";
}

}  // namespace gsl::passes
