#include "passes/CombineAllReduce.h"

#include <algorithm>
#include <map>

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

void combineGroup(Function& f, const std::vector<Op*>& group) {
  std::map<const Op*, size_t> index;
  for (size_t i = 0; i < f.ops.size(); ++i) index[f.ops[i].get()] = i;
  size_t lastDef = 0, firstUse = f.ops.size();
  for (Op* ar : group) lastDef = std::max(lastDef, index.at(ar->operands[0]->def));
  for (size_t i = 0; i < f.ops.size(); ++i)
    for (Op* ar : group)
      if (std::find(f.ops[i]->operands.begin(), f.ops[i]->operands.end(), ar->result) != f.ops[i]->operands.end())
        firstUse = std::min(firstUse, i);
  if (lastDef >= firstUse) return;  // a reduced value is needed before the last sum

  const size_t before = f.ops.size();
  const TensorType& st = group[0]->result->type;  // a scalar
  const int64_t n = (int64_t)group.size();
  auto reshape = [&](Value* v, const Shape& s) {
    AttrMap at;
    at.set("shape", s);
    return f.append(OpKind::Reshape, {v}, at, {st.dtype, s}, group[0]->loc)->result;
  };
  std::vector<Value*> parts;
  for (Op* ar : group) parts.push_back(reshape(ar->operands[0], {1}));
  AttrMap cat;
  cat.set("axis", (int64_t)0);
  Value* packed = f.append(OpKind::Concat, parts, cat, {st.dtype, {n}}, group[0]->loc)->result;
  Value* reduced = f.append(OpKind::AllReduce, {packed}, group[0]->attrs, {st.dtype, {n}}, group[0]->loc)->result;
  std::map<Value*, Value*> repl;
  for (int64_t i = 0; i < n; ++i) {
    AttrMap sl;
    sl.set("axis", (int64_t)0);
    sl.set("start", i);
    sl.set("end", i + 1);
    Value* one = f.append(OpKind::Slice, {reduced}, sl, {st.dtype, {1}}, group[0]->loc)->result;
    repl[group[(size_t)i]->result] = reshape(one, {});
  }
  // The new ops go right after the last local sum; the old all_reduces go.
  std::vector<std::unique_ptr<Op>> added;
  for (size_t i = before; i < f.ops.size(); ++i) added.push_back(std::move(f.ops[i]));
  f.ops.resize(before);
  for (auto& op : f.ops)
    for (Value*& v : op->operands)
      if (auto it = repl.find(v); it != repl.end()) v = it->second;
  for (Value*& v : f.results)
    if (auto it = repl.find(v); it != repl.end()) v = it->second;
  std::vector<std::unique_ptr<Op>> ops;
  for (size_t i = 0; i < f.ops.size(); ++i) {
    Op* o = f.ops[i].get();
    bool old = std::find(group.begin(), group.end(), o) != group.end();
    if (!old) ops.push_back(std::move(f.ops[i]));
    if (i == lastDef)
      for (auto& a : added) ops.push_back(std::move(a));
  }
  f.ops = std::move(ops);
}

}  // namespace

void combineAllReduces(Function& f) {
  // Groups: the same tag, collective attributes and dtype; scalar results.
  std::vector<std::vector<Op*>> groups;
  for (auto& op : f.ops) {
    if (op->kind != OpKind::AllReduce || op->result->type.rank() != 0 || tagOf(*op).empty()) continue;
    auto same = [&](const std::vector<Op*>& g) {
      return tagOf(*g[0]) == tagOf(*op) && g[0]->attrs == op->attrs &&
             g[0]->result->type.dtype == op->result->type.dtype;
    };
    auto it = std::find_if(groups.begin(), groups.end(), same);
    if (it == groups.end()) groups.push_back({op.get()});
    else it->push_back(op.get());
  }
  for (auto& g : groups)
    if (g.size() >= 2) combineGroup(f, g);
}

}  // namespace gsl::passes
