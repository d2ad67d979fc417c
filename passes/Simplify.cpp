#include "passes/Simplify.h"

#include <bit>
#include <compare>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <variant>
#include <vector>

namespace gsl::passes {
namespace {

// An attribute value as a CSE key: as ir::Attr, but a double is compared by
// its bits, so that 0.0 and -0.0 stay apart and a NaN equals itself (a
// strict weak order, which std::map needs).
struct DoubleBits {
  uint64_t bits;
  auto operator<=>(const DoubleBits&) const = default;
};
using AttrKey =
    std::variant<int64_t, DoubleBits, bool, std::string, std::vector<int64_t>, ir::DType, ir::EinsumSpec, ir::ReduceOp>;

AttrKey attrKey(const ir::Attr& a) {
  return std::visit(
      [](const auto& v) -> AttrKey {
        if constexpr (std::is_same_v<std::decay_t<decltype(v)>, double>) return DoubleBits{std::bit_cast<uint64_t>(v)};
        else return v;
      },
      a);
}

// The identity of an op's computation: kind, operands, attributes, type
// and sharding. Two ops with equal keys compute the same value.
struct CseKey {
  ir::OpKind kind;
  std::vector<const ir::Value*> operands;
  std::vector<std::pair<std::string, AttrKey>> attrs;
  ir::DType dtype;
  ir::Shape shape;
  // The result's sharding, if any: (mesh, dims, partial).
  std::optional<std::tuple<Symbol, std::vector<ir::Axes>, ir::Axes>> sharding;
  auto operator<=>(const CseKey&) const = default;
};

CseKey keyOf(const ir::Op& op) {
  CseKey k{op.kind, {op.operands.begin(), op.operands.end()}, {}, op.result->type.dtype, op.result->type.shape, {}};
  for (const auto& [name, a] : op.attrs.all()) k.attrs.emplace_back(name, attrKey(a));
  if (const auto& s = op.result->sharding) k.sharding = std::make_tuple(s->mesh, s->dims, s->partial);
  return k;
}

// Folds what a compile-time constant decides: a comparison of two scalar
// constants becomes a constant, and `where` with a constant condition is
// the branch it picks (when that branch already has the result's type), so
// the other branch dies: `where(DENSE == 1, dense, moe)` keeps one path.
// A shard_slice or collective over a group of one is its operand.
// Returns the value that replaces op's result, or nullptr.
ir::Value* fold(ir::Op& op) {
  using K = ir::OpKind;
  switch (op.kind) {
    case K::Eq: case K::Ne: case K::Lt: case K::Le: case K::Gt: case K::Ge: {
      auto r = ir::scalarConstant(op.result);
      if (!r) return nullptr;
      op.kind = K::Constant;
      op.operands.clear();
      op.attrs = ir::AttrMap();
      op.attrs.set("value", *r != 0);
      return nullptr;  // op itself is now the constant
    }
    case K::Where: {
      auto c = ir::scalarConstant(op.operands[0]);
      if (!c) return nullptr;
      ir::Value* pick = *c != 0 ? op.operands[1] : op.operands[2];
      if (pick->type != op.result->type || pick->sharding != op.result->sharding) return nullptr;
      return pick;
    }
    default: {
      // A collective over axes of size 1 (a mesh axis a model leaves at 1,
      // as the examples' `fsdp`): the block is the whole, the op a copy.
      // Every communicating row with a group size `n` (the op table's
      // volume column), and shard_slice. collective_permute over one member
      // is kept for now: the partitioner's reshards over permuted size-1
      // axes emit it, and dropping it changes golden IR (a change of its
      // own, not part of the issue-30 rewrite, which keeps every byte).
      if ((!op.info().volume && op.kind != K::ShardSlice) || op.kind == K::CollectivePermute) return nullptr;
      const ir::Attr* n = op.attrs.get("n");
      const int64_t* ni = n ? std::get_if<int64_t>(n) : nullptr;
      if (!ni || *ni != 1 || op.operands[0]->type != op.result->type) return nullptr;
      return op.operands[0];
    }
  }
}

int eliminateCommonSubexpressions(ir::Function& f) {
  std::map<const ir::Value*, ir::Value*> replaced;
  std::map<CseKey, ir::Value*> seen;
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
    if (op->body) {  // a loop: its body is not part of the key, so it is never merged
      kept.push_back(std::move(op));
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
    bool used = false;  // a loop is kept when any of its results is
    for (const ir::Value* r : f.ops[i]->results) used |= live.count(r) > 0;
    if (!used) continue;
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
  int removed = 0;
  for (auto& op : f.ops)
    if (op->body) removed += simplify(*op->body);
  removed += eliminateCommonSubexpressions(f);
  removed += eliminateDeadCode(f);
  if (removed) f.renumber();
  return removed;
}

}  // namespace gsl::passes
