#include "ir/Function.h"

namespace gsl::ir {

Value* Function::addArg(const TensorType& t) {
  auto v = std::make_unique<Value>();
  v->id = nextId_++;
  v->type = t;
  v->argIndex = (int)args.size();
  args.push_back(v.get());
  values_.push_back(std::move(v));
  return args.back();
}

Op* Function::append(OpKind k, std::vector<Value*> operands, AttrMap attrs, const TensorType& type,
                     SourceLoc l) {
  auto op = std::make_unique<Op>();
  op->kind = k;
  op->operands = std::move(operands);
  op->attrs = std::move(attrs);
  op->loc = l;
  auto v = std::make_unique<Value>();
  v->id = nextId_++;
  v->type = type;
  v->def = op.get();
  op->result = v.get();
  values_.push_back(std::move(v));
  ops.push_back(std::move(op));
  return ops.back().get();
}

void Function::renumber() {
  int id = 0;
  for (Value* a : args) a->id = id++;
  for (auto& op : ops) op->result->id = id++;
  nextId_ = id;
}

}  // namespace gsl::ir
