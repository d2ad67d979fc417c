#include "ir/OpTable.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "ir/GradRules.h"
#include "ir/Loop.h"
#include "ir/ShardRules.h"
#include "support/Diagnostics.h"

namespace gsl::ir {

// ---------------------------------------------------------------- helpers

bool broadcastShapes(const Shape& a, const Shape& b, Shape& out) {
  size_t n = std::max(a.size(), b.size());
  out.assign(n, 1);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) return false;
    out[i] = da == 1 ? db : da;
  }
  return true;
}

static std::string ty(const TensorType& t) { return t.str(); }

// Normalises axis `a` for a tensor of rank `r` (NumPy: -1 is the last).
static std::string normAxis(int64_t& a, int r, const char* what = "axis") {
  if (a < -r || a >= r)
    return std::string(what) + " " + std::to_string(a) + " is out of range for a tensor of rank " +
           std::to_string(r);
  if (a < 0) a += r;
  return "";
}

static std::string needDType(const TensorType& t, std::initializer_list<DType> ok, const char* op) {
  for (DType d : ok)
    if (t.dtype == d) return "";
  std::string names;
  for (DType d : ok) names += std::string(names.empty() ? "" : " or ") + dtypeName(d);
  return std::string(op) + " needs " + names + ", got " + ty(t);
}

// ---------------------------------------------------------------- rules

static std::string ruleSame(const std::vector<TensorType>& in, AttrMap&, TensorType& out) {
  out = in[0];
  return "";
}

#define FLOAT_UNARY(NAME)                                                                 \
  static std::string rule_##NAME(const std::vector<TensorType>& in, AttrMap&, TensorType& out) { \
    if (auto e = needDType(in[0], {DType::F32, DType::BF16}, #NAME); !e.empty()) return e; \
    out = in[0];                                                                          \
    return "";                                                                            \
  }
FLOAT_UNARY(exp) FLOAT_UNARY(log) FLOAT_UNARY(sqrt) FLOAT_UNARY(rsqrt) FLOAT_UNARY(tanh)
FLOAT_UNARY(gelu) FLOAT_UNARY(erf) FLOAT_UNARY(gelu_exact) FLOAT_UNARY(sigmoid)
#undef FLOAT_UNARY

static std::string ruleNumericUnary(const std::vector<TensorType>& in, AttrMap&, TensorType& out) {
  if (auto e = needDType(in[0], {DType::F32, DType::I32, DType::BF16}, "this operation"); !e.empty()) return e;
  out = in[0];
  return "";
}

static std::string ruleNot(const std::vector<TensorType>& in, AttrMap&, TensorType& out) {
  if (auto e = needDType(in[0], {DType::Bool}, "not"); !e.empty()) return e;
  out = in[0];
  return "";
}

static std::string ruleCast(const std::vector<TensorType>& in, AttrMap& at, TensorType& out) {
  out = in[0];
  out.dtype = at.getDType("dtype");
  return "";
}

static std::string binaryShape(const std::vector<TensorType>& in, Shape& s) {
  if (!broadcastShapes(in[0].shape, in[1].shape, s))
    return "shapes " + ty(in[0]) + " and " + ty(in[1]) + " cannot be broadcast together";
  return "";
}

static std::string sameDType(const TensorType& a, const TensorType& b) {
  if (a.dtype != b.dtype)
    return std::string("mismatched element types ") + ty(a) + " and " + ty(b) + " (use cast)";
  return "";
}

static std::string ruleArith(const std::vector<TensorType>& in, AttrMap&, TensorType& out) {
  if (auto e = sameDType(in[0], in[1]); !e.empty()) return e;
  if (in[0].dtype == DType::Bool) return "arithmetic on bool values " + ty(in[0]) + " (use cast)";
  out.dtype = in[0].dtype;
  return binaryShape(in, out.shape);
}

static std::string ruleDiv(const std::vector<TensorType>& in, AttrMap& at, TensorType& out) {
  if (auto e = ruleArith(in, at, out); !e.empty()) return e;
  if (!isFloat(in[0].dtype)) return "div needs f32 or bf16 operands, got " + ty(in[0]);
  return "";
}

// `//` (floor division, Python's and NumPy's): i32 only (a float `//`
// would need a floor op; `floor(a / b)` in const expressions).
static std::string ruleFloorDiv(const std::vector<TensorType>& in, AttrMap& at, TensorType& out) {
  if (auto e = ruleArith(in, at, out); !e.empty()) return e;
  if (in[0].dtype != DType::I32) return "floor division // needs i32 operands, got " + ty(in[0]) + " (use a / b on floats)";
  return "";
}

static std::string ruleCompare(const std::vector<TensorType>& in, AttrMap&, TensorType& out) {
  if (auto e = sameDType(in[0], in[1]); !e.empty()) return e;
  out.dtype = DType::Bool;
  return binaryShape(in, out.shape);
}

static std::string ruleLogic(const std::vector<TensorType>& in, AttrMap&, TensorType& out) {
  for (const auto& t : in)
    if (auto e = needDType(t, {DType::Bool}, "and/or"); !e.empty()) return e;
  out.dtype = DType::Bool;
  return binaryShape(in, out.shape);
}

static std::string ruleWhere(const std::vector<TensorType>& in, AttrMap&, TensorType& out) {
  if (in[0].dtype != DType::Bool) return "where's condition must be bool, got " + ty(in[0]);
  if (auto e = sameDType(in[1], in[2]); !e.empty()) return e;
  Shape s1, s2;
  if (!broadcastShapes(in[0].shape, in[1].shape, s1) || !broadcastShapes(s1, in[2].shape, s2))
    return "shapes " + ty(in[0]) + ", " + ty(in[1]) + " and " + ty(in[2]) +
           " cannot be broadcast together";
  out.dtype = in[1].dtype;
  out.shape = s2;
  return "";
}

static std::string ruleMatMul(const std::vector<TensorType>& in, AttrMap&, TensorType& out) {
  const TensorType &a = in[0], &b = in[1];
  if (!isFloat(a.dtype) || !isFloat(b.dtype))
    return "matmul needs f32 or bf16 operands, got " + ty(a) + " and " + ty(b);
  if (auto e = sameDType(a, b); !e.empty()) return e;
  if (a.rank() < 1 || b.rank() < 1) return "matmul needs operands of rank >= 1, got " + ty(a) + " and " + ty(b);
  Shape sa = a.shape, sb = b.shape;
  if (sa.size() == 1) sa.insert(sa.begin(), 1);
  if (sb.size() == 1) sb.push_back(1);
  int64_t k1 = sa.back(), k2 = sb[sb.size() - 2];
  if (k1 != k2)
    return "matmul contracting dims differ: " + ty(a) + " @ " + ty(b) + " (" + std::to_string(k1) +
           " vs " + std::to_string(k2) + ")";
  Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2), batch;
  if (!broadcastShapes(ba, bb, batch))
    return "matmul batch dims of " + ty(a) + " and " + ty(b) + " cannot be broadcast together";
  out.dtype = a.dtype;  // bf16 @ bf16 accumulates in f32, rounds the result to bf16
  out.shape = batch;
  if (a.rank() > 1) out.shape.push_back(sa[sa.size() - 2]);
  if (b.rank() > 1) out.shape.push_back(sb.back());
  return "";
}

static std::string ruleEinsum(const std::vector<TensorType>& in, AttrMap& at, TensorType& out) {
  // Parsed, its operand count checked, where it entered (parseStringAttr).
  const EinsumSpec& es = at.getEinsum("spec");
  const std::string& spec = es.text;
  GSL_ASSERT(es.inputs.size() == in.size(), "internal error: einsum spec \"" + spec + "\" for " +
                                                std::to_string(in.size()) + " operands");
  std::map<char, int64_t> size;
  std::map<char, size_t> firstOperand;  // where each label's size came from
  for (size_t i = 0; i < in.size(); ++i) {
    if (!isFloat(in[i].dtype)) return "einsum needs f32 or bf16 operands, got " + ty(in[i]);
    if (auto e = sameDType(in[0], in[i]); !e.empty()) return "einsum: " + e;
    if ((int)es.inputs[i].size() != in[i].rank())
      return "einsum operand " + std::to_string(i + 1) + " has type " + ty(in[i]) + " but \"" +
             es.inputs[i] + "\" names " + std::to_string(es.inputs[i].size()) + " dims";
    for (int d = 0; d < in[i].rank(); ++d) {
      char c = es.inputs[i][d];
      auto it = size.find(c);
      if (it != size.end() && it->second != in[i].shape[d]) {
        size_t j = firstOperand[c];
        return std::string("einsum label '") + c + "' has size " + std::to_string(it->second) +
               " in operand " + std::to_string(j + 1) + " (" + ty(in[j]) + ") but " +
               std::to_string(in[i].shape[d]) + " in operand " + std::to_string(i + 1) + " (" +
               ty(in[i]) + ") of \"" + spec + "\"";
      }
      if (it == size.end()) firstOperand[c] = i;
      size[c] = in[i].shape[d];
    }
  }
  out.dtype = in.empty() ? DType::F32 : in[0].dtype;
  out.shape.clear();
  for (char c : es.output) out.shape.push_back(size[c]);
  return "";
}

// Canonicalises an `axis` int-list attr (absent: all axes) to sorted, unique,
// non-negative axes.
static std::string canonAxes(AttrMap& at, int rank, const char* key = "axis") {
  std::vector<int64_t> axes;
  if (at.has(key)) {
    axes = at.getInts(key);
    for (auto& a : axes)
      if (auto e = normAxis(a, rank); !e.empty()) return e;
    std::sort(axes.begin(), axes.end());
    if (std::adjacent_find(axes.begin(), axes.end()) != axes.end())
      return "axis " + std::to_string(*std::adjacent_find(axes.begin(), axes.end())) +
             " is listed twice";
  } else {
    for (int i = 0; i < rank; ++i) axes.push_back(i);
  }
  at.set(key, axes);
  return "";
}

static std::string ruleReduce(const std::vector<TensorType>& in, AttrMap& at, TensorType& out) {
  if (auto e = needDType(in[0], {DType::F32, DType::I32, DType::BF16}, "reduction"); !e.empty()) return e;
  if (auto e = canonAxes(at, in[0].rank()); !e.empty()) return e;
  if (!at.has("keepdims")) at.set("keepdims", false);
  bool keep = at.getBool("keepdims");
  const auto& axes = at.getInts("axis");
  out.dtype = in[0].dtype;
  out.shape.clear();
  for (int d = 0; d < in[0].rank(); ++d) {
    bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (!reduced) out.shape.push_back(in[0].shape[d]);
    else if (keep) out.shape.push_back(1);
  }
  return "";
}

static std::string ruleMean(const std::vector<TensorType>& in, AttrMap& at, TensorType& out) {
  if (auto e = needDType(in[0], {DType::F32, DType::BF16}, "mean"); !e.empty()) return e;
  return ruleReduce(in, at, out);
}

static std::string oneAxis(const TensorType& t, AttrMap& at, const char* key = "axis") {
  int64_t a = at.getInt(key);
  if (auto e = normAxis(a, t.rank()); !e.empty()) return e;
  at.set(key, a);
  return "";
}

static std::string ruleArgMax(const std::vector<TensorType>& in, AttrMap& at, TensorType& out) {
  if (auto e = needDType(in[0], {DType::F32, DType::I32, DType::BF16}, "argmax"); !e.empty()) return e;
  if (in[0].rank() == 0) return "argmax needs a tensor of rank >= 1, got " + ty(in[0]);
  if (auto e = oneAxis(in[0], at); !e.empty()) return e;
  out.dtype = DType::I32;
  out.shape = in[0].shape;
  out.shape.erase(out.shape.begin() + at.getInt("axis"));
  return "";
}

static std::string ruleSoftmax(const std::vector<TensorType>& in, AttrMap& at, TensorType& out) {
  if (auto e = needDType(in[0], {DType::F32, DType::BF16}, "softmax"); !e.empty()) return e;
  if (in[0].rank() == 0) return "softmax needs a tensor of rank >= 1, got " + ty(in[0]);
  if (auto e = oneAxis(in[0], at); !e.empty()) return e;
  out = in[0];
  return "";
}

static std::string ruleLayerNorm(const std::vector<TensorType>& in, AttrMap& at, TensorType& out) {
  if (auto e = needDType(in[0], {DType::F32, DType::BF16}, "layer_norm"); !e.empty()) return e;
  if (in[0].rank() == 0) return "layer_norm needs a tensor of rank >= 1, got " + ty(in[0]);
  if (auto e = canonAxes(at, in[0].rank()); !e.empty()) return e;
  if (!at.has("eps")) at.set("eps", 1e-5);
  if (at.getFloat("eps") <= 0) return "layer_norm eps must be positive";
  out = in[0];
  return "";
}

static std::string ruleCumSum(const std::vector<TensorType>& in, AttrMap& at, TensorType& out) {
  if (auto e = needDType(in[0], {DType::F32, DType::I32, DType::BF16}, "cumsum"); !e.empty()) return e;
  if (in[0].rank() == 0) return "cumsum needs a tensor of rank >= 1, got " + ty(in[0]);
  if (auto e = oneAxis(in[0], at); !e.empty()) return e;
  if (!at.has("exclusive")) at.set("exclusive", false);
  out = in[0];
  return "";
}

static std::string ruleReshape(const std::vector<TensorType>& in, AttrMap& at, TensorType& out) {
  std::vector<int64_t> s = at.getInts("shape");
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      if (infer >= 0) return "reshape target " + shapeStr(at.getInts("shape")) + " has more than one -1";
      infer = (int)i;
    } else if (s[i] <= 0) {
      return "reshape target " + shapeStr(s) + " has a non-positive size";
    } else {
      if (__builtin_mul_overflow(known, s[i], &known))
        return "reshape target " + shapeStr(s) + " is too large (its element count overflows 64 bits)";
    }
  }
  int64_t n = in[0].numElements();
  if (infer >= 0) {
    if (known == 0 || n % known != 0)
      return "cannot reshape " + ty(in[0]) + " (" + std::to_string(n) + " elements) to " + shapeStr(s);
    s[infer] = n / known;
    known *= s[infer];
  }
  if (known != n)
    return "cannot reshape " + ty(in[0]) + " (" + std::to_string(n) + " elements) to " + shapeStr(s) +
           " (" + std::to_string(known) + " elements)";
  at.set("shape", s);
  out.dtype = in[0].dtype;
  out.shape = s;
  return "";
}

static std::string ruleTranspose(const std::vector<TensorType>& in, AttrMap& at, TensorType& out) {
  int r = in[0].rank();
  std::vector<int64_t> perm;
  if (at.has("perm")) {
    perm = at.getInts("perm");
  } else {
    for (int i = r - 1; i >= 0; --i) perm.push_back(i);
  }
  if ((int)perm.size() != r)
    return "transpose permutation " + shapeStr(perm) + " has " + std::to_string(perm.size()) +
           " entries for a tensor of rank " + std::to_string(r);
  std::vector<bool> seen(r, false);
  for (auto& p : perm) {
    if (auto e = normAxis(p, r); !e.empty()) return "transpose: " + e;
    if (seen[p]) return "transpose permutation " + shapeStr(at.has("perm") ? at.getInts("perm") : perm) + " is not a permutation";
    seen[p] = true;
  }
  at.set("perm", perm);
  out.dtype = in[0].dtype;
  out.shape.clear();
  for (auto p : perm) out.shape.push_back(in[0].shape[p]);
  return "";
}

static std::string ruleConcat(const std::vector<TensorType>& in, AttrMap& at, TensorType& out) {
  if (in.empty()) return "concat needs at least one tensor";
  if (in[0].rank() == 0) return "concat needs tensors of rank >= 1, got " + ty(in[0]);
  if (auto e = oneAxis(in[0], at); !e.empty()) return e;
  int64_t ax = at.getInt("axis");
  out = in[0];
  for (size_t i = 1; i < in.size(); ++i) {
    if (in[i].dtype != in[0].dtype || in[i].rank() != in[0].rank())
      return "concat operands " + ty(in[0]) + " and " + ty(in[i]) + " differ in element type or rank";
    for (int d = 0; d < in[0].rank(); ++d)
      if (d != ax && in[i].shape[d] != in[0].shape[d])
        return "concat operands " + ty(in[0]) + " and " + ty(in[i]) + " differ in dim " +
               std::to_string(d) + " (only the concat axis " + std::to_string(ax) + " may differ)";
    if (__builtin_add_overflow(out.shape[ax], in[i].shape[ax], &out.shape[ax]))
      return "concat result is too large (dim " + std::to_string(ax) + " overflows 64 bits)";
  }
  return "";
}

static std::string ruleSlice(const std::vector<TensorType>& in, AttrMap& at, TensorType& out) {
  if (in[0].rank() == 0) return "slice needs a tensor of rank >= 1, got " + ty(in[0]);
  if (auto e = oneAxis(in[0], at); !e.empty()) return e;
  int64_t ax = at.getInt("axis"), n = in[0].shape[ax];
  int64_t s = at.getInt("start"), e = at.getInt("end");
  if (s < 0) s += n;
  if (e < 0) e += n;
  if (s < 0 || e > n || s >= e)
    return "slice [" + std::to_string(at.getInt("start")) + ", " + std::to_string(at.getInt("end")) +
           ") is empty or out of range for dim " + std::to_string(ax) + " of size " + std::to_string(n);
  at.set("start", s);
  at.set("end", e);
  out = in[0];
  out.shape[ax] = e - s;
  return "";
}

static std::string ruleBroadcast(const std::vector<TensorType>& in, AttrMap& at, TensorType& out) {
  const auto& s = at.getInts("shape");
  for (auto d : s)
    if (d <= 0) return "broadcast target " + shapeStr(s) + " has a non-positive size";
  Shape r;
  if (in[0].rank() > (int)s.size() || !broadcastShapes(in[0].shape, s, r) || r != s)
    return "cannot broadcast " + ty(in[0]) + " to " + shapeStr(s);
  out.dtype = in[0].dtype;
  out.shape = s;
  return "";
}

static std::string ruleOneHot(const std::vector<TensorType>& in, AttrMap& at, TensorType& out) {
  if (in[0].dtype != DType::I32) return "one_hot needs i32 indices, got " + ty(in[0]);
  int64_t n = at.getInt("n");
  if (n <= 0) return "one_hot size n must be positive, got " + std::to_string(n);
  out.dtype = DType::F32;
  out.shape = in[0].shape;
  out.shape.push_back(n);
  return "";
}

static std::string ruleTake(const std::vector<TensorType>& in, AttrMap&, TensorType& out) {
  if (in[0].rank() == 0) return "take needs a table of rank >= 1, got " + ty(in[0]);
  if (in[1].dtype != DType::I32) return "take needs i32 indices, got " + ty(in[1]);
  out.dtype = in[0].dtype;
  out.shape = in[1].shape;
  out.shape.insert(out.shape.end(), in[0].shape.begin() + 1, in[0].shape.end());
  return "";
}

// iota {shape, axis} (the builtin arange): i32 element = its index along
// `axis` (`arange(8)` is [0, 1, ..., 7]).
static std::string ruleIota(const std::vector<TensorType>&, AttrMap& at, TensorType& out) {
  const auto& s = at.getInts("shape");
  if (s.empty()) return "arange needs a shape of rank >= 1, as arange(8) or arange([4, 8], axis=1)";
  for (auto d : s)
    if (d <= 0) return "arange shape " + shapeStr(s) + " has a non-positive size";
  out.dtype = DType::I32;
  out.shape = s;
  if (!at.has("axis")) at.set("axis", int64_t(0));
  return oneAxis(out, at);
}

static std::string ruleRandom(const std::vector<TensorType>& in, AttrMap& at, TensorType& out) {
  if (in[0].dtype != DType::I32 || in[0].rank() != 0)
    return "random_uniform seed must be an i32 scalar, got " + ty(in[0]);
  const auto& s = at.getInts("shape");
  for (auto d : s)
    if (d <= 0) return "random_uniform shape " + shapeStr(s) + " has a non-positive size";
  out.dtype = DType::F32;
  out.shape = s;
  return "";
}

// dropout x [, key] {p, site, shape} (ir/OpTable.h). `site` and `shape`
// are set by passes, not by the surface call, so their kinds are checked
// here.
static std::string ruleDropout(const std::vector<TensorType>& in, AttrMap& at, TensorType& out) {
  if (auto e = needDType(in[0], {DType::F32, DType::BF16}, "dropout"); !e.empty()) return e;
  const double p = at.getFloat("p");
  if (!(p >= 0 && p < 1)) {
    std::ostringstream os;
    os << p;
    return "p of dropout must be a constant in [0, 1) (the probability of zeroing an element), got " + os.str();
  }
  const int r = in[0].rank();
  if (in.size() == 2 && (in[1].dtype != DType::I32 || in[1].shape != Shape{r + 1}))
    return "dropout's key must be i32[" + std::to_string(r + 1) + "] (the step, then one offset per dim of " +
           ty(in[0]) + "), got " + ty(in[1]);
  if (const Attr* a = at.get("site"); a && !std::holds_alternative<int64_t>(*a))
    return "dropout's site must be an integer";
  if (const Attr* a = at.get("shape")) {
    const auto* s = std::get_if<std::vector<int64_t>>(a);
    bool fits = s && (int)s->size() == r;
    for (int d = 0; fits && d < r; ++d) fits = (*s)[d] >= in[0].shape[d];
    if (!fits) return "dropout's shape must be the global shape of " + ty(in[0]) + " (rank " + std::to_string(r) + ")";
  }
  out = in[0];
  return "";
}

static std::string groupSize(AttrMap& at, int64_t& n) {
  n = at.getInt("n");
  if (n < 1) return "collective group size must be >= 1";
  return "";
}

static std::string ruleAllReduce(const std::vector<TensorType>& in, AttrMap& at, TensorType& out) {
  if (!at.has("reduce")) at.set("reduce", ReduceOp::Sum);
  out = in[0];
  return "";
}

static std::string ruleAllGather(const std::vector<TensorType>& in, AttrMap& at, TensorType& out) {
  int64_t n;
  if (auto e = groupSize(at, n); !e.empty()) return e;
  if (auto e = oneAxis(in[0], at, "dim"); !e.empty()) return e;
  out = in[0];
  out.shape[at.getInt("dim")] *= n;
  return "";
}

static std::string ruleScatterLike(const std::vector<TensorType>& in, AttrMap& at, TensorType& out) {
  int64_t n;
  if (auto e = groupSize(at, n); !e.empty()) return e;
  if (auto e = oneAxis(in[0], at, "dim"); !e.empty()) return e;
  int64_t d = at.getInt("dim");
  if (in[0].shape[d] % n != 0)
    return "dim " + std::to_string(d) + " of " + ty(in[0]) + " is not divisible by the group size " + std::to_string(n);
  out = in[0];
  out.shape[d] /= n;
  return "";
}

// shard_slice: block `index` of dim, padded to ceil(dim / n) rows where n
// does not divide it.
static std::string ruleShardSlice(const std::vector<TensorType>& in, AttrMap& at, TensorType& out) {
  int64_t n;
  if (auto e = groupSize(at, n); !e.empty()) return e;
  if (auto e = oneAxis(in[0], at, "dim"); !e.empty()) return e;
  int64_t d = at.getInt("dim");
  out = in[0];
  out.shape[d] = (out.shape[d] + n - 1) / n;
  return "";
}

static std::string rulePadMask(const std::vector<TensorType>& in, AttrMap& at, TensorType& out) {
  int64_t n;
  if (auto e = groupSize(at, n); !e.empty()) return e;
  if (auto e = oneAxis(in[0], at, "dim"); !e.empty()) return e;
  int64_t d = at.getInt("dim"), size = at.getInt("size");
  if (size < 0 || size > n * in[0].shape[d])
    return "pad_mask: size " + std::to_string(size) + " does not fit " + std::to_string(n) + " blocks of dim " +
           std::to_string(d) + " of " + ty(in[0]);
  out = in[0];
  return "";
}

static std::string ruleAllToAll(const std::vector<TensorType>& in, AttrMap& at, TensorType& out) {
  int64_t n;
  if (auto e = groupSize(at, n); !e.empty()) return e;
  if (auto e = oneAxis(in[0], at, "split_dim"); !e.empty()) return e;
  if (auto e = oneAxis(in[0], at, "concat_dim"); !e.empty()) return e;
  int64_t s = at.getInt("split_dim"), c = at.getInt("concat_dim");
  if (in[0].shape[s] % n != 0)
    return "all_to_all: dim " + std::to_string(s) + " of " + ty(in[0]) + " is not divisible by " + std::to_string(n);
  out = in[0];
  out.shape[s] /= n;
  out.shape[c] *= n;
  return "";
}

static std::string rulePermute(const std::vector<TensorType>& in, AttrMap& at, TensorType& out) {
  int64_t n;
  if (auto e = groupSize(at, n); !e.empty()) return e;
  const auto& p = at.getInts("perm");
  std::vector<bool> seen(n, false);
  if ((int64_t)p.size() != n) return "collective_permute: perm must have one entry per group member";
  for (auto x : p) {
    if (x < 0 || x >= n || seen[x]) return "collective_permute: perm is not a permutation";
    seen[x] = true;
  }
  out = in[0];
  return "";
}

// ---------------------------------------------------------------- byte volumes

uint64_t volumeAllGather(uint64_t n, uint64_t inputBytes) { return inputBytes * (n - 1); }
uint64_t volumeAllReduce(uint64_t n, uint64_t inputBytes) { return 2 * (n - 1) * inputBytes / n; }
uint64_t volumeAllBlocksButOne(uint64_t n, uint64_t inputBytes) { return (n - 1) * inputBytes / n; }
uint64_t volumeWhole(uint64_t, uint64_t inputBytes) { return inputBytes; }

// ---------------------------------------------------------------- the table

using K = OpKind;
using C = OpClass;
using A = ArgKind;
using L = LiteralDType;
using P = PartitionRule;

static std::vector<OpInfo> makeTable() {
  const ArgSpec X{"x", A::Tensor};
  const ArgSpec MESH{"mesh", A::String}, AXES{"axes", A::Ints}, N{"n", A::Int};
  std::vector<OpInfo> t = {
      // kind, mnemonic, builtin, class, surface args, type rule, gradient rule
      // (nullptr: not differentiable; param is handled by the autodiff pass),
      // sharding rule, partition rule, then where they differ from the
      // defaults: literal dtype (Natural), byte volume (none), traits (none)
      {K::Param, "param", nullptr, C::Source, {}, nullptr, nullptr, shardSource, P::Param},
      {K::Constant, "constant", nullptr, C::Source, {}, nullptr, nullptr, shardSource, P::Constant},
      {K::Copy, "copy", nullptr, C::Unary, {X}, ruleSame, gradCopy, shardBroadcasting, P::Copy},
      {K::Neg, "neg", nullptr, C::Unary, {X}, ruleNumericUnary, gradNeg, shardBroadcasting, P::Local},
      {K::Exp, "exp", "exp", C::Unary, {X}, rule_exp, gradExp, shardBroadcasting, P::Local, L::F32},
      {K::Log, "log", "log", C::Unary, {X}, rule_log, gradLog, shardBroadcasting, P::Local, L::F32},
      {K::Sqrt, "sqrt", "sqrt", C::Unary, {X}, rule_sqrt, gradSqrt, shardBroadcasting, P::Local, L::F32},
      {K::Rsqrt, "rsqrt", "rsqrt", C::Unary, {X}, rule_rsqrt, gradRsqrt, shardBroadcasting, P::Local, L::F32},
      {K::Tanh, "tanh", "tanh", C::Unary, {X}, rule_tanh, gradTanh, shardBroadcasting, P::Local, L::F32},
      {K::Relu, "relu", "relu", C::Unary, {X}, ruleNumericUnary, gradRelu, shardBroadcasting, P::Local},
      {K::Gelu, "gelu", "gelu", C::Unary, {X}, rule_gelu, gradGelu, shardBroadcasting, P::Local, L::F32},
      {K::Erf, "erf", "erf", C::Unary, {X}, rule_erf, gradErf, shardBroadcasting, P::Local, L::F32},
      {K::GeluExact, "gelu_exact", "gelu_exact", C::Unary, {X}, rule_gelu_exact, gradGeluExact, shardBroadcasting, P::Local, L::F32},
      {K::Sigmoid, "sigmoid", "sigmoid", C::Unary, {X}, rule_sigmoid, gradSigmoid, shardBroadcasting, P::Local, L::F32},
      {K::Abs, "abs", "abs", C::Unary, {X}, ruleNumericUnary, gradAbs, shardBroadcasting, P::Local},
      {K::Not, "not", nullptr, C::Unary, {X}, ruleNot, nullptr, shardBroadcasting, P::Local, L::Natural, nullptr, NotDifferentiable},
      {K::Cast, "cast", "cast", C::Unary, {X, {"dtype", A::DTypeArg}}, ruleCast, gradCast, shardBroadcasting, P::Local},
      {K::Add, "add", nullptr, C::Binary, {}, ruleArith, gradAdd, shardBroadcasting, P::Local},
      {K::Sub, "sub", nullptr, C::Binary, {}, ruleArith, gradSub, shardBroadcasting, P::Local},
      {K::Mul, "mul", nullptr, C::Binary, {}, ruleArith, gradMul, shardBroadcasting, P::Local},
      {K::Div, "div", nullptr, C::Binary, {}, ruleDiv, gradDiv, shardBroadcasting, P::Local},
      {K::Pow, "pow", nullptr, C::Binary, {}, ruleArith, gradPow, shardBroadcasting, P::Local},
      {K::Mod, "mod", nullptr, C::Binary, {}, ruleArith, nullptr, shardBroadcasting, P::Local, L::Natural, nullptr, NotDifferentiable},
      {K::FloorDiv, "floor_div", nullptr, C::Binary, {}, ruleFloorDiv, nullptr, shardBroadcasting, P::Local, L::Natural, nullptr, NotDifferentiable},
      {K::Maximum, "maximum", "maximum", C::Binary, {{"a", A::Tensor}, {"b", A::Tensor}}, ruleArith, gradMaximum, shardBroadcasting, P::Local},
      {K::Minimum, "minimum", "minimum", C::Binary, {{"a", A::Tensor}, {"b", A::Tensor}}, ruleArith, gradMinimum, shardBroadcasting, P::Local},
      {K::Eq, "eq", nullptr, C::Binary, {}, ruleCompare, nullptr, shardBroadcasting, P::Local, L::Natural, nullptr, NotDifferentiable},
      {K::Ne, "ne", nullptr, C::Binary, {}, ruleCompare, nullptr, shardBroadcasting, P::Local, L::Natural, nullptr, NotDifferentiable},
      {K::Lt, "lt", nullptr, C::Binary, {}, ruleCompare, nullptr, shardBroadcasting, P::Local, L::Natural, nullptr, NotDifferentiable},
      {K::Le, "le", nullptr, C::Binary, {}, ruleCompare, nullptr, shardBroadcasting, P::Local, L::Natural, nullptr, NotDifferentiable},
      {K::Gt, "gt", nullptr, C::Binary, {}, ruleCompare, nullptr, shardBroadcasting, P::Local, L::Natural, nullptr, NotDifferentiable},
      {K::Ge, "ge", nullptr, C::Binary, {}, ruleCompare, nullptr, shardBroadcasting, P::Local, L::Natural, nullptr, NotDifferentiable},
      {K::And, "and", nullptr, C::Binary, {}, ruleLogic, nullptr, shardBroadcasting, P::Local, L::Natural, nullptr, NotDifferentiable},
      {K::Or, "or", nullptr, C::Binary, {}, ruleLogic, nullptr, shardBroadcasting, P::Local, L::Natural, nullptr, NotDifferentiable},
      {K::Where, "where", "where", C::Ternary, {{"cond", A::Tensor}, {"a", A::Tensor}, {"b", A::Tensor}}, ruleWhere, gradWhere, shardBroadcasting, P::Local},
      {K::MatMul, "matmul", "matmul", C::Contraction, {{"a", A::Tensor}, {"b", A::Tensor}}, ruleMatMul, gradMatMul, shardMatMul, P::Local, L::F32},
      {K::Einsum, "einsum", "einsum", C::Contraction, {{"spec", A::Einsum}, {"operands", A::Variadic}}, ruleEinsum, gradEinsum, shardEinsum, P::Local, L::F32},
      {K::Sum, "sum", "sum", C::Reduction, {X, {"axis", A::Ints, std::nullopt, true}, {"keepdims", A::Bool, false}}, ruleReduce, gradSum, shardPartialReduce, P::Local},
      {K::Mean, "mean", "mean", C::Reduction, {X, {"axis", A::Ints, std::nullopt, true}, {"keepdims", A::Bool, false}}, ruleMean, gradMean, shardPartialReduce, P::Mean, L::F32},
      {K::Max, "max", "max", C::Reduction, {X, {"axis", A::Ints, std::nullopt, true}, {"keepdims", A::Bool, false}}, ruleReduce, gradMaxMin, shardReduce, P::Local},
      {K::Min, "min", "min", C::Reduction, {X, {"axis", A::Ints, std::nullopt, true}, {"keepdims", A::Bool, false}}, ruleReduce, gradMaxMin, shardReduce, P::Local},
      {K::ArgMax, "argmax", "argmax", C::Reduction, {X, {"axis", A::Int, int64_t(-1)}}, ruleArgMax, nullptr, shardArgMax, P::Local, L::Natural, nullptr, NotDifferentiable},
      {K::Softmax, "softmax", "softmax", C::Normalization, {X, {"axis", A::Int, int64_t(-1)}}, ruleSoftmax, gradSoftmax, shardAlongAxis, P::Local, L::F32},
      {K::LogSoftmax, "log_softmax", "log_softmax", C::Normalization, {X, {"axis", A::Int, int64_t(-1)}}, ruleSoftmax, gradLogSoftmax, shardAlongAxis, P::Local, L::F32},
      {K::LayerNorm, "layer_norm", "layer_norm", C::Normalization, {X, {"axis", A::Ints, std::vector<int64_t>{-1}}, {"eps", A::Float, 1e-5}}, ruleLayerNorm, gradLayerNorm, shardAlongAxes, P::Local, L::F32},
      {K::CumSum, "cumsum", "cumsum", C::Normalization, {X, {"axis", A::Int}, {"exclusive", A::Bool, false}}, ruleCumSum, gradCumSum, shardAlongAxis, P::Local},
      {K::Reshape, "reshape", "reshape", C::DataMovement, {X, {"shape", A::Ints}}, ruleReshape, gradReshape, shardReshape, P::LocalShape},
      {K::Transpose, "transpose", "transpose", C::DataMovement, {X, {"perm", A::Ints, std::nullopt, true}}, ruleTranspose, gradTranspose, shardTranspose, P::Local},
      {K::Concat, "concat", "concat", C::DataMovement, {{"xs", A::Tensors}, {"axis", A::Int, int64_t(0)}}, ruleConcat, gradConcat, shardAlongAxis, P::Concat},
      {K::Slice, "slice", "slice", C::DataMovement, {X, {"axis", A::Int}, {"start", A::Int}, {"end", A::Int}}, ruleSlice, gradSlice, shardAlongAxis, P::Slice},
      {K::Broadcast, "broadcast", "broadcast", C::DataMovement, {X, {"shape", A::Ints}}, ruleBroadcast, gradBroadcast, shardBroadcasting, P::LocalShape},
      {K::OneHot, "one_hot", "one_hot", C::DataMovement, {{"i", A::Tensor}, {"n", A::Int}}, ruleOneHot, nullptr, shardOneHot, P::Local, L::Natural, nullptr, NotDifferentiable},
      {K::Take, "take", "take", C::DataMovement, {{"table", A::Tensor}, {"idx", A::Tensor}}, ruleTake, gradTake, shardTake, P::Take, L::Natural, nullptr, IndexOperand},
      {K::DynamicIndex, "dynamic_index", nullptr, C::DataMovement, {X, {"i", A::Tensor}}, ruleDynamicIndex, gradDynamicIndex, shardDynamicIndex, P::Local},
      {K::DynamicUpdate, "dynamic_update", nullptr, C::DataMovement, {X, {"u", A::Tensor}, {"i", A::Tensor}}, ruleDynamicUpdate, gradDynamicUpdate, shardDynamicUpdate, P::Local},
      {K::RandomUniform, "random_uniform", "random_uniform", C::Source, {{"shape", A::Ints}, {"seed", A::Tensor}}, ruleRandom, nullptr, shardRandom, P::Whole},
      {K::Iota, "iota", "arange", C::Source, {{"shape", A::Ints}, {"axis", A::Int, int64_t(0)}}, ruleIota, nullptr, shardSource, P::Whole},
      {K::Dropout, "dropout", "dropout", C::Random, {X, {"p", A::Float, 0.5}}, ruleDropout, gradDropout, shardDropout, P::Dropout, L::F32},
      // Collectives: no surface builtin; the args list their IR attributes.
      {K::AllReduce, "all_reduce", nullptr, C::Collective, {X, MESH, AXES, {"reduce", A::Reduce, ReduceOp::Sum}}, ruleAllReduce, nullptr, nullptr, P::None, L::Natural, volumeAllReduce},
      {K::AllGather, "all_gather", nullptr, C::Collective, {X, MESH, AXES, N, {"dim", A::Int}}, ruleAllGather, nullptr, nullptr, P::None, L::Natural, volumeAllGather},
      {K::ReduceScatter, "reduce_scatter", nullptr, C::Collective, {X, MESH, AXES, N, {"dim", A::Int}}, ruleScatterLike, nullptr, nullptr, P::None, L::Natural, volumeAllBlocksButOne},
      {K::AllToAll, "all_to_all", nullptr, C::Collective, {X, MESH, AXES, N, {"split_dim", A::Int}, {"concat_dim", A::Int}}, ruleAllToAll, nullptr, nullptr, P::None, L::Natural, volumeAllBlocksButOne},
      {K::CollectivePermute, "collective_permute", nullptr, C::Collective, {X, MESH, AXES, N, {"perm", A::Ints}}, rulePermute, nullptr, nullptr, P::None, L::Natural, volumeWhole},
      {K::ShardSlice, "shard_slice", nullptr, C::Collective, {X, MESH, AXES, N, {"dim", A::Int}}, ruleShardSlice, nullptr, nullptr, P::None, L::Natural, nullptr, NoCommunication},
      {K::PadMask, "pad_mask", nullptr, C::Collective, {X, MESH, AXES, N, {"dim", A::Int}, {"size", A::Int}, {"value", A::Float, 0.0}}, rulePadMask, nullptr, nullptr, P::None, L::Natural, nullptr, NoCommunication},
      // loop: an op with a body (HasBody): typed by inferLoopTypes, differentiated
      // by the autodiff pass, propagated and partitioned by those passes from
      // its body (ir/Loop.h, docs/loops.md); its row has no rule columns.
      {K::Loop, "loop", nullptr, C::Control, {{"operands", A::Variadic}, {"trip", A::Int}, {"carried", A::Int}, {"reverse", A::Bool, std::nullopt, true}}, nullptr, nullptr, nullptr, P::None, L::Natural, nullptr, HasBody},
  };
  for (size_t i = 0; i < t.size(); ++i)
    GSL_ASSERT((size_t)t[i].kind == i, std::string("op table out of order at ") + t[i].mnemonic);
  return t;
}

const std::vector<OpInfo>& allOps() {
  static const std::vector<OpInfo> table = makeTable();
  return table;
}

const OpInfo& opInfo(OpKind k) { return allOps()[(size_t)k]; }
const char* opName(OpKind k) { return opInfo(k).mnemonic; }

const OpInfo* lookupMnemonic(std::string_view m) {
  for (const auto& o : allOps())
    if (m == o.mnemonic) return &o;
  return nullptr;
}

bool ByMnemonic::operator()(OpKind a, OpKind b) const { return std::string_view(opName(a)) < opName(b); }

const OpInfo* lookupBuiltin(std::string_view name) {
  for (const auto& o : allOps())
    if (o.builtin && name == o.builtin) return &o;
  return nullptr;
}

std::string parseStringAttr(const OpInfo& op, const ArgSpec& arg, const std::string& text, size_t numOperands,
                            Attr& out) {
  switch (arg.kind) {
    case ArgKind::Einsum: {
      EinsumSpec es;
      if (auto e = parseEinsum(text, numOperands, es); !e.empty()) return e;
      out = std::move(es);
      return "";
    }
    case ArgKind::Reduce:
      if (auto r = parseReduceOp(text)) {
        out = *r;
        return "";
      }
      return std::string(op.mnemonic) + ": unknown reduction '" + text + "'";
    default: GSL_ASSERT(false, std::string("internal error: attribute '") + arg.name + "' is not parsed from a string");
  }
  return "";
}

std::string inferType(OpKind k, const std::vector<TensorType>& in, AttrMap& attrs, TensorType& out) {
  const OpInfo& info = opInfo(k);
  GSL_ASSERT(info.infer, std::string("op '") + info.mnemonic + "' has no type rule");
  std::string e = info.infer(in, attrs, out);
  if (e.empty() && !out.sizeFits())
    return "result " + out.str() + " of " + info.mnemonic + " is too large (its byte size overflows 64 bits)";
  return e;
}

}  // namespace gsl::ir
