#include "passes/CombineAllReduce.h"

#include <algorithm>
#include <climits>
#include <map>
#include <tuple>

#include "support/Diagnostics.h"

namespace gsl::passes {

using namespace ir;

namespace {

// The `combine` tag of the op defining an all_reduce's operand, or "".
std::string tagOf(const Op& ar) {
  const Op* d = ar.operands[0]->def;
  if (!d || !d->attrs.has("combine")) return "";
  return d->attrs.getString("combine");
}

// The position of each op of `f`, and of the first use of each value (an
// op's operand, or f's result: f.ops.size()).
struct Positions {
  std::map<const Op*, long> op;
  std::map<const Value*, long> firstUse;
  explicit Positions(const Function& f) {
    for (size_t i = 0; i < f.ops.size(); ++i) {
      op[f.ops[i].get()] = (long)i;
      for (const Value* v : f.ops[i]->operands) firstUse.emplace(v, (long)i);  // the first one stays
    }
    for (const Value* v : f.results) firstUse.emplace(v, (long)f.ops.size());
  }
  // Where `v` is defined: its op's position, -1 for an argument.
  long def(const Value* v) const { return v->def ? op.at(v->def) : -1; }
  long use(const Value* v) const {
    auto it = firstUse.find(v);
    return it == firstUse.end() ? LONG_MAX : it->second;
  }
};

void combineGroup(Function& f, const std::vector<Op*>& group) {
  const Positions pos(f);
  long lastDef = -1, firstUse = LONG_MAX;
  for (Op* ar : group) {
    lastDef = std::max(lastDef, pos.def(ar->operands[0]));
    firstUse = std::min(firstUse, pos.use(ar->result));
  }
  if (lastDef >= firstUse) return;  // a reduced value is needed before the last operand

  const size_t before = f.ops.size();
  const DType dt = group[0]->result->type.dtype;
  const SourceLoc loc = group[0]->loc;
  auto reshape = [&](Value* v, const Shape& s) {
    AttrMap at;
    at.set("shape", s);
    return f.append(OpKind::Reshape, {v}, at, {dt, s}, loc)->result;
  };
  // Each operand packed once (the same value reduced twice is one piece).
  std::vector<Value*> parts;
  std::map<const Value*, int64_t> offset;
  int64_t n = 0;
  for (Op* ar : group) {
    if (!offset.emplace(ar->operands[0], n).second) continue;
    const int64_t k = ar->result->type.numElements();
    parts.push_back(reshape(ar->operands[0], {k}));
    n += k;
  }
  AttrMap cat;
  cat.set("axis", (int64_t)0);
  Value* packed = f.append(OpKind::Concat, parts, cat, {dt, {n}}, loc)->result;
  Value* reduced = f.append(OpKind::AllReduce, {packed}, group[0]->attrs, {dt, {n}}, loc)->result;
  std::map<Value*, Value*> repl;
  std::map<int64_t, Value*> unpacked;  // by offset
  for (Op* ar : group) {
    const int64_t k = ar->result->type.numElements(), at = offset.at(ar->operands[0]);
    if (auto it = unpacked.find(at); it != unpacked.end()) {
      repl[ar->result] = it->second;
      continue;
    }
    AttrMap sl;
    sl.set("axis", (int64_t)0);
    sl.set("start", at);
    sl.set("end", at + k);
    Value* piece = f.append(OpKind::Slice, {reduced}, sl, {dt, {k}}, loc)->result;
    Value* back = reshape(piece, ar->result->type.shape);
    back->sharding = ar->result->sharding;
    repl[ar->result] = unpacked[at] = back;
  }
  // The new ops go right after the last operand's definition; the old
  // all_reduces go.
  std::vector<std::unique_ptr<Op>> added;
  for (size_t i = before; i < f.ops.size(); ++i) added.push_back(std::move(f.ops[i]));
  f.ops.resize(before);
  for (auto& op : f.ops)
    for (Value*& v : op->operands)
      if (auto it = repl.find(v); it != repl.end()) v = it->second;
  for (Value*& v : f.results)
    if (auto it = repl.find(v); it != repl.end()) v = it->second;
  std::vector<std::unique_ptr<Op>> ops;
  if (lastDef < 0)
    for (auto& a : added) ops.push_back(std::move(a));
  for (size_t i = 0; i < f.ops.size(); ++i) {
    Op* o = f.ops[i].get();
    if (std::find(group.begin(), group.end(), o) == group.end()) ops.push_back(std::move(f.ops[i]));
    if ((long)i == lastDef)
      for (auto& a : added) ops.push_back(std::move(a));
  }
  f.ops = std::move(ops);
}

}  // namespace

void combineAllReduces(Function& f) {
  for (auto& op : f.ops)
    if (op->body) combineAllReduces(*op->body);
  // Open groups by kind (tag, collective attributes, dtype), in program
  // order; a member that cannot join its kind's open group closes it.
  struct Open {
    std::vector<Op*> ops;
    long lastDef = -1, firstUse = LONG_MAX;
    int64_t bytes = 0;
  };
  const Positions pos(f);
  std::vector<std::vector<Op*>> groups;
  std::vector<std::pair<std::tuple<std::string, AttrMap, DType>, Open>> open;
  auto close = [&](Open& g) {
    if (g.ops.size() >= 2) groups.push_back(g.ops);
    g = Open{};
  };
  for (auto& op : f.ops) {
    // Tagged scalar sums of any count, untagged all_reduces when small.
    if (op->kind != OpKind::AllReduce || op->operands.size() != 1 || op->results.size() != 1) continue;
    const std::string tag = op->result->type.rank() == 0 ? tagOf(*op) : "";
    if (tag.empty() && op->result->type.byteSize() > kCombineBytes) continue;
    auto key = std::make_tuple(tag, op->attrs, op->result->type.dtype);
    auto it = std::find_if(open.begin(), open.end(), [&](auto& e) { return e.first == key; });
    if (it == open.end()) it = open.insert(open.end(), {key, Open{}});
    Open& g = it->second;
    const long d = pos.def(op->operands[0]), u = pos.use(op->result);
    const int64_t b = op->result->type.byteSize();
    const bool fits = !g.ops.empty() && std::max(g.lastDef, d) < std::min(g.firstUse, u) &&
                      (!tag.empty() || g.bytes + b <= kCombineGroupBytes);
    if (!fits) close(g);
    g.ops.push_back(op.get());
    g.lastDef = std::max(g.lastDef, d);
    g.firstUse = std::min(g.firstUse, u);
    g.bytes += b;
  }
  for (auto& [key, g] : open) close(g);
  for (auto& g : groups) combineGroup(f, g);
}

}  // namespace gsl::passes
