#include "passes/ShapeInference.h"

namespace gsl::passes {

std::string inferShapes(ir::Module& m) {
  for (auto& f : m.functions) {
    for (auto& op : f->ops) {
      if (!op->info().infer) continue;  // param, constant: type is given
      std::vector<ir::TensorType> in;
      for (ir::Value* v : op->operands) in.push_back(v->type);
      ir::TensorType out;
      std::string e = ir::inferType(op->kind, in, op->attrs, out);
      if (!e.empty()) return "@" + f->name + ": " + op->info().mnemonic + ": " + e;
      op->result->type = out;
    }
  }
  return "";
}

}  // namespace gsl::passes
