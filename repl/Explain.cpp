#include "repl/Explain.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "frontend/AST.h"
#include "ir/Loop.h"
#include "repl/Text.h"

namespace gsl::repl {

using ir::Op;
using ir::OpKind;
using ir::Sharding;
using ir::Value;

namespace {

const ast::Decl* findDecl(const Build& b, ast::DeclKind kind, const std::string& name) {
  for (const auto& p : b.prog->asts)
    for (const auto& d : p->decls)
      if (d->kind == kind && d->name == name) return d.get();
  // A param-group member GROUP.MEMBER: the member's decl in its group.
  size_t dot = name.find('.');
  if (kind == ast::DeclKind::Param && dot != std::string::npos)
    for (const auto& p : b.prog->asts)
      for (const auto& d : p->decls)
        if (d->kind == ast::DeclKind::ParamGroup && d->name == name.substr(0, dot))
          for (const auto& m : d->members)
            if (m->name == name.substr(dot + 1)) return m.get();
  return nullptr;
}

std::string opText(const ValueContext& c, const Op& op) {
  std::string s = std::string(op.info().mnemonic) + "(";
  for (size_t i = 0; i < op.operands.size(); ++i) s += (i ? ", " : "") + valueName(c, *op.operands[i]);
  return s + ")";
}

bool isIdChar(char ch) { return std::isalnum((unsigned char)ch) || ch == '_'; }

// A constraint the front end put at `loc`: an `@shard` written there, or
// (calls are inlined) the annotation of a called function's argument or
// result, applied at the call. For the latter, finds the function in the
// source text around `loc` and points at its annotation.
std::string callSiteOrigin(const Build& b, SourceLoc loc) {
  std::string line = b.sm->lineText(loc.file, loc.line);
  size_t p = (size_t)loc.col - 1;
  if (p >= line.size() || line[p] == '@') return "annotated at " + b.where(loc);
  auto identBefore = [&](size_t end) {
    size_t e = end;
    while (e > 0 && line[e - 1] == ' ') --e;
    size_t st = e;
    while (st > 0 && isIdChar(line[st - 1])) --st;
    return line.substr(st, e - st);
  };
  // An argument: the unmatched `(` before loc, and which argument this is.
  int depth = 0, commas = 0;
  size_t q = p, lastSep = p;
  bool open = false;
  while (q > 0) {
    char ch = line[--q];
    if (ch == ')' || ch == ']') ++depth;
    else if (ch == '(' || ch == '[') {
      if (depth == 0) {
        open = ch == '(';
        break;
      }
      --depth;
    } else if (ch == ',' && depth == 0) {
      if (commas++ == 0) lastSep = q;
    }
  }
  if (open) {
    std::string callee = identBefore(q);
    if (commas == 0) lastSep = q;
    std::string between = line.substr(lastSep + 1, p - lastSep - 1);
    std::string keyword;
    if (size_t eq = between.find('='); eq != std::string::npos) keyword = identBefore(lastSep + 1 + eq);
    if (const ast::Decl* d = findDecl(b, ast::DeclKind::Fn, callee))
      for (size_t i = 0; i < d->args.size(); ++i)
        if ((keyword.empty() ? (int)i == commas : d->args[i].name == keyword) && d->args[i].annot)
          return "annotated at " + b.where(d->args[i].annot->loc) + " (argument " + d->args[i].name + " of fn " +
                 callee + ", called at " + b.where(loc) + ")";
  }
  // A result: loc is the call `f(...)` itself.
  size_t e = p;
  while (e < line.size() && isIdChar(line[e])) ++e;
  if (e < line.size() && line[e] == '(')
    if (const ast::Decl* d = findDecl(b, ast::DeclKind::Fn, line.substr(p, e - p)))
      for (const auto& r : d->results)
        if (r.annot)
          return "annotated at " + b.where(r.annot->loc) + " (the result of fn " + d->name + ", called at " +
                 b.where(loc) + ")";
  return "constrained at " + b.where(loc);
}

}  // namespace

std::string meshText(const ir::Mesh& m) {
  std::string s = m.name + " = [";
  for (size_t i = 0; i < m.axes.size(); ++i)
    s += (i ? ", " : "") + m.axes[i].name + ": " + std::to_string(m.axes[i].size);
  return s + "]";
}

namespace {
bool whole(const std::optional<Sharding>& s) { return !s || s->mesh.empty() || s->isReplicated(); }
}  // namespace

std::string shardingText(const std::optional<Sharding>& s) {
  if (whole(s)) return "replicated";
  return s->str();
}

bool sameLayout(const std::optional<Sharding>& a, const std::optional<Sharding>& b) {
  if (whole(a) || whole(b)) return whole(a) && whole(b);
  return *a == *b;
}

namespace {
// The context of the code around c's loop (its enclosing loop's body, or
// the function).
ValueContext outerOf(const ValueContext& c) {
  ValueContext o = c;
  o.loop = nullptr;
  if (!o.enclosing.empty()) {
    o.loop = o.enclosing.back();
    o.enclosing.pop_back();
  }
  return o;
}

// Whether `v` is an argument of the body of the loop `c` explains.
bool isBodyArg(const ValueContext& c, const Value& v) {
  return c.loop && c.loop->body && v.argIndex >= 0 && v.argIndex < (int)c.loop->body->args.size() &&
         c.loop->body->args[v.argIndex] == &v;
}
}  // namespace

std::string valueName(const ValueContext& c, const Value& v) {
  if (!c.names.name(&v).empty()) return c.names.name(&v);
  // A let of an inlined call: its call path (repl/CallPaths.h), from the
  // function explained, or for a thunk (the training step) from the loss.
  if (!c.names.callPaths(&v).empty()) return (c.fn.empty() ? "" : c.fn + ".") + c.names.callPaths(&v).front();
  // A loop input without a name of its own: named after what the loop reads.
  if (isBodyArg(c, v) && v.argIndex >= 1 && v.argIndex - 1 < (int)c.loop->operands.size()) {
    return valueName(outerOf(c), *c.loop->operands[v.argIndex - 1]);
  }
  // A layer of a stacked value read in a loop body: "blocks.w[l]".
  if (c.loop && v.def && v.def->kind == OpKind::DynamicIndex && v.def->operands.size() == 2)
    return valueName(c, *v.def->operands[0]) + "[" + valueName(c, *v.def->operands[1]) + "]";
  if (v.def && v.def->kind == OpKind::Param) return v.def->attrs.getString("name");
  if (c.leaves && !c.loop && v.argIndex >= 0 && v.argIndex < (int)c.leaves->size()) {
    const auto& l = (*c.leaves)[v.argIndex];
    if (l.kind == frontend::HostLeaf::Load) return "load(\"" + l.name + "\")";
    if (l.kind == frontend::HostLeaf::Exists) return "exists(\"" + l.name + "\")";
    return l.name.empty() ? "%" + std::to_string(v.id) : l.name;
  }
  return "%" + std::to_string(v.id);
}

std::string shardingOrigin(const ValueContext& c, const Value& v) {
  if (c.provenance.propagated(&v) || !v.sharding) return "";
  if (c.leaves && !c.loop && v.argIndex >= (int)c.leaves->size() && !c.names.callPaths(&v).empty())
    return "(an optimizer state of the training step: it lies as its param is stored)";
  if (v.sharding->mesh.empty()) return "(a host input: whole on every rank)";
  const Build& b = c.build;
  if (c.leaves && !c.loop && v.argIndex >= 0 && v.argIndex < (int)c.leaves->size()) {
    const auto& l = (*c.leaves)[v.argIndex];
    if (l.kind == frontend::HostLeaf::Var)
      return l.name == c.hostVar ? "(host variable " + l.name + ": its value before this assignment)"
                                 : "(host variable " + l.name + "; :sharding " + l.name + " tells why)";
    if (l.kind == frontend::HostLeaf::Load) {
      // The leaf's location is the `load`; point at its annotation.
      SourceLoc at = l.loc;
      std::string line = b.sm->lineText(at.file, at.line);
      if (size_t p = line.find('@', (size_t)std::max(0, at.col - 1)); p != std::string::npos) at.col = (int)p + 1;
      return "annotated at " + b.where(at);
    }
    return "(an input of the host script)";
  }
  if (c.loop) {
    const ir::LoopInfo info(*c.loop);
    // Carried value j: as it enters an iteration (an argument of the body)
    // or as the iteration yields it; both lie as the loop's initial value.
    int carried = -1;
    if (isBodyArg(c, v) && v.argIndex >= 1 && v.argIndex <= (int)info.carried) carried = v.argIndex - 1;
    for (size_t j = 0; j < info.carried && j < c.loop->body->results.size(); ++j)
      if (c.loop->body->results[j] == &v) carried = (int)j;
    if (carried >= 0) {
      ValueContext outer = outerOf(c);
      const Value& init = *c.loop->operands[carried];
      std::string o = shardingOrigin(outer, init);
      return "(carried by the loop, the same sharding in every iteration; it enters the loop as " +
             valueName(outer, init) + " " + shardingText(init.sharding) +
             (o.empty() ? (c.provenance.propagated(&init) ? " (propagated)" : "") : " " + o) + ")";
    }
    if (isBodyArg(c, v)) return v.argIndex == 0 ? "(the loop index)" : "(an input of the loop, the same in every iteration)";
  }
  if (v.argIndex >= 0 && !c.fn.empty() && !c.loop)
    if (const ast::Decl* d = findDecl(b, ast::DeclKind::Fn, c.fn))
      if (v.argIndex < (int)d->args.size() && d->args[v.argIndex].annot)
        return "annotated at " + b.where(d->args[v.argIndex].annot->loc);
  if (v.def && v.def->kind == OpKind::Param)
    if (const ast::Decl* d = findDecl(b, ast::DeclKind::Param, v.def->attrs.getString("name")))
      if (d->annot) return "annotated at " + b.where(d->annot->loc);
  if (v.shardingLoc.valid()) return callSiteOrigin(b, v.shardingLoc);
  if (!c.fn.empty() && !c.loop)
    if (const ast::Decl* d = findDecl(b, ast::DeclKind::Fn, c.fn))
      if (ir::Function* f = c.mod.findFunction(c.fn))
        for (size_t i = 0; i < f->results.size() && i < d->results.size(); ++i)
          if (d->results[i].annot && f->results[i]->type == v.type && f->resultShardings.size() > i &&
              f->resultShardings[i] && *f->resultShardings[i] == *v.sharding)
            return "annotated (the result type of fn " + c.fn + ") at " + b.where(d->results[i].annot->loc);
  return "(a user annotation)";
}

std::string explainSharding(const ValueContext& c, const Value& v, const std::string& label) {
  std::ostringstream os;
  os << label << ": " << shardingText(v.sharding);
  if (!v.sharding) {
    os << "\n  no annotation reaches it (values that propagation does not reach are replicated)\n";
    return os.str();
  }
  if (!c.provenance.propagated(&v)) {
    os << " " << shardingOrigin(c, v) << "\n";
    return os.str();
  }
  os << "\n";
  // Contracting (or summing) a split dim leaves partial sums: say so, as
  // the global sharding does not show them.
  auto partialNote = [&](const Op& op) {
    bool sums = op.info().cls == ir::OpClass::Contraction || op.kind == OpKind::Sum || op.kind == OpKind::Mean;
    if (!sums || !op.result->sharding) return;
    std::set<std::string> in, out;
    for (const Value* o : op.operands)
      if (o->sharding && o->sharding->mesh == op.result->sharding->mesh)
        for (const auto& d : o->sharding->dims) in.insert(d.begin(), d.end());
    for (const auto& d : op.result->sharding->dims) out.insert(d.begin(), d.end());
    std::string axes;
    for (const auto& a : in)
      if (!out.count(a)) axes += (axes.empty() ? "" : ", ") + a;
    if (!axes.empty())
      os << "     (" << op.info().mnemonic << " contracts a dim split over " << axes
         << ": each device holds a partial sum, which the per-rank program reduces; :spmd shows how)\n";
  };
  const Value* cur = &v;
  std::set<const Value*> seen;
  const passes::ShardingStep* step = nullptr;
  while (cur && (step = c.provenance.find(cur)) && seen.insert(cur).second) {
    const Op& op = *step->via;
    if (op.result == cur) {  // forward: from the operands
      const Value* src = step->source;
      if (!src || !c.provenance.propagated(src)) {
        os << "  <- " << opText(c, op) << " from\n";
        std::set<const Value*> listed;
        for (const Value* o : op.operands) {
          if (!o->sharding || !listed.insert(o).second) continue;
          std::string origin = shardingOrigin(c, *o);
          os << "       " << valueName(c, *o) << " " << shardingText(o->sharding)
             << (origin.empty() ? (c.provenance.propagated(o) ? " (propagated)" : "") : " " + origin) << "\n";
        }
        partialNote(op);
        return os.str();
      }
      os << "  <- " << opText(c, op);
      if (op.operands.size() > 1) os << ", from " << valueName(c, *src) << " " << shardingText(src->sharding);
      os << "\n";
      partialNote(op);
      cur = src;
    } else {  // backward: from the result of a use
      const Value* r = op.result;
      os << "  <- used by " << opText(c, op) << " = " << valueName(c, *r) << " " << shardingText(r->sharding);
      if (!c.provenance.propagated(r)) {
        std::string origin = shardingOrigin(c, *r);
        os << (origin.empty() ? "" : " " + origin) << "\n";
        return os.str();
      }
      os << "\n";
      cur = r;
    }
  }
  return os.str();
}

// ------------------------------------------------------------------ :show

std::string showBlocks(const std::string& title, const ir::TensorType& t, const std::optional<Sharding>& s,
                       const ir::Module& m, bool color) {
  std::ostringstream os;
  const ir::Mesh* mesh = (s && !s->mesh.empty()) ? m.findMesh(s->mesh) : nullptr;
  int rank = t.rank();
  int64_t devices = mesh ? mesh->numDevices() : m.np;
  os << title << ": " << t.str() << " " << shardingText(s);
  if (mesh) os << " on mesh " << meshText(*mesh);
  os << "  (" << devices << (devices == 1 ? " device" : " devices") << ")\n";

  // Blocks per dim and each device's block coordinates.
  std::vector<int64_t> nb = mesh ? ir::blocksPerDim(m, t, s) : std::vector<int64_t>(rank, 1);
  // A dim its blocks do not divide is padded (docs/sharding.md, "Uneven
  // dims"): every block has ceil(size / blocks) rows, the last ones end in
  // padding rows.
  std::vector<int64_t> pad = mesh ? ir::paddingPerDim(m, t, s) : std::vector<int64_t>(rank, 0);
  std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> holders;
  for (int64_t r = 0; r < devices; ++r) {
    std::vector<int64_t> idx(rank, 0);
    if (mesh) {
      auto coords = mesh->coords(r);
      for (int d = 0; d < rank && d < (int)s->dims.size(); ++d)
        for (const auto& a : s->dims[d]) idx[d] = idx[d] * mesh->axisSize(a) + coords[mesh->axisIndex(a)];
    }
    std::pair<int64_t, int64_t> key{rank >= 2 ? idx[0] : 0, rank >= 2 ? idx[1] : (rank == 1 ? idx[0] : 0)};
    holders[key].push_back(r);
  }

  // What the picture shows.
  auto dimText = [&](int d) {
    std::string x = "dim " + std::to_string(d) + " (" + std::to_string(t.shape[d]) + ")";
    if (nb[d] == 1) return x + " not split";
    std::string axes;
    for (const auto& a : s->dims[d]) axes += (axes.empty() ? "" : ", ") + a;
    x += " split over " + axes + " into " + std::to_string(nb[d]) + " blocks";
    if (pad[d])
      x += " of " + std::to_string((t.shape[d] + pad[d]) / nb[d]) + ", padded: " + std::to_string(pad[d]) +
           " padding " + (pad[d] == 1 ? "row" : "rows") + " at the end";
    return x;
  };
  if (rank == 0) os << "a scalar\n";
  else if (rank == 1) os << "columns: " << dimText(0) << "\n";
  else os << "rows: " << dimText(0) << "; columns: " << dimText(1) << "\n";
  if (rank > 2) {
    os << "(a " << rank << "-D tensor: showing dims 0 and 1";
    bool more = false;
    for (int d = 2; d < rank; ++d) more |= nb[d] > 1;
    if (more) {
      os << "; also split:";
      for (int d = 2; d < rank; ++d)
        if (nb[d] > 1) os << " " << dimText(d) << ";";
      os << " a box lists every device holding a block of it)\n";
    } else {
      os << "; the other dims are not split)\n";
    }
  }
  if (s && !s->partial.empty()) {
    std::string axes;
    for (const auto& a : s->partial) axes += (axes.empty() ? "" : ", ") + a;
    os << "(partial sums over " << axes << ": the devices of a box hold addends of it)\n";
  }

  int64_t rows = rank >= 2 ? nb[0] : 1, cols = rank >= 2 ? nb[1] : (rank == 1 ? nb[0] : 1);
  auto range = [&](int d, int64_t i) {
    int64_t len = (t.shape[d] + pad[d]) / nb[d];
    int64_t lo = std::min(i * len, t.shape[d]), hi = std::min((i + 1) * len, t.shape[d]);
    int64_t padRows = len - (hi - lo);
    if (!padRows) return std::to_string(lo) + ":" + std::to_string(hi);
    if (hi == lo) return "pad " + std::to_string(padRows);
    return std::to_string(lo) + ":" + std::to_string(hi) + " +" + std::to_string(padRows) + " pad";
  };
  std::map<std::pair<int64_t, int64_t>, std::pair<std::string, std::string>> labels;
  size_t width = 7;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      std::string devs = rankList(holders[{i, j}]);
      std::string rng = rank == 0 ? "" : rank == 1 ? "[" + range(0, j) + "]"
                                                   : "[" + range(0, i) + ", " + range(1, j) + (rank > 2 ? ", ...]" : "]");
      labels[{i, j}] = {devs, rng};
      width = std::max({width, devs.size() + 2, rng.size() + 2});
    }
  // Too many columns for a terminal: say so rather than draw a mess.
  if ((width + 1) * cols > 200) {
    os << "(" << rows << " x " << cols << " blocks: too wide to draw; each block is ";
    for (int d = 0; d < rank; ++d) os << (d ? " x " : "") << (t.shape[d] + pad[d]) / nb[d];
    os << ")\n";
    return os.str();
  }
  static const char* palette[] = {"30;46", "30;43", "30;42", "30;45", "30;44", "30;41",
                                  "30;106", "30;103", "30;102", "30;105", "30;104", "30;101"};
  auto center = [&](const std::string& x) {
    size_t left = (width - x.size()) / 2;
    return std::string(left, ' ') + x + std::string(width - x.size() - left, ' ');
  };
  std::string border = "+";
  for (int64_t j = 0; j < cols; ++j) border += std::string(width, '-') + "+";
  int colour = 0;
  std::map<std::pair<int64_t, int64_t>, int> colourOf;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) colourOf[{i, j}] = colour++ % 12;
  os << border << "\n";
  for (int64_t i = 0; i < rows; ++i) {
    for (int line = 0; line < 2; ++line) {
      os << "|";
      for (int64_t j = 0; j < cols; ++j) {
        const auto& l = labels[{i, j}];
        std::string cell = center(line == 0 ? l.first : l.second);
        if (color) os << "\033[" << palette[colourOf[{i, j}]] << "m" << cell << "\033[0m|";
        else os << cell << "|";
      }
      os << "\n";
    }
    os << border << "\n";
  }
  return os.str();
}

// ------------------------------------------------------------------ costs

namespace {

std::string seconds(double s) {
  char buf[64];
  if (s == 0) return "0";
  if (s < 1e-6) std::snprintf(buf, sizeof buf, "%.1f ns", s * 1e9);
  else if (s < 1e-3) std::snprintf(buf, sizeof buf, "%.1f us", s * 1e6);
  else if (s < 1) std::snprintf(buf, sizeof buf, "%.2f ms", s * 1e3);
  else std::snprintf(buf, sizeof buf, "%.2f s", s);
  return buf;
}

std::string bytes(uint64_t b) { return thousands(b) + " B"; }

}  // namespace

std::string costTable(const std::vector<const passes::Cost*>& costs, const std::vector<std::string>& heads) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> head{""};
  for (const auto& h : heads) head.push_back(h);
  bool hasHead = false;
  for (const auto& h : heads) hasHead |= !h.empty();
  if (hasHead) rows.push_back(head);
  auto row = [&](const std::string& label, auto f) {
    std::vector<std::string> r{label};
    for (const auto* c : costs) r.push_back(f(*c));
    rows.push_back(r);
  };
  row("flops", [](const passes::Cost& c) { return thousands(c.flops); });
  row("param bytes", [](const passes::Cost& c) { return bytes(c.paramBytes); });
  row("peak activation bytes", [](const passes::Cost& c) { return bytes(c.peakActivationBytes); });
  std::set<ir::OpKind, ir::ByMnemonic> kinds;
  for (const auto* c : costs)
    for (const auto& [k, v] : c->collectives) kinds.insert(k);
  for (ir::OpKind k : kinds)
    row(ir::opName(k), [&](const passes::Cost& c) {
      auto it = c.collectives.find(k);
      if (it == c.collectives.end() || it->second.calls == 0) return std::string("-");
      return std::to_string(it->second.calls) + (it->second.calls == 1 ? " call, " : " calls, ") + bytes(it->second.bytes);
    });
  if (kinds.empty()) row("collectives", [](const passes::Cost&) { return std::string("none"); });
  else
    row("bytes sent (all kinds)", [](const passes::Cost& c) {
      uint64_t b = 0;
      for (const auto& [k, v] : c.collectives) b += v.bytes;
      return bytes(b);
    });
  row("time: compute", [](const passes::Cost& c) { return seconds(c.computeSeconds()); });
  row("time: collectives", [](const passes::Cost& c) { return seconds(c.collectiveSeconds); });
  row("estimated time", [](const passes::Cost& c) { return seconds(c.seconds()); });

  std::vector<size_t> w(rows[0].size(), 0);
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], r[i].size());
  std::ostringstream os;
  for (const auto& r : rows) {
    os << "  " << r[0] << std::string(w[0] - r[0].size(), ' ');
    for (size_t i = 1; i < r.size(); ++i) os << "   " << std::string(w[i] - r[i].size(), ' ') << r[i];
    os << "\n";
  }
  return os.str();
}

}  // namespace gsl::repl

namespace gsl::repl {

namespace {

// "[a, _]", "[(a, b), _] partial(c)": ir::Sharding::str() without the
// "@shard(MESH, " and ")" around the dims; "replicated" for no mesh.
std::string layoutText(const ir::Sharding& s) {
  if (s.mesh.empty()) return "replicated";
  std::string r = s.str();  // "@shard(m, [a, _]) partial(c)"
  size_t open = r.find('['), close = r.find("])", open);  // names have no brackets
  return r.substr(open, close + 1 - open) + r.substr(close + 2);
}

}  // namespace

std::string planTable(const passes::OpPlans& plans) {
  std::vector<std::vector<std::string>> rows{{"", "operands", "result", "bytes sent", "flops", "memory"}};
  for (const auto& c : plans.candidates) {
    std::string ops;
    for (size_t i = 0; i < c.operands.size(); ++i) ops += (i ? " " : "") + layoutText(c.operands[i]);
    rows.push_back({c.chosen ? "*" : "", ops, layoutText(c.result), thousands(c.cost.bytes) + " B",
                    thousands(c.cost.flops), thousands(c.cost.memory) + " B"});
  }
  std::vector<size_t> w(rows[0].size(), 0);
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], r[i].size());
  std::ostringstream os;
  for (const auto& r : rows) {
    std::string line = "  ";
    for (size_t i = 0; i < r.size(); ++i) {
      std::string pad(w[i] - r[i].size(), ' ');
      line += i >= 3 ? pad + r[i] : r[i] + pad;  // numbers right-aligned
      if (i + 1 < r.size()) line += "   ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    os << line << "\n";
  }
  os << "chosen (*): " << plans.why << "\n";
  return os.str();
}

namespace {

// The time loops of `f` (attribute pipeline_microbatches), at any depth, in
// program order.
void timeLoops(const ir::Function& f, std::vector<const ir::Op*>& out) {
  for (const auto& op : f.ops)
    if (op->body) {
      if (op->kind == ir::OpKind::Loop && op->attrs.has("pipeline_microbatches")) out.push_back(op.get());
      timeLoops(*op->body, out);
    }
}

}  // namespace

std::vector<PipelineLoop> pipelineLoops(const ir::Module& m, const ir::Function& global, const ir::Function& local) {
  std::vector<const ir::Op*> g, l;
  timeLoops(global, g);
  timeLoops(local, l);
  std::vector<PipelineLoop> ps;
  for (size_t i = 0; i < l.size(); ++i) {
    const ir::Op& loop = *l[i];
    const ir::LoopInfo info(loop);
    PipelineLoop p;
    p.backward = info.reverse;
    const ir::PipelineSchedule sch = ir::pipelineScheduleOf(loop, m);
    p.microbatches = sch.microbatches;
    p.rounds = sch.rounds;
    p.trip = sch.iterations;
    p.stages = sch.stages;
    const ir::Mesh* mesh = m.findMesh(sch.mesh);
    std::string names;
    for (size_t k = 0; k < sch.axes.size(); ++k) names += (k ? ", " : "") + mesh->axes[sch.axes[k]].name;
    p.stageAxes = (sch.axes.size() == 1 ? "axis " : "axes ") + names + " of mesh " + sch.mesh;
    // The layers per stage and round: the global loop's stage loop's layer loop.
    if (g.size() == l.size())
      for (const auto& op : g[i]->body->ops) {
        if (op->kind != ir::OpKind::Loop || !op->attrs.has("stage_mesh")) continue;
        for (const auto& inner : op->body->ops)
          if (inner->kind == ir::OpKind::Loop) {
            p.layers = ir::LoopInfo(*inner).trip;
            break;
          }
        break;
      }
    // The shifts: in the per-rank body, before or after its stage loop.
    bool sameType = true, beforeStages = true;
    for (const auto& op : loop.body->ops) {
      if (op->kind == ir::OpKind::Loop) beforeStages = false;
      if (op->kind != ir::OpKind::CollectivePermute && op->kind != ir::OpKind::AllGather) continue;
      if (op->attrs.getString("mesh") != sch.mesh || op->attrs.getInts("axes") != sch.axes) continue;
      const ir::TensorType& t = op->operands[0]->type;
      if (p.shifts == 0) p.shiftType = t.str();
      sameType &= p.shiftType == t.str();
      ++p.shifts;
      ++(beforeStages ? p.before : p.after)[op->info().mnemonic];
      const uint64_t n = op->attrs.has("n") ? (uint64_t)op->attrs.getInt("n") : 1;
      p.shiftBytes += op->info().volume(n, (uint64_t)t.byteSize());
    }
    if (!sameType) p.shiftType.clear();
    ps.push_back(std::move(p));
  }
  return ps;
}

std::string pipelineText(const std::vector<PipelineLoop>& ps, const std::string& per, const std::string& prefix) {
  if (ps.empty()) return "";
  auto kindList = [](const std::map<std::string, int64_t>& kinds) {
    std::string s;
    for (const auto& [k, n] : kinds) s += (s.empty() ? "" : ", ") + std::to_string(n) + " " + k;
    return s;
  };
  std::ostringstream os;
  os << prefix << "pipeline (passes/Pipelining), per rank; shifts: the collectives of a time loop's own body that "
               "move rows between stages, bytes as one rank sends them:\n";
  const PipelineLoop* shown = nullptr;    // the schedule last described
  const PipelineLoop* forward = nullptr;  // the last forward time loop
  uint64_t total = 0;
  std::map<std::string, int64_t> kinds;
  std::vector<std::string> parts;
  for (const PipelineLoop& p : ps) {
    if (!shown || p.stages != shown->stages || p.microbatches != shown->microbatches || p.rounds != shown->rounds ||
        p.stageAxes != shown->stageAxes) {
      const int64_t S = p.stages, M = p.microbatches, R = p.rounds, T = p.trip;
      os << prefix << "  stages S = " << S;
      if (!p.stageAxes.empty()) os << " (" << p.stageAxes << ")";
      os << ", microbatches M = " << M << ", rounds R = " << R << ": M*R + S - 1 = " << T << " iterations";
      const int64_t layers = p.layers ? p.layers : (forward ? forward->layers : 0);
      if (layers) os << ", " << layers << (layers == 1 ? " layer" : " layers") << " per stage per round";
      char frac[32];
      std::snprintf(frac, sizeof frac, "%.2f", T > 0 ? (double)(S - 1) / (double)T : 0.0);
      os << "\n"
         << prefix << "  predicted bubble fraction (S - 1)/(M*R + S - 1) = " << (S - 1) << "/" << T << " = " << frac
         << "\n";
      shown = &p;
    }
    os << prefix << "  " << (p.backward ? "backward" : "forward") << " time loop, per iteration: ";
    if (p.shifts == 0) {
      os << "no shift\n";
    } else {
      // Before the stage loop and after it: which is which when both.
      const bool both = !p.before.empty() && !p.after.empty();
      os << kindList(p.before);
      if (both) os << " (" << (p.backward ? "the forward shift recomputed" : "the state's shift") << ") + ";
      os << kindList(p.after);
      if (both)
        os << " (" << (p.backward ? "the gradients' shift back" : "the last stage's row back to the waiting microbatches")
           << ")";
      if (!p.shiftType.empty()) os << (both ? ", each of " : " of ") << p.shiftType;
      os << ", " << bytes(p.shiftBytes) << "; x " << p.trip << " iterations = " << bytes(p.shiftBytes * (uint64_t)p.trip)
         << "\n";
    }
    total += p.shiftBytes * (uint64_t)p.trip;
    for (const auto* side : {&p.before, &p.after})
      for (const auto& [k, n] : *side) kinds[k] += n * p.trip;
    parts.push_back((p.backward ? "backward " : "forward ") + bytes(p.shiftBytes * (uint64_t)p.trip));
    if (!p.backward) forward = &p;
  }
  os << prefix << "  shifts per " << per << ": " << (kinds.empty() ? "none" : kindList(kinds)) << ", " << bytes(total);
  if (parts.size() > 1) {
    os << " (";
    for (size_t k = 0; k < parts.size(); ++k) os << (k ? " + " : "") << parts[k];
    os << ")";
  }
  os << "\n";
  return os.str();
}

}  // namespace gsl::repl
