#include "ir/Function.h"

#include <map>

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

std::unique_ptr<Function> Function::clone() const {
  auto f = std::make_unique<Function>();
  f->name = name;
  f->loc = loc;
  std::map<const Value*, Value*> map;
  for (Value* a : args) {
    Value* c = f->addArg(a->type);
    c->sharding = a->sharding;
    c->shardingLoc = a->shardingLoc;
    map[a] = c;
  }
  for (const auto& op : ops) {
    std::vector<Value*> operands;
    for (Value* v : op->operands) operands.push_back(map.at(v));
    Op* c = f->append(op->kind, operands, op->attrs, op->result->type, op->loc);
    c->result->sharding = op->result->sharding;
    c->result->shardingLoc = op->result->shardingLoc;
    map[op->result] = c->result;
  }
  for (Value* r : results) f->results.push_back(map.at(r));
  f->resultShardings = resultShardings;
  f->train = train;
  return f;
}

}  // namespace gsl::ir
