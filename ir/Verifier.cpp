#include "ir/Verifier.h"

#include <set>
#include <unordered_set>

#include "ir/Loop.h"
#include "support/Diagnostics.h"

namespace gsl::ir {

// Checks shared with ir/IRParser.cpp (declared there).
namespace detail {

// "" or why `t` is not a valid tensor type (negative dim, too large).
std::string checkType(const TensorType& t) {
  for (int64_t d : t.shape)
    if (d < 0) return "type " + t.str() + " has a negative dimension";
  if (!t.sizeFits()) return "type " + t.str() + " is too large (its byte size overflows 64 bits)";
  return "";
}

// "" or why `m` is not a valid mesh (an axis size < 1, an axis named twice).
std::string checkMesh(const Mesh& m) {
  std::set<std::string> seen;
  int64_t n = 1;
  for (const auto& a : m.axes) {
    if (!seen.insert(a.name).second) return "mesh @" + m.name + " names axis '" + a.name + "' twice";
    if (a.size < 1)
      return "mesh @" + m.name + " axis '" + a.name + "' has size " + std::to_string(a.size) +
             " (must be >= 1)";
    if (n > INT32_MAX / a.size) return "mesh @" + m.name + " has too many devices";
    n *= a.size;
  }
  return "";
}

// "" or why `s` is not a valid sharding of a rank-`rank` value of module `m`.
std::string checkSharding(const Module& m, const Sharding& s, int rank) {
  const Mesh* mesh = m.findMesh(s.mesh);
  if (!mesh) return "sharding " + s.str() + " names an undeclared mesh '" + s.mesh + "'";
  if ((int)s.dims.size() != rank)
    return "sharding " + s.str() + " has " + std::to_string(s.dims.size()) +
           " entries for a value of rank " + std::to_string(rank);
  std::set<std::string> used;
  auto use = [&](const std::string& ax) -> std::string {
    if (mesh->axisIndex(ax) < 0)
      return "sharding " + s.str() + " names axis '" + ax + "', which mesh @" + mesh->name +
             " does not have";
    if (!used.insert(ax).second) return "sharding " + s.str() + " uses mesh axis '" + ax + "' twice";
    return "";
  };
  for (const auto& d : s.dims)
    for (const auto& ax : d)
      if (auto e = use(ax); !e.empty()) return e;
  for (const auto& ax : s.partial)
    if (auto e = use(ax); !e.empty()) return e;
  return "";
}

static const char* kindName(ArgKind k) {
  switch (k) {
    case ArgKind::Int: return "an integer";
    case ArgKind::Ints: return "an integer list";
    case ArgKind::Float: return "a number";
    case ArgKind::Bool: return "true or false";
    case ArgKind::String:
    case ArgKind::Einsum:
    case ArgKind::Reduce: return "a string";  // as IR text writes them
    case ArgKind::DTypeArg: return "a dtype";
    default: return "a static value";
  }
}

static bool attrFits(const Attr& a, ArgKind k) {
  switch (k) {
    case ArgKind::Int: return std::holds_alternative<int64_t>(a);
    case ArgKind::Ints: return std::holds_alternative<std::vector<int64_t>>(a);
    case ArgKind::Float: return std::holds_alternative<double>(a) || std::holds_alternative<int64_t>(a);
    case ArgKind::Bool: return std::holds_alternative<bool>(a);
    case ArgKind::String: return std::holds_alternative<std::string>(a);
    case ArgKind::DTypeArg: return std::holds_alternative<DType>(a);
    case ArgKind::Einsum: return std::holds_alternative<EinsumSpec>(a);
    case ArgKind::Reduce: return std::holds_alternative<ReduceOp>(a);
    default: return false;
  }
}

// The operand count range of an op: [min, max], max < 0 = unbounded.
static void operandRange(const OpInfo& info, int& lo, int& hi) {
  switch (info.cls) {
    case OpClass::Unary: lo = hi = 1; return;
    case OpClass::Binary: lo = hi = 2; return;
    case OpClass::Ternary: lo = hi = 3; return;
    case OpClass::Random: lo = 1; hi = 2; return;  // dropout: x [, key]
    default: break;
  }
  lo = hi = 0;
  for (const auto& a : info.args) {
    if (a.kind == ArgKind::Tensor) {
      ++lo;
      if (hi >= 0) ++hi;
    } else if (a.kind == ArgKind::Tensors || a.kind == ArgKind::Variadic) {
      ++lo;
      hi = -1;
    }
  }
}

// Checks an op's operand count and that its attributes have the kinds its
// type rule reads (so running the rule cannot hit an internal error).
// Missing attributes that have a default get it. `fromText` (the IR
// parser): the attrs of parsed kinds (an einsum spec, a reduction), which
// IR text writes as strings, are parsed (parseStringAttr).
std::string checkOpSignature(const OpInfo& info, size_t numOperands, AttrMap& attrs, bool fromText) {
  int lo, hi;
  operandRange(info, lo, hi);
  auto plural = [](int n) { return std::to_string(n) + (n == 1 ? " operand" : " operands"); };
  if ((int64_t)numOperands < lo || (hi >= 0 && (int64_t)numOperands > hi)) {
    std::string want = hi < 0 ? "at least " + plural(lo) : plural(lo);
    return std::string(info.mnemonic) + " takes " + want + ", got " + std::to_string(numOperands);
  }
  for (const auto& a : info.args) {
    if (a.kind == ArgKind::Tensor || a.kind == ArgKind::Tensors || a.kind == ArgKind::Variadic) continue;
    const Attr* v = attrs.get(a.name);
    if (!v) {
      if (a.dflt) attrs.set(a.name, *a.dflt);
      else if (!a.optional)
        return std::string(info.mnemonic) + " needs attribute '" + a.name + "' (" + kindName(a.kind) + ")";
      continue;
    }
    if (fromText && (a.kind == ArgKind::Einsum || a.kind == ArgKind::Reduce) && std::holds_alternative<std::string>(*v)) {
      Attr parsed;
      if (auto e = parseStringAttr(info, a, std::get<std::string>(*v), numOperands, parsed); !e.empty()) return e;
      attrs.set(a.name, std::move(parsed));
      continue;
    }
    if (!attrFits(*v, a.kind))
      return std::string("attribute '") + a.name + "' of " + info.mnemonic + " must be " +
             kindName(a.kind) + ", got " + attrStr(*v);
  }
  if (info.kind == OpKind::Param) {
    const Attr* v = attrs.get("name");
    if (!v || !std::holds_alternative<std::string>(*v))
      return "param needs a string attribute 'name'";
  }
  return "";
}

}  // namespace detail

namespace {

std::string valueName(const Value* v) { return "%" + std::to_string(v->id); }

// `body`: f is the body of a loop of function @f.name (`where` says so).
std::string checkFunction(const Module& m, const Function& f, bool body = false) {
  const std::string where = body ? "function @" + f.name + ": loop body: " : "function @" + f.name + ": ";
  std::unordered_set<const Value*> defined;
  auto checkValueSharding = [&](const Value* v, const std::string& what) -> std::string {
    if (!v->sharding) return "";
    if (auto e = detail::checkSharding(m, *v->sharding, v->type.rank()); !e.empty())
      return where + what + ": " + e;
    return "";
  };
  for (size_t i = 0; i < f.args.size(); ++i) {
    const Value* a = f.args[i];
    if (!a) return where + "argument " + std::to_string(i) + " is null";
    std::string what = "argument " + valueName(a);
    if (a->def) return where + what + " has a defining op";
    if (a->argIndex != (int)i)
      return where + what + " has argIndex " + std::to_string(a->argIndex) + " but is argument " +
             std::to_string(i);
    if (!defined.insert(a).second) return where + what + " is listed twice";
    if (auto e = detail::checkType(a->type); !e.empty()) return where + what + ": " + e;
    if (auto e = checkValueSharding(a, what); !e.empty()) return e;
  }
  for (size_t oi = 0; oi < f.ops.size(); ++oi) {
    const Op* op = f.ops[oi].get();
    if (!op) return where + "op " + std::to_string(oi) + " is null";
    const OpInfo& info = op->info();
    const Value* r = op->result;
    if (!r || op->results.empty() || op->results[0] != r)
      return where + "op " + std::to_string(oi) + " (" + info.mnemonic + ") has no result";
    std::string what = valueName(r) + " = " + info.mnemonic;
    const bool isLoop = op->kind == OpKind::Loop;
    if (op->results.size() != 1 && !isLoop)
      return where + what + ": has " + std::to_string(op->results.size()) + " results (only a loop has several)";
    if (!!op->body != isLoop)
      return where + what + (isLoop ? ": a loop without a body" : ": an op with a body that is not a loop");
    if (body && op->kind == OpKind::Param)
      return where + what + ": a loop body cannot read a param (pass it to the loop as an operand)";
    for (const Value* res : op->results) {
      if (!res) return where + what + ": a result is null";
      if (res->def != op) return where + what + ": its result does not point back to the op";
      if (res->argIndex >= 0) return where + what + ": its result is marked as an argument";
    }
    std::vector<TensorType> in;
    for (size_t i = 0; i < op->operands.size(); ++i) {
      const Value* v = op->operands[i];
      if (!v) return where + what + ": operand " + std::to_string(i) + " is null";
      if (!defined.count(v))
        return where + what + ": operand " + std::to_string(i) + " (" + valueName(v) +
               ") is not defined before use in this function";
      in.push_back(v->type);
    }
    for (const Value* res : op->results)
      if (auto e = detail::checkType(res->type); !e.empty()) return where + what + ": " + e;
    AttrMap attrs = op->attrs;
    if (auto e = detail::checkOpSignature(info, op->operands.size(), attrs, false); !e.empty())
      return where + what + ": " + e;
    if (isLoop) {
      if (auto e = checkFunction(m, *op->body, true); !e.empty()) return e;
      std::vector<TensorType> types;
      if (auto e = inferLoopTypes(in, attrs, *op->body, types); !e.empty()) return where + what + ": " + e;
      if (types.size() != op->results.size())
        return where + what + ": has " + std::to_string(op->results.size()) + " results but its body gives " +
               std::to_string(types.size());
      for (size_t i = 0; i < types.size(); ++i)
        if (types[i] != op->results[i]->type)
          return where + what + ": result " + std::to_string(i) + " has type " + op->results[i]->type.str() +
                 " but the loop's type rule gives " + types[i].str();
    } else if (info.infer) {
      TensorType t;
      if (auto e = inferType(op->kind, in, attrs, t); !e.empty()) return where + what + ": " + e;
      if (t != r->type)
        return where + what + ": result type is " + r->type.str() + " but the type rule gives " + t.str();
    } else if (op->kind == OpKind::Param) {
      const std::string& name = attrs.getString("name");
      const Param* p = m.findParam(name);
      if (!p) return where + what + ": names an undeclared param @" + name;
      // In a per-rank program the param op yields the rank's block (padded
      // where its blocks do not divide a dim).
      TensorType block = p->type;
      if (p->sharding && m.findMesh(p->sharding->mesh)) block.shape = localShape(m, p->type, p->sharding);
      if (p->type != r->type && block != r->type)
        return where + what + ": result type is " + r->type.str() + " but param @" + name + " is " +
               p->type.str();
    }
    for (const Value* res : op->results) {
      if (auto e = checkValueSharding(res, what); !e.empty()) return e;
      if (!defined.insert(res).second) return where + what + ": its result is defined twice";
    }
  }
  for (size_t i = 0; i < f.results.size(); ++i) {
    const Value* v = f.results[i];
    if (!v) return where + "result " + std::to_string(i) + " is null";
    if (!defined.count(v))
      return where + "result " + std::to_string(i) + " (" + valueName(v) +
             ") is not defined in this function";
  }
  if (f.resultShardings.size() > f.results.size())
    return where + "has " + std::to_string(f.resultShardings.size()) + " result shardings for " +
           std::to_string(f.results.size()) + " results";
  for (size_t i = 0; i < f.resultShardings.size(); ++i) {
    if (!f.resultShardings[i]) continue;
    if (auto e = detail::checkSharding(m, *f.resultShardings[i], f.results[i]->type.rank()); !e.empty())
      return where + "result " + std::to_string(i) + ": " + e;
  }
  return "";
}

}  // namespace

std::string verifyFunction(const Module& m, const Function& f) { return checkFunction(m, f); }

std::string verify(const Module& m) {
  if (m.np < 1) return "np is " + std::to_string(m.np) + " (must be >= 1)";
  std::set<std::string> names;
  for (const auto& mesh : m.meshes) {
    if (!names.insert(mesh.name).second) return "mesh @" + mesh.name + " is declared twice";
    if (auto e = detail::checkMesh(mesh); !e.empty()) return e;
  }
  names.clear();
  for (const auto& p : m.params) {
    if (!names.insert(p.name).second) return "param @" + p.name + " is declared twice";
    if (auto e = detail::checkType(p.type); !e.empty()) return "param @" + p.name + ": " + e;
    if (p.sharding)
      if (auto e = detail::checkSharding(m, *p.sharding, p.type.rank()); !e.empty())
        return "param @" + p.name + ": " + e;
  }
  names.clear();
  for (const auto& f : m.functions) {
    if (!f) return "a function is null";
    if (!names.insert(f->name).second) return "function @" + f->name + " is declared twice";
    if (auto e = checkFunction(m, *f); !e.empty()) return e;
  }
  return "";
}

void verifyOrDie(const Module& m, const char* after) {
  std::string e = verify(m);
  if (!e.empty())
    internalError(__FILE__, __LINE__,
                  std::string("invalid IR after ") + (after ? after : "?") + ": " + e);
}

}  // namespace gsl::ir
