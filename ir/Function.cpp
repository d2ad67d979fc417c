#include "ir/Function.h"

#include <map>

#include "support/Diagnostics.h"

namespace gsl::ir {

Op::Op() = default;
Op::~Op() = default;

Value* Function::newValue(Op* def, const TensorType& t) {
  auto v = std::make_unique<Value>();
  v->id = nextId_++;
  v->type = t;
  v->def = def;
  values_.push_back(std::move(v));
  return values_.back().get();
}

Value* Function::addArg(const TensorType& t) {
  Value* v = newValue(nullptr, t);
  v->argIndex = (int)args.size();
  args.push_back(v);
  return v;
}

Op* Function::append(OpKind k, std::vector<Value*> operands, AttrMap attrs, const TensorType& type,
                     SourceLoc l) {
  return appendMulti(k, std::move(operands), std::move(attrs), {type}, nullptr, l);
}

Op* Function::appendMulti(OpKind k, std::vector<Value*> operands, AttrMap attrs,
                          const std::vector<TensorType>& types, std::unique_ptr<Function> body,
                          SourceLoc l) {
  GSL_ASSERT(!types.empty(), std::string("an op without results: ") + opName(k));
  auto op = std::make_unique<Op>();
  op->kind = k;
  op->operands = std::move(operands);
  op->attrs = std::move(attrs);
  op->loc = l;
  op->body = std::move(body);
  for (const TensorType& t : types) op->results.push_back(newValue(op.get(), t));
  op->result = op->results[0];
  ops.push_back(std::move(op));
  return ops.back().get();
}

Value* Function::addResult(Op* op, const TensorType& t) {
  Value* v = newValue(op, t);
  op->results.push_back(v);
  return v;
}

Op* Function::appendClone(const Op& src, std::vector<Value*> operands) {
  std::vector<TensorType> types;
  for (const Value* r : src.results) types.push_back(r->type);
  Op* c = appendMulti(src.kind, std::move(operands), src.attrs, types,
                      src.body ? src.body->clone() : nullptr, src.loc);
  c->groups = src.groups;
  for (size_t i = 0; i < src.results.size(); ++i) {
    c->results[i]->sharding = src.results[i]->sharding;
    c->results[i]->shardingLoc = src.results[i]->shardingLoc;
  }
  return c;
}

int Function::renumberFrom(int id) {
  for (Value* a : args) a->id = id++;
  for (auto& op : ops) {
    for (Value* r : op->results) r->id = id++;
    if (op->body) id = op->body->renumberFrom(id);
  }
  nextId_ = id;
  return id;
}

const std::optional<Sharding>& Function::wantedSharding(size_t i) const {
  static const std::optional<Sharding> none;
  return i < argWants.size() ? argWants[i] : none;
}

void Function::wantSharding(size_t i, const Sharding& s) {
  if (argWants.size() <= i) argWants.resize(i + 1);
  if (!argWants[i]) argWants[i] = s;
}

void Function::renumber() { renumberFrom(0); }

ValueNames Function::namesWithBodies() const {
  ValueNames all = names;
  for (const auto& op : ops)
    if (op->body) all.merge(op->body->namesWithBodies());
  return all;
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
    Op* c = f->appendClone(*op, operands);
    for (size_t i = 0; i < op->results.size(); ++i) map[op->results[i]] = c->results[i];
  }
  for (Value* r : results) f->results.push_back(map.at(r));
  f->resultShardings = resultShardings;
  f->argWants = argWants;
  f->train = train;
  return f;
}

std::optional<double> scalarConstant(const Value* v) {
  if (!v->def || v->type.rank() != 0) return std::nullopt;
  const Op& op = *v->def;
  switch (op.kind) {
    case OpKind::Constant: {
      const Attr* a = op.attrs.get("value");
      if (!a) return std::nullopt;
      if (auto* b = std::get_if<bool>(a)) return *b ? 1.0 : 0.0;
      if (auto* i = std::get_if<int64_t>(a)) return (double)*i;
      if (auto* d = std::get_if<double>(a)) return *d;
      return std::nullopt;
    }
    case OpKind::Eq: case OpKind::Ne: case OpKind::Lt: case OpKind::Le: case OpKind::Gt: case OpKind::Ge: {
      auto a = scalarConstant(op.operands[0]), b = scalarConstant(op.operands[1]);
      if (!a || !b) return std::nullopt;
      OpKind k = op.kind;
      bool r = k == OpKind::Eq ? *a == *b : k == OpKind::Ne ? *a != *b : k == OpKind::Lt ? *a < *b
             : k == OpKind::Le ? *a <= *b : k == OpKind::Gt ? *a > *b : *a >= *b;
      return r ? 1.0 : 0.0;
    }
    default: return std::nullopt;
  }
}

}  // namespace gsl::ir
