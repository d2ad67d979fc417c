#include "passes/Simplify.h"

#include <map>
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

int eliminateCommonSubexpressions(ir::Function& f) {
  std::map<const ir::Value*, ir::Value*> replaced;
  std::map<std::string, ir::Value*> seen;
  std::vector<std::unique_ptr<ir::Op>> kept;
  int removed = 0;
  for (auto& op : f.ops) {
    for (ir::Value*& v : op->operands)
      if (auto it = replaced.find(v); it != replaced.end()) v = it->second;
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
