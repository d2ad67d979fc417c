// The source names of IR values: a side table keyed by value, read only by
// the REPL (its names for values, repl/CallPaths.h) and never printed.
//
// Each ir::Function owns the table of its own values (its arguments and op
// results; a loop body's values are in the body's table), so an entry
// lives exactly as long as its value: a pass that replaces a loop body
// drops the old body's names with it, and the new body's values start
// unnamed. Function::clone() copies no names (the REPL copies them onto its
// copies, repl/CallPaths.h).
//
// A value has
//   - a name: the let that bound it in its function's own body (the first
//     such let), or the argument it is (a function's, a host thunk's, a
//     loop body's index or carried value; set by the front end);
//   - call paths: every let (or loop-carried) name it has in the program,
//     by its call path inside the function being lowered: "q" for a let of
//     the function itself, "logits.trunk.block.attn.q" for let q of fn attn
//     inlined through those calls (also into a host thunk); in a training
//     step also "grad(w)" for the gradient of param w and "opt.m(w)" for
//     state m of optimizer opt (passes/Training.cpp). Innermost first.
#pragma once
#include <string>
#include <unordered_map>
#include <vector>

namespace gsl::ir {

struct Value;

class ValueNames {
 public:
  // v's name; "" when it has none.
  const std::string& name(const Value* v) const {
    auto it = entries_.find(v);
    return it == entries_.end() ? none().name : it->second.name;
  }
  // v's call paths, innermost first; empty when it has none.
  const std::vector<std::string>& callPaths(const Value* v) const {
    auto it = entries_.find(v);
    return it == entries_.end() ? none().callPaths : it->second.callPaths;
  }

  void setName(const Value* v, const std::string& n) { entries_[v].name = n; }
  // Appends `p` to v's call paths unless v already has it.
  void addCallPath(const Value* v, const std::string& p) {
    std::vector<std::string>& ps = entries_[v].callPaths;
    for (const auto& q : ps)
      if (q == p) return;
    ps.push_back(p);
  }
  // Appends the call paths of `from` (of this table) to those of `to`.
  void appendCallPaths(const Value* to, const Value* from) {
    auto it = entries_.find(from);
    if (it == entries_.end() || it->second.callPaths.empty()) return;
    std::vector<std::string> ps = it->second.callPaths;
    std::vector<std::string>& dst = entries_[to].callPaths;
    dst.insert(dst.end(), ps.begin(), ps.end());
  }
  // `to` gets the names `from` has in `src` (none when it has none there).
  void assign(const Value* to, const ValueNames& src, const Value* from) {
    auto it = src.entries_.find(from);
    if (it == src.entries_.end()) entries_.erase(to);
    else entries_[to] = it->second;
  }
  // Adds the entries of `other` (the tables of several functions in one:
  // Function::namesWithBodies).
  void merge(const ValueNames& other) {
    for (const auto& [v, e] : other.entries_) entries_[v] = e;
  }

 private:
  struct Entry {
    std::string name;
    std::vector<std::string> callPaths;
  };
  static const Entry& none() {
    static const Entry e;
    return e;
  }
  std::unordered_map<const Value*, Entry> entries_;
};

}  // namespace gsl::ir
