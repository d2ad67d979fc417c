#include "passes/Simplify.h"

#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>

namespace gsl::passes {
namespace {

// The identity of an op's computation: kind, operands, attributes, type.
std::string keyOf(const ir::Op& op) {
  std::ostringstream k;
  k << (int)op.kind << "(";
  for (const ir::Value* v : op.operands) k << (const void*)v << ",";
  k << "){";
  for (const auto& [name, a] : op.attrs.all()) k << name << "=" << ir::attrStr(a) << ";";
  k << "}:" << op.result->type.str();
  if (op.result->sharding) k << "@" << op.result->sharding->str();
  return k.str();
}

// The value of a scalar `constant` op (bool, int or float attribute).
std::optional<double> constantValue(const ir::Value* v) {
  if (!v->def || v->def->kind != ir::OpKind::Constant || v->type.rank() != 0) return std::nullopt;
  const ir::Attr* a = v->def->attrs.get("value");
  if (!a) return std::nullopt;
  if (auto* b = std::get_if<bool>(a)) return *b ? 1.0 : 0.0;
  if (auto* i = std::get_if<int64_t>(a)) return (double)*i;
  if (auto* d = std::get_if<double>(a)) return *d;
  return std::nullopt;
}

// Folds what a compile-time constant decides: a comparison of two scalar
// constants becomes a constant, and `where` with a constant condition is
// the branch it picks (when that branch already has the result's type), so
// the other branch dies: `where(DENSE == 1, dense, moe)` keeps one path.
// Returns the value that replaces op's result, or nullptr.
ir::Value* fold(ir::Op& op) {
  using K = ir::OpKind;
  switch (op.kind) {
    case K::Eq: case K::Ne: case K::Lt: case K::Le: case K::Gt: case K::Ge: {
      auto a = constantValue(op.operands[0]), b = constantValue(op.operands[1]);
      if (!a || !b || op.result->type.rank() != 0) return nullptr;
      bool r = op.kind == K::Eq ? *a == *b : op.kind == K::Ne ? *a != *b : op.kind == K::Lt ? *a < *b
             : op.kind == K::Le ? *a <= *b : op.kind == K::Gt ? *a > *b : *a >= *b;
      op.kind = K::Constant;
      op.operands.clear();
      op.attrs = ir::AttrMap();
      op.attrs.set("value", r);
      return nullptr;  // op itself is now the constant
    }
    case K::Where: {
      auto c = constantValue(op.operands[0]);
      if (!c) return nullptr;
      ir::Value* pick = *c != 0 ? op.operands[1] : op.operands[2];
      if (pick->type != op.result->type || pick->sharding != op.result->sharding) return nullptr;
      return pick;
    }
    default: return nullptr;
  }
}

int eliminateCommonSubexpressions(ir::Function& f) {
  std::map<const ir::Value*, ir::Value*> replaced;
  std::map<std::string, ir::Value*> seen;
  std::vector<std::unique_ptr<ir::Op>> kept;
  int removed = 0;
  for (auto& op : f.ops) {
    for (ir::Value*& v : op->operands)
      if (auto it = replaced.find(v); it != replaced.end()) v = it->second;
    if (ir::Value* same = fold(*op)) {
      replaced[op->result] = same;
      ++removed;
      continue;
    }
    auto [it, fresh] = seen.emplace(keyOf(*op), op->result);
    if (fresh) {
      kept.push_back(std::move(op));
    } else {
      replaced[op->result] = it->second;
      ++removed;
    }
  }
  for (ir::Value*& r : f.results)
    if (auto it = replaced.find(r); it != replaced.end()) r = it->second;
  f.ops = std::move(kept);
  return removed;
}

int eliminateDeadCode(ir::Function& f) {
  std::set<const ir::Value*> live(f.results.begin(), f.results.end());
  std::vector<bool> keep(f.ops.size(), false);
  for (size_t i = f.ops.size(); i-- > 0;) {
    if (!live.count(f.ops[i]->result)) continue;
    keep[i] = true;
    for (const ir::Value* v : f.ops[i]->operands) live.insert(v);
  }
  std::vector<std::unique_ptr<ir::Op>> kept;
  int removed = 0;
  for (size_t i = 0; i < f.ops.size(); ++i) {
    if (keep[i]) kept.push_back(std::move(f.ops[i]));
    else ++removed;
  }
  f.ops = std::move(kept);
  return removed;
}

}  // namespace

int simplify(ir::Function& f) {
  int removed = eliminateCommonSubexpressions(f);
  removed += eliminateDeadCode(f);
  if (removed) f.renumber();
  return removed;
}

}  // namespace gsl::passes
