// Numeric tests of the reference kernels, run through the interpreter.
//
// Every expected value is computed independently of the kernels: by hand,
// with <cmath> closed forms, or with a plain nested loop written here.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/Interpreter.h"
#include "backend/Random.h"
#include "ir/Function.h"
#include "ir/OpTable.h"

using namespace gsl;
using namespace gsl::backend;
using ir::AttrMap;
using ir::DType;
using ir::OpKind;
using ir::Shape;
using ir::TensorType;
using ir::Value;

namespace {

// Builds one ir::Function, typing every op with the op table's rule.
struct Builder {
  ir::Function f;
  std::vector<Tensor> args;

  Value* arg(const Tensor& t) {
    args.push_back(t);
    return f.addArg(t.type());
  }
  // An op typed by ir::inferType (which also canonicalises `attrs`).
  Value* op(OpKind k, std::vector<Value*> operands, AttrMap attrs = {}) {
    std::vector<TensorType> in;
    for (Value* v : operands) in.push_back(v->type);
    TensorType out;
    std::string err = ir::inferType(k, in, attrs, out);
    REQUIRE_MESSAGE(err.empty(), err);
    return f.append(k, std::move(operands), std::move(attrs), out)->result;
  }
  // An op with an explicit result type (param, constant: no type rule).
  Value* typed(OpKind k, AttrMap attrs, const TensorType& t) { return f.append(k, {}, std::move(attrs), t)->result; }

  std::vector<Tensor> run(std::vector<Value*> results, const KernelContext& ctx = {}) {
    f.results = std::move(results);
    return interpret(f, args, ctx);
  }
  Tensor run1(Value* r, const KernelContext& ctx = {}) { return run({r}, ctx).at(0); }
};

AttrMap attrs(std::initializer_list<std::pair<const char*, ir::Attr>> kv) {
  AttrMap m;
  for (auto& [k, v] : kv) m.set(k, v);
  return m;
}
using Ints = std::vector<int64_t>;

Tensor f32(const Shape& s, std::vector<float> v) { return Tensor::fromF32(s, std::move(v)); }
Tensor i32(const Shape& s, std::vector<int32_t> v) { return Tensor::fromI32(s, std::move(v)); }
Tensor boolT(const Shape& s, std::vector<int32_t> v) {
  Tensor t(TensorType{DType::Bool, s});
  for (size_t i = 0; i < v.size(); ++i) t.i32()[i] = v[i] ? 1 : 0;
  return t;
}

// Checks dtype, shape and every element (relative tolerance 1e-6).
void check(const Tensor& t, DType dt, const Shape& s, const std::vector<double>& expect) {
  CHECK(t.dtype() == dt);
  REQUIRE(t.shape() == s);
  REQUIRE(t.size() == (int64_t)expect.size());
  for (size_t i = 0; i < expect.size(); ++i) {
    INFO("element " << i);
    if (std::isnan(expect[i])) CHECK(std::isnan(t.at(i)));
    else if (dt == DType::F32) CHECK(t.at(i) == doctest::Approx(expect[i]).epsilon(1e-6));
    else CHECK(t.at(i) == expect[i]);
  }
}
void checkF(const Tensor& t, const Shape& s, const std::vector<double>& e) { check(t, DType::F32, s, e); }
void checkI(const Tensor& t, const Shape& s, const std::vector<double>& e) { check(t, DType::I32, s, e); }
void checkB(const Tensor& t, const Shape& s, const std::vector<double>& e) { check(t, DType::Bool, s, e); }

// 0, 1, 2, ... as f32 values scaled and shifted (deterministic test data).
Tensor iota(const Shape& s, float scale = 1.0f, float shift = 0.0f) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = shift + scale * (float)i;
  return f32(s, v);
}

// Runs a one-op function on the given operands.
Tensor run1(OpKind k, const std::vector<Tensor>& ins, AttrMap at = {}, const KernelContext& ctx = {}) {
  Builder b;
  std::vector<Value*> vs;
  for (auto& t : ins) vs.push_back(b.arg(t));
  return b.run1(b.op(k, vs, std::move(at)), ctx);
}

}  // namespace

// ================================================================ sources

TEST_CASE("param, constant and copy") {
  Tensor w = f32({2, 2}, {1, 2, 3, 4});
  KernelContext ctx;
  ctx.param = [&](const std::string& name) -> const Tensor& {
    REQUIRE(name == "w");
    return w;
  };
  Builder b;
  Value* p = b.typed(OpKind::Param, attrs({{"name", std::string("w")}}), w.type());
  Value* c = b.typed(OpKind::Constant, attrs({{"value", 2.5}}), TensorType{DType::F32, {2, 2}});
  Value* ci = b.typed(OpKind::Constant, attrs({{"value", -3.9}}), TensorType{DType::I32, {3}});
  Value* cb = b.typed(OpKind::Constant, attrs({{"value", 2.0}}), TensorType{DType::Bool, {}});
  Value* cz = b.typed(OpKind::Constant, attrs({{"value", int64_t(0)}}), TensorType{DType::Bool, {2}});
  Value* cp = b.op(OpKind::Copy, {p});
  Value* sum = b.op(OpKind::Add, {cp, c});
  auto r = b.run({p, c, ci, cb, cz, cp, sum}, ctx);
  checkF(r[0], {2, 2}, {1, 2, 3, 4});
  checkF(r[1], {2, 2}, {2.5, 2.5, 2.5, 2.5});
  checkI(r[2], {3}, {-3, -3, -3});  // truncation toward zero
  checkB(r[3], {}, {1});
  checkB(r[4], {2}, {0, 0});
  checkF(r[5], {2, 2}, {1, 2, 3, 4});
  checkF(r[6], {2, 2}, {3.5, 4.5, 5.5, 6.5});
  // The param's value is copied, not aliased.
  w.f32()[0] = 100;
  CHECK(r[0].at(0) == 1.0);
}

TEST_CASE("random_uniform: in [0, 1), deterministic, seed-dependent") {
  auto gen = [](int32_t seed, uint64_t global) {
    KernelContext ctx;
    ctx.seed = global;
    return run1(OpKind::RandomUniform, {Tensor::scalarI32(seed)}, attrs({{"shape", Ints{4, 64}}}), ctx);
  };
  Tensor a = gen(7, 1), a2 = gen(7, 1), b = gen(8, 1), c = gen(7, 2);
  REQUIRE(a.shape() == Shape{4, 64});
  CHECK(a.dtype() == DType::F32);
  double mean = 0;
  std::set<float> distinct;
  int diffB = 0, diffC = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    float v = a.f32()[i];
    CHECK(v >= 0.0f);
    CHECK(v < 1.0f);
    CHECK(v == a2.f32()[i]);
    // Element i is the Philox uniform of (global seed, op stream, i).
    CHECK(v == uniformAt(1, randomOpStream(7), (uint64_t)i));
    diffB += v != b.f32()[i];
    diffC += v != c.f32()[i];
    mean += v;
    distinct.insert(v);
  }
  mean /= (double)a.size();
  CHECK(diffB > 250);
  CHECK(diffC > 250);
  CHECK(distinct.size() > 250);
  CHECK(mean == doctest::Approx(0.5).epsilon(0.1));  // loose sanity check on 256 samples
}

// ================================================================ unary

TEST_CASE("unary f32 ops match <cmath>") {
  const std::vector<float> xs = {-2.0f, -0.5f, 0.25f, 3.0f};
  Tensor x = f32({2, 2}, xs);
  auto expect = [&](auto fn) {
    std::vector<double> e;
    for (float v : xs) e.push_back(fn((double)v));
    return e;
  };
  checkF(run1(OpKind::Neg, {x}), {2, 2}, expect([](double v) { return -v; }));
  checkF(run1(OpKind::Exp, {x}), {2, 2}, expect([](double v) { return std::exp(v); }));
  checkF(run1(OpKind::Tanh, {x}), {2, 2}, expect([](double v) { return std::tanh(v); }));
  checkF(run1(OpKind::Relu, {x}), {2, 2}, {0, 0, 0.25, 3});
  checkF(run1(OpKind::Abs, {x}), {2, 2}, {2, 0.5, 0.25, 3});
  checkF(run1(OpKind::Sigmoid, {x}), {2, 2}, expect([](double v) { return 1 / (1 + std::exp(-v)); }));
  checkF(run1(OpKind::Gelu, {x}), {2, 2}, expect([](double v) {
           return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
         }));
  // erf: values from Python's math.erf.
  checkF(run1(OpKind::Erf, {f32({4}, {-1.5f, -0.25f, 0.5f, 3.0f})}), {4},
         {-0.9661051464753108, -0.2763263901682369, 0.5204998778130465, 0.9999779095030014});
  // gelu_exact: 0.5 x (1 + erf(x / sqrt(2))) from Python's math.erf.
  checkF(run1(OpKind::GeluExact, {f32({4}, {-3.0f, -0.25f, 0.5f, 2.0f})}), {4},
         {-0.00404969409489031, -0.10032341857926907, 0.34573123063700656, 1.9544997361036416});
  Tensor pos = f32({3}, {0.25f, 1.0f, 9.0f});
  checkF(run1(OpKind::Log, {pos}), {3}, {std::log(0.25), 0.0, std::log(9.0)});
  checkF(run1(OpKind::Sqrt, {pos}), {3}, {0.5, 1.0, 3.0});
  checkF(run1(OpKind::Rsqrt, {pos}), {3}, {2.0, 1.0, 1.0 / 3.0});
  // gelu at a few hand-checked points: gelu(0) = 0, gelu(x) ~ x for large x.
  checkF(run1(OpKind::Gelu, {f32({2}, {0.0f, 10.0f})}), {2}, {0.0, 10.0});
}

TEST_CASE("sigmoid is numerically stable at the extremes") {
  Tensor r = run1(OpKind::Sigmoid, {f32({4}, {-100.0f, -20.0f, 20.0f, 100.0f})});
  checkF(r, {4}, {std::exp(-100.0), 1 / (1 + std::exp(20.0)), 1 / (1 + std::exp(-20.0)), 1.0});
  for (int i = 0; i < 4; ++i) CHECK(std::isfinite(r.at(i)));
  CHECK(r.at(0) > 0.0);
}

TEST_CASE("unary i32 and bool ops") {
  Tensor x = i32({4}, {-5, 0, 3, -1});
  checkI(run1(OpKind::Neg, {x}), {4}, {5, 0, -3, 1});
  checkI(run1(OpKind::Abs, {x}), {4}, {5, 0, 3, 1});
  checkI(run1(OpKind::Relu, {x}), {4}, {0, 0, 3, 0});
  checkB(run1(OpKind::Not, {boolT({3}, {1, 0, 1})}), {3}, {0, 1, 0});
}

TEST_CASE("cast between f32, i32 and bool") {
  auto cast = [](const Tensor& x, DType d) { return run1(OpKind::Cast, {x}, attrs({{"dtype", d}})); };
  Tensor x = f32({5}, {-2.7f, 2.7f, 0.0f, -0.5f, 3.0f});
  checkI(cast(x, DType::I32), {5}, {-2, 2, 0, 0, 3});  // toward zero
  checkB(cast(x, DType::Bool), {5}, {1, 1, 0, 1, 1});
  checkF(cast(boolT({2}, {1, 0}), DType::F32), {2}, {1, 0});
  checkF(cast(i32({2}, {-7, 16777216}), DType::F32), {2}, {-7, 16777216});
  checkB(cast(i32({3}, {-7, 0, 2}), DType::Bool), {3}, {1, 0, 1});
  checkI(cast(boolT({2}, {0, 1}), DType::I32), {2}, {0, 1});
  checkF(cast(x, DType::F32), {5}, {-2.7f, 2.7f, 0.0f, -0.5f, 3.0f});
}

// ================================================================ binary

TEST_CASE("f32 arithmetic with broadcasting") {
  Tensor a = f32({2, 1}, {1, 2});       // column
  Tensor b = f32({3}, {10, 20, 40});    // row
  // Expected value of op(a[i], b[j]) at [i, j].
  auto grid = [](std::function<double(double, double)> fn) {
    std::vector<double> e;
    for (double x : {1.0, 2.0})
      for (double y : {10.0, 20.0, 40.0}) e.push_back(fn(x, y));
    return e;
  };
  checkF(run1(OpKind::Add, {a, b}), {2, 3}, grid([](double x, double y) { return x + y; }));
  checkF(run1(OpKind::Sub, {a, b}), {2, 3}, grid([](double x, double y) { return x - y; }));
  checkF(run1(OpKind::Mul, {a, b}), {2, 3}, grid([](double x, double y) { return x * y; }));
  checkF(run1(OpKind::Div, {a, b}), {2, 3}, grid([](double x, double y) { return x / y; }));
  // Scalar broadcast on either side, and a rank-3 / rank-1 mix.
  checkF(run1(OpKind::Pow, {f32({3}, {2, 4, 9}), Tensor::scalarF32(0.5f)}), {3},
         {std::sqrt(2.0), 2.0, 3.0});
  checkF(run1(OpKind::Pow, {Tensor::scalarF32(2.0f), f32({3}, {-1, 0, 3})}), {3}, {0.5, 1, 8});
  Tensor c = iota({2, 1, 2});  // [[[0,1]],[[2,3]]]
  Tensor d = f32({3, 1}, {100, 200, 300});
  std::vector<double> e;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 2; ++k) e.push_back((i * 2 + k) + 100.0 * (j + 1));
  checkF(run1(OpKind::Add, {c, d}), {2, 3, 2}, e);
}

TEST_CASE("maximum and minimum") {
  Tensor a = f32({2, 2}, {1, -5, 3, 0});
  Tensor s = Tensor::scalarF32(0.5f);
  checkF(run1(OpKind::Maximum, {a, s}), {2, 2}, {1, 0.5, 3, 0.5});
  checkF(run1(OpKind::Minimum, {a, s}), {2, 2}, {0.5, -5, 0.5, 0});
  checkI(run1(OpKind::Maximum, {i32({3}, {1, -2, 7}), i32({3}, {0, 0, 9})}), {3}, {1, 0, 9});
  checkI(run1(OpKind::Minimum, {i32({3}, {1, -2, 7}), i32({1}, {0})}), {3}, {0, -2, 0});
}

TEST_CASE("mod is floor-mod (sign of the divisor)") {
  Tensor a = f32({4}, {7, -7, 7, -7});
  Tensor b = f32({4}, {3, 3, -3, -3});
  checkF(run1(OpKind::Mod, {a, b}), {4}, {1, 2, -2, -1});
  checkF(run1(OpKind::Mod, {f32({3}, {5.5f, -5.5f, 6.0f}), Tensor::scalarF32(2.0f)}), {3}, {1.5, 0.5, 0.0});
  Tensor ia = i32({6}, {7, -7, 7, -7, 5, -2147483647 - 1});
  Tensor ib = i32({6}, {3, 3, -3, -3, 0, -1});
  checkI(run1(OpKind::Mod, {ia, ib}), {6}, {1, 2, -2, -1, 0, 0});  // mod by 0 gives 0
}

TEST_CASE("floor_div is Python's // (toward minus infinity), mod's partner") {
  // Expected: numpy 1.24, np.int32 arrays (b == 0 gives 0, INT_MIN // -1 wraps).
  Tensor ia = i32({8}, {7, -7, 7, -7, 5, -2147483647 - 1, -2147483647 - 1, 6});
  Tensor ib = i32({8}, {3, 3, -3, -3, 0, -1, 2, -3});
  checkI(run1(OpKind::FloorDiv, {ia, ib}), {8}, {2, -3, -3, 2, 0, -2147483647 - 1, -1073741824, -2});
  Tensor q = run1(OpKind::FloorDiv, {ia, ib}), r = run1(OpKind::Mod, {ia, ib});
  for (int i = 0; i < 8; ++i)
    if (ib.i32()[i] != 0) CHECK((int32_t)((uint32_t)q.i32()[i] * (uint32_t)ib.i32()[i] + (uint32_t)r.i32()[i]) == ia.i32()[i]);
}

TEST_CASE("iota: each element its index along the axis") {
  checkI(run1(OpKind::Iota, {}, attrs({{"shape", Ints{5}}, {"axis", int64_t(0)}})), {5}, {0, 1, 2, 3, 4});
  checkI(run1(OpKind::Iota, {}, attrs({{"shape", Ints{2, 3}}, {"axis", int64_t(1)}})), {2, 3}, {0, 1, 2, 0, 1, 2});
  checkI(run1(OpKind::Iota, {}, attrs({{"shape", Ints{2, 3, 2}}, {"axis", int64_t(1)}})), {2, 3, 2},
         {0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2});
}

TEST_CASE("i32 arithmetic and integer pow") {
  Tensor a = i32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = i32({3}, {10, 20, 30});
  checkI(run1(OpKind::Add, {a, b}), {2, 3}, {11, 22, 33, 14, 25, 36});
  checkI(run1(OpKind::Sub, {a, b}), {2, 3}, {-9, -18, -27, -6, -15, -24});
  checkI(run1(OpKind::Mul, {a, b}), {2, 3}, {10, 40, 90, 40, 100, 180});
  Tensor base = i32({8}, {2, 3, 2, 1, -1, -1, 5, 0});
  Tensor ex = i32({8}, {10, 0, -1, -3, -3, -2, 3, -1});
  checkI(run1(OpKind::Pow, {base, ex}), {8}, {1024, 1, 0, 1, -1, 1, 125, 0});
  checkI(run1(OpKind::Pow, {i32({2}, {-2, -3}), Tensor::scalarI32(3)}), {2}, {-8, -27});
}

TEST_CASE("comparisons and logic") {
  Tensor a = f32({2, 2}, {1, 2, 3, 4});
  Tensor b = f32({2}, {2, 3});  // broadcasts over rows
  checkB(run1(OpKind::Eq, {a, b}), {2, 2}, {0, 0, 0, 0});
  checkB(run1(OpKind::Eq, {a, Tensor::scalarF32(3)}), {2, 2}, {0, 0, 1, 0});
  checkB(run1(OpKind::Ne, {a, Tensor::scalarF32(3)}), {2, 2}, {1, 1, 0, 1});
  checkB(run1(OpKind::Lt, {a, b}), {2, 2}, {1, 1, 0, 0});
  checkB(run1(OpKind::Le, {a, b}), {2, 2}, {1, 1, 0, 0});
  checkB(run1(OpKind::Gt, {a, b}), {2, 2}, {0, 0, 1, 1});
  checkB(run1(OpKind::Ge, {a, f32({2, 1}, {2, 4})}), {2, 2}, {0, 1, 0, 1});
  checkB(run1(OpKind::Lt, {i32({3}, {-1, 0, 1}), Tensor::scalarI32(0)}), {3}, {1, 0, 0});
  Tensor p = boolT({2, 1}, {1, 0});
  Tensor q = boolT({2}, {1, 0});
  checkB(run1(OpKind::And, {p, q}), {2, 2}, {1, 0, 0, 0});
  checkB(run1(OpKind::Or, {p, q}), {2, 2}, {1, 1, 1, 0});
  checkB(run1(OpKind::Eq, {p, q}), {2, 2}, {1, 0, 0, 1});
}

TEST_CASE("where broadcasts all three operands") {
  Tensor c = boolT({2, 1}, {1, 0});
  Tensor a = f32({3}, {1, 2, 3});
  Tensor b = Tensor::scalarF32(-1);
  checkF(run1(OpKind::Where, {c, a, b}), {2, 3}, {1, 2, 3, -1, -1, -1});
  Tensor c2 = boolT({3}, {0, 1, 0});
  checkI(run1(OpKind::Where, {c2, i32({2, 1}, {7, 8}), i32({3}, {0, 0, 0})}), {2, 3}, {0, 7, 0, 0, 8, 0});
}

// ================================================================ contractions

namespace {
// Plain-loop matrix product of row-major a [m, k] and b [k, n].
std::vector<double> naiveMatMul(const std::vector<double>& a, const std::vector<double>& b, int m, int k, int n) {
  std::vector<double> c(m * n, 0.0);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      for (int p = 0; p < k; ++p) c[i * n + j] += a[i * k + p] * b[p * n + j];
  return c;
}
std::vector<double> values(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.size(); ++i) v.push_back(t.at(i));
  return v;
}
}  // namespace

TEST_CASE("matmul: 2-D, 1-D promotion and batch broadcasting") {
  Tensor a = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = f32({3, 2}, {7, 8, 9, 10, 11, 12});
  checkF(run1(OpKind::MatMul, {a, b}), {2, 2}, {58, 64, 139, 154});
  Tensor v = f32({3}, {1, 0, -1});
  checkF(run1(OpKind::MatMul, {a, v}), {2}, {-2, -2});          // matrix @ vector
  checkF(run1(OpKind::MatMul, {v, b}), {2}, {-4, -4});          // vector @ matrix
  checkF(run1(OpKind::MatMul, {v, f32({3}, {2, 5, 7})}), {}, {-5});  // dot product

  // Batch dims [2, 1] and [3] broadcast to [2, 3].
  Tensor x = iota({2, 1, 2, 3}, 0.5f, -1.0f);
  Tensor y = iota({3, 3, 4}, 0.25f, -2.0f);
  std::vector<double> xv = values(x), yv = values(y), e;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      std::vector<double> xa(xv.begin() + i * 6, xv.begin() + i * 6 + 6);
      std::vector<double> yb(yv.begin() + j * 12, yv.begin() + j * 12 + 12);
      auto c = naiveMatMul(xa, yb, 2, 3, 4);
      e.insert(e.end(), c.begin(), c.end());
    }
  checkF(run1(OpKind::MatMul, {x, y}), {2, 3, 2, 4}, e);

  // A batched matrix times a 1-D vector: [2, 2, 3] @ [3] -> [2, 2].
  Tensor z = iota({2, 2, 3});
  checkF(run1(OpKind::MatMul, {z, v}), {2, 2}, {-2, -2, -2, -2});
  // A 1-D vector times a batched matrix: [3] @ [2, 3, 2] -> [2, 2].
  Tensor w = iota({2, 3, 2});
  checkF(run1(OpKind::MatMul, {v, w}), {2, 2}, {-4, -4, -4, -4});
}

TEST_CASE("einsum: two-operand specs") {
  auto es = [](const char* spec, std::vector<Tensor> ins) {
    return run1(OpKind::Einsum, ins, attrs({{"spec", ir::einsumSpec(spec, ins.size())}}));
  };
  // gsm,me->gse
  Tensor a = iota({2, 3, 4}, 0.5f, -2.0f), b = iota({4, 5}, -0.25f, 1.0f);
  std::vector<double> av = values(a), bv = values(b), e;
  for (int g = 0; g < 2; ++g)
    for (int s = 0; s < 3; ++s)
      for (int x = 0; x < 5; ++x) {
        double acc = 0;
        for (int m = 0; m < 4; ++m) acc += av[(g * 3 + s) * 4 + m] * bv[m * 5 + x];
        e.push_back(acc);
      }
  checkF(es("gsm,me->gse", {a, b}), {2, 3, 5}, e);

  // Batched, with the output in a permuted order: bij,bjk->kbi.
  Tensor p = iota({2, 2, 3}, 1.0f, 1.0f), q = iota({2, 3, 2}, -1.0f, 2.0f);
  std::vector<double> pv = values(p), qv = values(q), e2(2 * 2 * 2);
  for (int bb = 0; bb < 2; ++bb)
    for (int i = 0; i < 2; ++i)
      for (int k = 0; k < 2; ++k) {
        double acc = 0;
        for (int j = 0; j < 3; ++j) acc += pv[(bb * 2 + i) * 3 + j] * qv[(bb * 3 + j) * 2 + k];
        e2[(k * 2 + bb) * 2 + i] = acc;
      }
  checkF(es("bij,bjk->kbi", {p, q}), {2, 2, 2}, e2);

  // Outer product, row-wise dot product, implicit output (ij,jk == ij,jk->ik).
  checkF(es("i,j->ij", {f32({2}, {1, 2}), f32({3}, {3, 4, 5})}), {2, 3}, {3, 4, 5, 6, 8, 10});
  checkF(es("ij,ij->i", {f32({2, 2}, {1, 2, 3, 4}), f32({2, 2}, {5, 6, 7, 8})}), {2}, {17, 53});
  checkF(es("ij,jk", {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({3, 2}, {7, 8, 9, 10, 11, 12})}), {2, 2},
         {58, 64, 139, 154});
  // A label summed in only one operand: ij,k->k = (sum a) * b.
  checkF(es("ij,k->k", {f32({2, 2}, {1, 2, 3, 4}), f32({2}, {1, -2})}), {2}, {10, -20});
  // A repeated label (diagonal) in a two-operand spec: ii,i->i.
  checkF(es("ii,i->i", {f32({2, 2}, {1, 2, 3, 4}), f32({2}, {10, 100})}), {2}, {10, 400});
}

TEST_CASE("einsum: one- and three-operand specs") {
  auto es = [](const char* spec, std::vector<Tensor> ins) {
    return run1(OpKind::Einsum, ins, attrs({{"spec", ir::einsumSpec(spec, ins.size())}}));
  };
  Tensor a = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  checkF(es("ij->ji", {a}), {3, 2}, {1, 4, 2, 5, 3, 6});
  checkF(es("ij->", {a}), {}, {21});
  checkF(es("ij->j", {a}), {3}, {5, 7, 9});
  Tensor sq = f32({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  checkF(es("ii->i", {sq}), {3}, {1, 5, 9});
  checkF(es("ii->", {sq}), {}, {15});

  // ij,jk,kl->il on small matrices, against two plain-loop products.
  Tensor x = iota({2, 3}, 0.5f, -1.0f), y = iota({3, 4}, -0.5f, 2.0f), z = iota({4, 2}, 0.25f, 0.0f);
  auto xy = naiveMatMul(values(x), values(y), 2, 3, 4);
  auto xyz = naiveMatMul(xy, values(z), 2, 4, 2);
  checkF(es("ij,jk,kl->il", {x, y, z}), {2, 2}, xyz);
  // A three-operand spec with a shared batch label: bi,bj,bk->bijk.
  Tensor u = f32({2, 2}, {1, 2, 3, 4}), v = f32({2, 1}, {5, 6}), w = f32({2, 2}, {7, 8, 9, 10});
  std::vector<double> e;
  for (int bb = 0; bb < 2; ++bb)
    for (int i = 0; i < 2; ++i)
      for (int k = 0; k < 2; ++k) e.push_back(u.at(bb * 2 + i) * v.at(bb) * w.at(bb * 2 + k));
  checkF(es("bi,bj,bk->bijk", {u, v, w}), {2, 2, 1, 2}, e);
}

// ================================================================ reductions

TEST_CASE("sum, mean, max, min over axes with keepdims") {
  Tensor x = f32({2, 3}, {1, 5, -2, 4, 0, 8});
  auto red = [&](OpKind k, const Tensor& t, std::optional<Ints> axis, bool keep = false) {
    AttrMap m;
    if (axis) m.set("axis", *axis);
    m.set("keepdims", keep);
    return run1(k, {t}, m);
  };
  checkF(red(OpKind::Sum, x, Ints{-1}), {2}, {4, 12});
  checkF(red(OpKind::Sum, x, Ints{0}, true), {1, 3}, {5, 5, 6});
  checkF(red(OpKind::Sum, x, std::nullopt), {}, {16});
  checkF(red(OpKind::Sum, x, std::nullopt, true), {1, 1}, {16});
  checkF(red(OpKind::Mean, x, Ints{1}, true), {2, 1}, {4.0 / 3.0, 4});
  checkF(red(OpKind::Mean, x, Ints{-1, 0}), {}, {16.0 / 6.0});
  checkF(red(OpKind::Max, x, Ints{1}), {2}, {5, 8});
  checkF(red(OpKind::Min, x, Ints{0}), {3}, {1, 0, -2});
  checkF(red(OpKind::Max, x, std::nullopt), {}, {8});

  // Rank 3, reducing the outer and inner axes: [2, 3, 4] over [0, 2].
  Tensor y = iota({2, 3, 4});
  std::vector<double> e(3, 0.0);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) e[j] += i * 12 + j * 4 + k;
  checkF(red(OpKind::Sum, y, Ints{2, -3}, true), {1, 3, 1}, e);

  Tensor n = i32({2, 2}, {3, -7, 10, 2});
  checkI(red(OpKind::Sum, n, Ints{0}), {2}, {13, -5});
  checkI(red(OpKind::Max, n, Ints{1}), {2}, {3, 10});
  checkI(red(OpKind::Min, n, std::nullopt), {}, {-7});
}

TEST_CASE("argmax returns the first maximum") {
  Tensor x = f32({2, 4}, {1, 7, 7, 2, 9, 0, 9, 9});
  checkI(run1(OpKind::ArgMax, {x}, attrs({{"axis", int64_t(-1)}})), {2}, {1, 0});
  checkI(run1(OpKind::ArgMax, {x}, attrs({{"axis", int64_t(0)}})), {4}, {1, 0, 1, 1});
  checkI(run1(OpKind::ArgMax, {i32({3}, {-5, -2, -9})}, attrs({{"axis", int64_t(0)}})), {}, {1});
}

// ================================================================ normalisations

TEST_CASE("softmax and log_softmax") {
  const std::vector<float> xs = {1, 2, 3, -1, 0, 1000, 1001, 1002};  // last row: large values
  Tensor x = f32({2, 4}, xs);
  Tensor s = run1(OpKind::Softmax, {x}, attrs({{"axis", int64_t(-1)}}));
  Tensor ls = run1(OpKind::LogSoftmax, {x}, attrs({{"axis", int64_t(-1)}}));
  std::vector<double> e, le;
  for (int r = 0; r < 2; ++r) {
    double mx = -INFINITY, z = 0;
    for (int j = 0; j < 4; ++j) mx = std::max(mx, (double)xs[r * 4 + j]);
    for (int j = 0; j < 4; ++j) z += std::exp(xs[r * 4 + j] - mx);
    for (int j = 0; j < 4; ++j) {
      e.push_back(std::exp(xs[r * 4 + j] - mx) / z);
      le.push_back(xs[r * 4 + j] - mx - std::log(z));
    }
  }
  checkF(s, {2, 4}, e);
  checkF(ls, {2, 4}, le);
  for (int r = 0; r < 2; ++r) {
    double rowSum = 0;
    for (int j = 0; j < 4; ++j) rowSum += s.at(r * 4 + j);
    CHECK(rowSum == doctest::Approx(1.0).epsilon(1e-6));
  }
  // The first row is small enough for the direct formula exp(x_i) / sum exp.
  double z0 = std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + std::exp(-1.0);
  CHECK(s.at(0) == doctest::Approx(std::exp(1.0) / z0).epsilon(1e-6));
  CHECK(s.at(2) == doctest::Approx(std::exp(3.0) / z0).epsilon(1e-6));

  // Along axis 0 (columns).
  Tensor c = run1(OpKind::Softmax, {f32({2, 2}, {0, 1, 0, 3})}, attrs({{"axis", int64_t(0)}}));
  checkF(c, {2, 2}, {0.5, 1 / (1 + std::exp(2.0)), 0.5, 1 / (1 + std::exp(-2.0))});
}

TEST_CASE("layer_norm over two axes") {
  Tensor x = iota({2, 2, 3}, 1.0f, 0.0f);
  x.f32()[5] = 20;  // make the groups differ in spread
  Tensor r = run1(OpKind::LayerNorm, {x}, attrs({{"axis", Ints{-2, -1}}, {"eps", 1e-5}}));
  std::vector<double> e;
  for (int g = 0; g < 2; ++g) {
    double mean = 0, var = 0;
    for (int i = 0; i < 6; ++i) mean += x.at(g * 6 + i);
    mean /= 6;
    for (int i = 0; i < 6; ++i) var += (x.at(g * 6 + i) - mean) * (x.at(g * 6 + i) - mean);
    var /= 6;  // biased
    for (int i = 0; i < 6; ++i) e.push_back((x.at(g * 6 + i) - mean) / std::sqrt(var + 1e-5));
  }
  checkF(r, {2, 2, 3}, e);
  // Over the last axis only (default eps filled in by the type rule).
  Tensor r1 = run1(OpKind::LayerNorm, {f32({1, 2}, {1, 3})}, attrs({{"axis", Ints{-1}}}));
  checkF(r1, {1, 2}, {-1 / std::sqrt(1 + 1e-5), 1 / std::sqrt(1 + 1e-5)});
}

TEST_CASE("cumsum inclusive and exclusive") {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  auto cs = [&](const Tensor& t, int64_t axis, bool ex) {
    return run1(OpKind::CumSum, {t}, attrs({{"axis", axis}, {"exclusive", ex}}));
  };
  checkF(cs(x, 1, false), {2, 3}, {1, 3, 6, 4, 9, 15});
  checkF(cs(x, -1, true), {2, 3}, {0, 1, 3, 0, 4, 9});
  checkF(cs(x, 0, false), {2, 3}, {1, 2, 3, 5, 7, 9});
  checkF(cs(x, 0, true), {2, 3}, {0, 0, 0, 1, 2, 3});
  checkI(cs(i32({4}, {1, -2, 3, 10}), 0, true), {4}, {0, 1, -1, 2});
}

// ================================================================ data movement

TEST_CASE("reshape and transpose") {
  Tensor x = iota({2, 3, 4});
  Tensor r = run1(OpKind::Reshape, {x}, attrs({{"shape", Ints{4, -1}}}));
  std::vector<double> all;
  for (int i = 0; i < 24; ++i) all.push_back(i);
  checkF(r, {4, 6}, all);

  // perm [2, 0, 1]: out[k, i, j] = x[i, j, k].
  Tensor t = run1(OpKind::Transpose, {x}, attrs({{"perm", Ints{2, 0, -2}}}));
  std::vector<double> e;
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) e.push_back(i * 12 + j * 4 + k);
  checkF(t, {4, 2, 3}, e);
  // No perm: reverse the dims.
  checkI(run1(OpKind::Transpose, {i32({2, 3}, {1, 2, 3, 4, 5, 6})}), {3, 2}, {1, 4, 2, 5, 3, 6});
}

TEST_CASE("concat of three tensors") {
  Tensor a = f32({2, 1}, {1, 2}), b = f32({2, 2}, {3, 4, 5, 6}), c = f32({2, 3}, {7, 8, 9, 10, 11, 12});
  checkF(run1(OpKind::Concat, {a, b, c}, attrs({{"axis", int64_t(-1)}})), {2, 6},
         {1, 3, 4, 7, 8, 9, 2, 5, 6, 10, 11, 12});
  checkI(run1(OpKind::Concat, {i32({1, 2}, {1, 2}), i32({2, 2}, {3, 4, 5, 6}), i32({1, 2}, {7, 8})},
              attrs({{"axis", int64_t(0)}})),
         {4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
}

TEST_CASE("slice") {
  Tensor x = iota({3, 4});
  checkF(run1(OpKind::Slice, {x}, attrs({{"axis", int64_t(1)}, {"start", int64_t(1)}, {"end", int64_t(3)}})),
         {3, 2}, {1, 2, 5, 6, 9, 10});
  checkF(run1(OpKind::Slice, {x}, attrs({{"axis", int64_t(0)}, {"start", int64_t(-1)}, {"end", int64_t(3)}})),
         {1, 4}, {8, 9, 10, 11});
}

TEST_CASE("broadcast") {
  checkF(run1(OpKind::Broadcast, {f32({3}, {1, 2, 3})}, attrs({{"shape", Ints{2, 3}}})), {2, 3},
         {1, 2, 3, 1, 2, 3});
  checkF(run1(OpKind::Broadcast, {f32({2, 1}, {1, 2})}, attrs({{"shape", Ints{2, 3}}})), {2, 3},
         {1, 1, 1, 2, 2, 2});
  checkB(run1(OpKind::Broadcast, {Tensor::scalarBool(true)}, attrs({{"shape", Ints{2}}})), {2}, {1, 1});
}

TEST_CASE("one_hot") {
  Tensor r = run1(OpKind::OneHot, {i32({2, 2}, {0, 2, 3, -1})}, attrs({{"n", int64_t(3)}}));
  checkF(r, {2, 2, 3}, {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0});  // out of range: zero rows
}

TEST_CASE("take gathers rows and rejects out-of-range indices") {
  Tensor table = f32({5, 2}, {0, 1, 10, 11, 20, 21, 30, 31, 40, 41});
  checkF(run1(OpKind::Take, {table, i32({2, 2}, {4, 0, 2, 2})}), {2, 2, 2},
         {40, 41, 0, 1, 20, 21, 20, 21});
  checkI(run1(OpKind::Take, {i32({3}, {7, 8, 9}), i32({2}, {2, 0})}), {2}, {9, 7});
  try {
    run1(OpKind::Take, {table, i32({2}, {1, 7})});
    FAIL("take with an out-of-range index did not throw");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()) == "take: index 7 is out of range for a table of 5 rows");
  }
  CHECK_THROWS_AS(run1(OpKind::Take, {table, i32({1}, {-1})}), std::runtime_error);
}

// ================================================================ interpreter

TEST_CASE("interpreter: several ops, repeated operands, multiple results") {
  Builder b;
  Value* x = b.arg(f32({2}, {3, -4}));
  Value* y = b.arg(f32({2}, {1, 2}));
  Value* unused = b.arg(Tensor::scalarF32(9));
  (void)unused;
  Value* sq = b.op(OpKind::Mul, {x, x});             // x is read twice here...
  Value* s = b.op(OpKind::Add, {sq, x});             // ...and once more here (x freed after)
  Value* dead = b.op(OpKind::Exp, {s});              // never used: dropped
  (void)dead;
  AttrMap all;
  all.set("keepdims", false);
  Value* tot = b.op(OpKind::Sum, {s}, all);
  auto r = b.run({tot, s, y});                     // returns an argument too
  REQUIRE(r.size() == 3);
  checkF(r[0], {}, {12 + 12});                     // (9+3) + (16-4)
  checkF(r[1], {2}, {12, 12});
  checkF(r[2], {2}, {1, 2});
}

TEST_CASE("interpreter: a two-layer MLP against a hand-written loop") {
  Tensor xv = iota({3, 4}, 0.1f, -0.5f), w1v = iota({4, 5}, 0.05f, -0.4f), w2v = iota({5, 2}, -0.1f, 0.3f);
  Builder b;
  Value* x = b.arg(xv);
  Value* w1 = b.arg(w1v);
  Value* w2 = b.arg(w2v);
  Value* h = b.op(OpKind::Relu, {b.op(OpKind::MatMul, {x, w1})});
  Value* y = b.op(OpKind::Einsum, {h, w2}, attrs({{"spec", ir::einsumSpec("bh,hd->bd", 2)}}));
  Tensor r = b.run1(y);
  auto hv = naiveMatMul(values(xv), values(w1v), 3, 4, 5);
  for (auto& v : hv) v = std::max(v, 0.0);
  checkF(r, {3, 2}, naiveMatMul(hv, values(w2v), 3, 5, 2));
}

// ================================================================ dropout

TEST_CASE("dropout: keeps 1 - p of the elements, scaled, keyed by seed, step, site and global index") {
  auto drop = [](const Tensor& x, std::vector<int32_t> key, double p, int64_t site, uint64_t seed,
                 std::optional<Ints> shape = std::nullopt) {
    KernelContext ctx;
    ctx.seed = seed;
    AttrMap at = attrs({{"p", p}, {"site", site}});
    if (shape) at.set("shape", *shape);
    Shape ks{(int64_t)key.size()};
    return run1(OpKind::Dropout, {x, i32(ks, std::move(key))}, at, ctx);
  };
  const int64_t R = 1000, C = 1000, N = R * C;
  Tensor ones = f32({R, C}, std::vector<float>(N, 1.0f));
  const double p = 0.3;
  Tensor a = drop(ones, {3, 0, 0}, p, 0, 11);
  const float scale = (float)(1.0 / (1.0 - p));
  int64_t kept = 0;
  bool allScaled = true, matches = true;
  for (int64_t i = 0; i < N; ++i) {
    float v = a.f32()[i];
    kept += v != 0;
    allScaled &= v == 0 || v == scale;
    // Element i is kept iff its Philox uniform (seed, stream of site 0 and
    // step 3, flat index i) is >= p.
    matches &= (v != 0) == ((double)uniformAt(11, dropoutStream(0, 3), (uint64_t)i) >= p);
  }
  CHECK(allScaled);
  CHECK(matches);
  // Binomial(N, 1 - p): 6 standard deviations (a false failure has
  // probability about 2e-9).
  const double sd = std::sqrt((double)N * p * (1 - p));
  CHECK(std::fabs((double)kept - (double)N * (1 - p)) <= 6 * sd);

  auto differing = [&](const Tensor& b) {
    int64_t n = 0;
    for (int64_t i = 0; i < N; ++i) n += a.f32()[i] != b.f32()[i];
    return n;
  };
  // The same seed, step and site: the same mask. Another step, site or
  // seed: an independent one (2 p (1 - p) N = 420000 elements differ on
  // average).
  CHECK(differing(drop(ones, {3, 0, 0}, p, 0, 11)) == 0);
  CHECK(differing(drop(ones, {4, 0, 0}, p, 0, 11)) > N / 3);
  CHECK(differing(drop(ones, {3, 0, 0}, p, 1, 11)) > N / 3);
  CHECK(differing(drop(ones, {3, 0, 0}, p, 0, 12)) > N / 3);

  // A block with its offsets and the global shape draws its part of the
  // global mask (the partitioner's local op).
  Tensor x = f32({10, 7}, std::vector<float>(70, 2.0f));
  Tensor whole = drop(x, {5, 0, 0}, 0.5, 2, 1);
  Tensor block = drop(f32({4, 3}, std::vector<float>(12, 2.0f)), {5, 4, 3}, 0.5, 2, 1, Ints{10, 7});
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 3; ++c) CHECK(block.f32()[r * 3 + c] == whole.f32()[(4 + r) * 7 + 3 + c]);

  // p = 0, and a dropout without a key (inference): the identity.
  Tensor y = f32({2, 3}, {1, -2, 3, -4, 5, -6});
  Tensor id0 = drop(y, {1, 0, 0}, 0.0, 0, 3);
  Tensor id1 = run1(OpKind::Dropout, {y}, attrs({{"p", 0.9}}));
  for (int i = 0; i < 6; ++i) {
    CHECK(id0.f32()[i] == y.f32()[i]);
    CHECK(id1.f32()[i] == y.f32()[i]);
  }
}
