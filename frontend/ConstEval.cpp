// Compile-time values: constant expressions (folded with overflow and
// exact-division checks), dims and types, and @shard annotations checked
// against their mesh and tensor type.
#include "frontend/SemaImpl.h"

#include <cmath>
#include <sstream>

namespace gsl::frontend::sema {

std::optional<Num> Sema::constEval(const ast::Expr& e) {
  switch (e.kind) {
    case ast::ExprKind::Int: return Num{true, e.ival, 0};
    case ast::ExprKind::Float: return Num{false, 0, e.fval};
    case ast::ExprKind::Name: {
      if (auto sv = shapeVars_.back().find(e.text); sv != shapeVars_.back().end())
        return Num{true, sv->second, 0};
      if (e.text == "NP") return Num{true, opts_.np, 0};
      auto it = consts_.find(e.text);
      if (it != consts_.end()) return it->second;
      auto g = globals_.find(e.text);
      if (g != globals_.end() && g->second.kind == ast::DeclKind::Const)
        err(e.loc, "const '" + e.text + "' is used before its value is known (declare it earlier)");
      else if (g != globals_.end())
        err(e.loc, "'" + e.text + "' is a " + ast::declKindName(g->second.kind) + ", not a compile-time constant");
      else
        err(e.loc, "unknown name '" + e.text + "'" + suggest(e.text, constNames()));
      return std::nullopt;
    }
    case ast::ExprKind::Unary: {
      auto v = constEval(*e.elems[0]);
      if (!v) return v;
      switch (e.unaryOp) {
        case ast::UnaryOp::Plus: return v;
        case ast::UnaryOp::Neg:
          if (v->isInt) v->i = -v->i;
          else v->f = -v->f;
          return v;
        case ast::UnaryOp::Not: break;
      }
      break;
    }
    case ast::ExprKind::Binary: {
      auto a = constEval(*e.elems[0]);
      auto b = a ? constEval(*e.elems[1]) : std::nullopt;
      if (!a || !b) return std::nullopt;
      // An inexact division that involves NP is usually a mesh that needs
      // another -np (`NP / 2` at -np 1): say so.
      if (e.binaryOp == ast::BinaryOp::Div && a->isInt && b->isInt && b->i != 0 && b->i != -1 && a->i % b->i != 0 && dependsOnNP(e)) {
        err(e.loc, std::to_string(a->i) + " / " + std::to_string(b->i) +
                       " is not exact (const division must divide evenly; NP = " + std::to_string(opts_.np) +
                       ", the number of ranks given by -np)");
        return std::nullopt;
      }
      return foldBinary(e.binaryOp, *a, *b, e.loc, true);
    }
    case ast::ExprKind::Call: {
      // ceil(x) / floor(x) round a real value (`ceil(2.0 * S / E)`: a
      // float operand makes `/` true division) to an integer.
      if ((e.text == "ceil" || e.text == "floor") && e.args.size() == 1 && e.args[0].keyword.empty()) {
        auto v = constEval(*e.args[0].value);
        if (!v || v->isInt) return v;
        double r = e.text == "ceil" ? std::ceil(v->f) : std::floor(v->f);
        if (!(std::fabs(r) < 9.0e18)) {
          err(e.loc, e.text + "(...) of " + std::to_string(v->f) + " does not fit in a 64-bit integer");
          return std::nullopt;
        }
        return Num{true, (int64_t)r, 0};
      }
      if (e.text == "ceil" || e.text == "floor") {
        err(e.loc, e.text + " in a constant expression takes one argument");
        return std::nullopt;
      }
      break;
    }
    default: break;
  }
  err(e.loc, "expected a compile-time constant expression");
  return std::nullopt;
}

bool Sema::dependsOnNP(const ast::Expr& e) const {
  if (e.kind == ast::ExprKind::Name && (e.text == "NP" || npConsts_.count(e.text))) return true;
  for (const auto& x : e.elems)
    if (x && dependsOnNP(*x)) return true;
  for (const auto& a : e.args)
    if (a.value && dependsOnNP(*a.value)) return true;
  return false;
}

std::vector<std::string> Sema::constNames() const {
  std::vector<std::string> r{"NP"};
  for (auto& [k, v] : consts_) r.push_back(k);
  return r;
}

// Folds a binary op on two numbers. `exactDiv`: integer `/` must divide
// exactly (const expressions); otherwise `/` is true division.
std::optional<Num> Sema::foldBinary(ast::BinaryOp op, Num a, Num b, SourceLoc l, bool exactDiv) {
  using B = ast::BinaryOp;
  if (!ast::info(op).arithmetic) {
    err(l, std::string("operator '") + ast::spelling(op) + "' is not allowed in a constant expression");
    return std::nullopt;
  }
  if (a.isInt && b.isInt) {
    int64_t r = 0;
    bool ovf = false;
    switch (op) {
      case B::Add: ovf = __builtin_add_overflow(a.i, b.i, &r); break;
      case B::Sub: ovf = __builtin_sub_overflow(a.i, b.i, &r); break;
      case B::Mul: ovf = __builtin_mul_overflow(a.i, b.i, &r); break;
      case B::Div:
      case B::Mod:
      case B::FloorDiv:
        if (b.i == 0) {
          err(l, "division by zero in a constant expression");
          return std::nullopt;
        }
        // Outside const expressions `/` is true division (f32) even when it
        // divides evenly: 6 / 3 is 2.0, as i32 / i32 on tensors.
        if (op == B::Div && !exactDiv) return Num{false, 0, (double)a.i / (double)b.i};
        if (b.i == -1) {  // INT64_MIN / -1 overflows (and INT64_MIN % -1 traps)
          if (op != B::Mod) ovf = __builtin_sub_overflow(int64_t(0), a.i, &r);
          else r = 0;
        } else if (op == B::Div) {
          if (a.i % b.i != 0) {
            err(l, std::to_string(a.i) + " / " + std::to_string(b.i) + " is not exact (const division must divide evenly)");
            return std::nullopt;
          }
          r = a.i / b.i;
        } else if (op == B::FloorDiv) {  // Python's //: rounded toward minus infinity
          r = a.i / b.i;
          if (a.i % b.i != 0 && (a.i % b.i < 0) != (b.i < 0)) --r;
        } else {  // Python's %: the result has the divisor's sign
          r = a.i % b.i;
          if (r != 0 && (r < 0) != (b.i < 0)) r += b.i;
        }
        break;
      case B::Pow: {
        if (b.i < 0) return Num{false, 0, std::pow((double)a.i, (double)b.i)};
        // Square and multiply: 1 ** 10**15 must not loop 10**15 times.
        r = 1;
        int64_t base = a.i;
        for (int64_t k = b.i; k > 0 && !ovf; k >>= 1) {
          if (k & 1) ovf = __builtin_mul_overflow(r, base, &r);
          if (k > 1 && !ovf) ovf = __builtin_mul_overflow(base, base, &base);
        }
        break;
      }
      default: GSL_ASSERT(false, std::string("foldBinary: no integer fold for '") + ast::spelling(op) + "'");
    }
    if (ovf) {
      err(l, "integer overflow in a constant expression: " + std::to_string(a.i) + " " + ast::spelling(op) + " " +
                 std::to_string(b.i) + " does not fit in 64 bits");
      return std::nullopt;
    }
    return Num{true, r, 0};
  }
  double x = a.d(), y = b.d(), r;
  switch (op) {
    case B::Add: r = x + y; break;
    case B::Sub: r = x - y; break;
    case B::Mul: r = x * y; break;
    case B::Div: r = x / y; break;
    case B::Mod: r = x - std::floor(x / y) * y; break;
    case B::FloorDiv: r = std::floor(x / y); break;
    case B::Pow: r = std::pow(x, y); break;
    default: GSL_ASSERT(false, std::string("foldBinary: no fold for '") + ast::spelling(op) + "'");
  }
  return Num{false, 0, r};
}

std::optional<int64_t> Sema::evalInt(const ast::Expr& e, const std::string& what) {
  auto n = constEval(e);
  if (!n) return std::nullopt;
  if (!n->isInt) {
    std::ostringstream v;
    v << n->f;
    err(startLoc(e), what + " must be an integer, got " + v.str() + " (round it with ceil(...) or floor(...))");
    return std::nullopt;
  }
  return n->i;
}

std::optional<TensorType> Sema::lowerType(const ast::TypeExpr& t) {
  TensorType r;
  r.dtype = t.dtype;
  bool ok = true;
  for (size_t i = 0; i < t.dims.size(); ++i) {
    auto v = evalInt(*t.dims[i], "a dimension");
    if (!v) {
      ok = false;
      continue;
    }
    if (*v <= 0) {
      err(startLoc(*t.dims[i]), "dimension " + std::to_string(i) + " of the type must be positive, got " + std::to_string(*v));
      ok = false;
    }
    r.shape.push_back(*v);
  }
  if (!ok) return std::nullopt;
  if (!r.sizeFits()) {
    err(t.loc, "type " + r.str() + " is too large: its size in bytes overflows 64 bits");
    return std::nullopt;
  }
  return r;
}

std::optional<Sharding> Sema::checkSharding(const ast::ShardAnnot& a, const TensorType& t) {
  const Mesh* m = mod_->findMesh(a.mesh);
  if (!m) {
    auto g = globals_.find(a.mesh);
    if (g != globals_.end() && g->second.kind == ast::DeclKind::Mesh) return std::nullopt;  // mesh had its own error
    std::vector<std::string> meshes;
    for (auto& mm : mod_->meshes) meshes.push_back(mm.name);
    err(a.loc, "unknown mesh '" + a.mesh + "'" + suggest(a.mesh, meshes));
    return std::nullopt;
  }
  if (a.replicate) return Sharding::replicated(a.mesh, t.rank());
  if ((int)a.dims.size() != t.rank()) {
    err(a.loc, "@shard gives " + std::to_string(a.dims.size()) + " entr" + (a.dims.size() == 1 ? "y" : "ies") +
                   " for a tensor of rank " + std::to_string(t.rank()) + " (" + t.str() + ")");
    return std::nullopt;
  }
  Sharding s;
  s.mesh = Symbol(a.mesh);
  std::set<std::string> used;
  for (size_t d = 0; d < a.dims.size(); ++d) {
    for (const auto& ax : a.dims[d]) {
      if (m->axisIndex(ax) < 0) {
        std::string axes;
        for (auto& x : m->axes) axes += (axes.empty() ? "" : ", ") + x.name;
        err(a.dimLocs[d], "mesh '" + m->name + "' has no axis '" + ax + "' (its axes: " + axes + ")");
        return std::nullopt;
      }
      if (!used.insert(ax).second) {
        err(a.dimLocs[d], "mesh axis '" + ax + "' is used twice in one sharding");
        return std::nullopt;
      }
    }
    // A dim the axes do not divide is padded (docs/sharding.md, "Uneven
    // dims"): no error.
    s.dims.push_back(axesOf(a.dims[d]));
  }
  return s;
}

}  // namespace gsl::frontend::sema
