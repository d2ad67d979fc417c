// Reverse-mode autodiff (passes/Autodiff, the gradient rules of
// ir/GradRules) checked against central finite differences.
//
// Each case builds a function computing loss = sum(out * w), where `out` is
// the op (or small graph) under test applied to fixed pseudo-random inputs
// and `w` a fixed pseudo-random weight of out's shape (so every output
// element gets a different weight and a transposed or misplaced gradient
// cannot pass). appendGradient appends the reverse sweep; the function is
// verified and interpreted, and every gradient element is compared with
//   (loss(x + h) - loss(x - h)) / 2h,   h = 1e-2 * max(1, |x|),
// with the loss recomputed by interpreting the forward function (a clone
// taken before the sweep was appended) in f32.
//
// Tolerances: |ad - fd| <= 1e-3 + 1e-2 |fd|. The forward pass runs in f32
// (reductions accumulate in double but round the result to f32), so the
// loss carries a relative rounding error of about 1e-7..1e-6; divided by
// 2h = 2e-2 this gives an absolute error in fd of ~1e-5 |loss| (losses here
// are O(1..10), hence the absolute 1e-3, with margin for the rounding of
// every element of `out`). The truncation error of the central difference
// is h^2 f''' / 6 ~ 2e-5 f''': below 1e-3 relative for the smooth functions
// and input ranges used (log/sqrt/rsqrt/pow on inputs >= 0.5, exp on inputs
// <= 1.5), covered by the relative 1e-2. The largest error seen over all
// cases is under a tenth of this bound (8.5e-4 relative, a truncation
// error), while a rule off by 10% in one term fails it several times over.
// Inputs stay at least 0.1 away from kinks (relu and abs away from 0,
// max/min and maximum/minimum without near-ties), farther than h, so the
// central difference never straddles one; ties are tested separately with
// exact expected values.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "backend/Interpreter.h"
#include "ir/Function.h"
#include "ir/GradRules.h"
#include "ir/IRParser.h"
#include "ir/Printer.h"
#include "ir/Module.h"
#include "ir/OpTable.h"
#include "ir/Verifier.h"
#include "passes/Autodiff.h"
#include "passes/Pipeline.h"

using namespace gsl;
using namespace gsl::backend;
using ir::AttrMap;
using ir::DType;
using ir::OpKind;
using ir::Shape;
using ir::TensorType;
using ir::Value;

namespace {

using Ints = std::vector<int64_t>;

constexpr double kAbsTol = 1e-3, kRelTol = 1e-2;  // see the top of this file

AttrMap attrs(std::initializer_list<std::pair<const char*, ir::Attr>> kv) {
  AttrMap m;
  for (auto& [k, v] : kv) m.set(k, v);
  return m;
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

// A small LCG: deterministic test data independent of the library.
struct Lcg {
  uint64_t s;
  explicit Lcg(uint64_t seed) : s(seed * 2654435761u + 12345) {}
  double next() {  // [0, 1)
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)((s >> 40) & 0xFFFFFF) / (double)(1 << 24);
  }
};

// Uniform in [lo, hi).
Tensor rnd(const Shape& s, double lo, double hi, uint64_t seed) {
  Lcg g(seed);
  std::vector<float> v(numel(s));
  for (auto& x : v) x = (float)(lo + (hi - lo) * g.next());
  return Tensor::fromF32(s, v);
}

// Magnitude in [lo, hi) with a random sign: stays >= lo away from 0.
Tensor rndAway(const Shape& s, double lo, double hi, uint64_t seed) {
  Lcg g(seed);
  std::vector<float> v(numel(s));
  for (auto& x : v) {
    double m = lo + (hi - lo) * g.next();
    x = (float)(g.next() < 0.5 ? -m : m);
  }
  return Tensor::fromF32(s, v);
}

// Distinct values -1 + 0.2 k in a pseudo-random order (no two closer than 0.2).
Tensor distinct(const Shape& s, uint64_t seed) {
  int64_t n = numel(s);
  std::vector<int64_t> k(n);
  std::iota(k.begin(), k.end(), 0);
  Lcg g(seed);
  for (int64_t i = n - 1; i > 0; --i) std::swap(k[i], k[(int64_t)(g.next() * (double)(i + 1))]);
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = (float)(-1.0 + 0.2 * (double)k[i]);
  return Tensor::fromF32(s, v);
}

Tensor i32(const Shape& s, std::vector<int32_t> v) { return Tensor::fromI32(s, std::move(v)); }
Tensor boolT(const Shape& s, std::vector<int32_t> v) {
  Tensor t(TensorType{DType::Bool, s});
  for (size_t i = 0; i < v.size(); ++i) t.i32()[i] = v[i] ? 1 : 0;
  return t;
}

Tensor deepCopy(const Tensor& t) {
  Tensor c(t.type());
  if (t.size()) std::memcpy(c.raw(), t.raw(), (size_t)t.size() * 4);
  return c;
}

// One input of a case: a function argument, or a param (read by one
// `param` op made before the case's graph). `check`: compare its gradient.
struct Input {
  Tensor t;
  std::string param;  // non-empty: a param of that name
  bool check = true;
};
Input arg(Tensor t, bool check = true) { return {std::move(t), "", check}; }
Input param(std::string name, Tensor t) { return {std::move(t), std::move(name), true}; }

struct Builder {
  ir::Module m;
  ir::Function f;
  Value* op(OpKind k, std::vector<Value*> operands, AttrMap at = {}) {
    std::vector<TensorType> in;
    for (Value* v : operands) in.push_back(v->type);
    TensorType out;
    std::string err = ir::inferType(k, in, at, out);
    REQUIRE_MESSAGE(err.empty(), err);
    return f.append(k, std::move(operands), std::move(at), out)->result;
  }
  Value* param(const std::string& name) {
    const ir::Param* p = m.findParam(name);
    REQUIRE(p);
    return f.append(OpKind::Param, {}, attrs({{"name", name}}), p->type)->result;
  }
  Value* constant(double v, const TensorType& t = {DType::F32, {}}) {
    return f.append(OpKind::Constant, {}, attrs({{"value", v}}), t)->result;
  }
};

using Build = std::function<Value*(Builder&, const std::vector<Value*>&)>;

struct Result {
  std::shared_ptr<Builder> owner;  // keeps the function (and so `grads`) alive
  passes::Gradients grads;
  size_t forwardOps = 0, appendedOps = 0;
};

// Builds loss = sum(build(inputs) * w), appends its gradient with respect
// to every param input and (wrtArgs) every f32 argument, and checks each
// checked input's gradient against central finite differences.
Result checkGrad(const std::vector<Input>& inputs, const Build& build, bool wrtArgs = true,
                 uint64_t wseed = 99) {
  Result res;
  res.owner = std::make_shared<Builder>();
  Builder& b = *res.owner;
  for (const auto& in : inputs)
    if (!in.param.empty()) b.m.params.push_back(ir::Param{in.param, in.t.type(), {}, {}, {}});
  std::vector<Value*> vals;
  std::vector<Tensor> args;
  std::vector<int> argOf(inputs.size(), -1);
  std::vector<std::string> paramNames;
  std::map<std::string, Tensor> params;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].param.empty()) {
      argOf[i] = (int)args.size();
      args.push_back(deepCopy(inputs[i].t));
      vals.push_back(b.f.addArg(inputs[i].t.type()));
    } else {
      params[inputs[i].param] = deepCopy(inputs[i].t);
      paramNames.push_back(inputs[i].param);
      vals.push_back(b.param(inputs[i].param));
    }
  }
  Value* out = build(b, vals);
  REQUIRE(out->type.dtype == DType::F32);
  Tensor w = rnd(out->type.shape, -1.0, 1.0, wseed);
  Value* wv = b.f.addArg(w.type());
  args.push_back(w);
  Value* loss = b.op(OpKind::Sum, {b.op(OpKind::Mul, {out, wv})});
  b.f.results = {loss};
  std::unique_ptr<ir::Function> fwd = b.f.clone();

  res.forwardOps = b.f.ops.size();
  std::vector<const ir::Op*> before;
  for (auto& op : b.f.ops) before.push_back(op.get());
  res.grads = passes::appendGradient(b.m, b.f, loss, paramNames, wrtArgs);
  res.appendedOps = b.f.ops.size() - res.forwardOps;

  // The forward ops are untouched; new values have no sharding.
  for (size_t i = 0; i < before.size(); ++i) REQUIRE(b.f.ops[i].get() == before[i]);
  for (size_t i = res.forwardOps; i < b.f.ops.size(); ++i) CHECK(!b.f.ops[i]->result->sharding);
  REQUIRE(res.grads.params.size() == paramNames.size());
  REQUIRE(res.grads.args.size() == (wrtArgs ? b.f.args.size() : 0));

  std::vector<Value*> results = {loss};
  std::vector<size_t> checked;  // input index per result after the loss
  for (size_t i = 0; i < inputs.size(); ++i) {
    Value* g = nullptr;
    if (!inputs[i].param.empty()) {
      g = res.grads.params[std::find(paramNames.begin(), paramNames.end(), inputs[i].param) - paramNames.begin()];
    } else if (wrtArgs) {
      g = res.grads.args[argOf[i]];
      if (inputs[i].t.dtype() != DType::F32) CHECK(g == nullptr);
    }
    if (!g) continue;
    CHECK(g->type == inputs[i].t.type());
    if (inputs[i].check) {
      results.push_back(g);
      checked.push_back(i);
    }
  }
  b.f.results = results;
  std::string err = ir::verifyFunction(b.m, b.f);
  REQUIRE_MESSAGE(err.empty(), err);

  KernelContext ctx;
  ctx.param = [&](const std::string& n) -> const Tensor& { return params.at(n); };
  std::vector<Tensor> r = interpret(b.f, args, ctx);
  auto lossAt = [&]() { return interpret(*fwd, args, ctx).at(0).item(); };
  const double l0 = lossAt();
  CHECK(r[0].item() == l0);  // the forward part computes the same loss

  for (size_t k = 0; k < checked.size(); ++k) {
    const Input& in = inputs[checked[k]];
    const Tensor& g = r[k + 1];
    REQUIRE(g.type() == in.t.type());
    Tensor& x = in.param.empty() ? args[argOf[checked[k]]] : params[in.param];
    for (int64_t e = 0; e < x.size(); ++e) {
      float x0 = x.f32()[e];
      float h = 1e-2f * std::max(1.0f, std::fabs(x0));
      x.f32()[e] = x0 + h;
      double lp = lossAt();
      x.f32()[e] = x0 - h;
      double lm = lossAt();
      x.f32()[e] = x0;
      double fd = (lp - lm) / (2.0 * (double)h), ad = g.at(e);
      INFO("input " << checked[k] << (in.param.empty() ? "" : " @" + in.param) << " element " << e
                    << ": autodiff " << ad << ", finite difference " << fd);
      CHECK(std::fabs(ad - fd) <= kAbsTol + kRelTol * std::fabs(fd));
    }
  }
  return res;
}

// Single-op cases.
Build unary(OpKind k, AttrMap at = {}) {
  return [k, at](Builder& b, const std::vector<Value*>& v) { return b.op(k, {v[0]}, at); };
}
Build nary(OpKind k, AttrMap at = {}) {
  return [k, at](Builder& b, const std::vector<Value*>& v) { return b.op(k, v, at); };
}

}  // namespace

// ================================================================ the table

TEST_CASE("every differentiable op has a gradient rule; the others none") {
  // The rows declare which ops have none (ir/OpTable.h: sources, collectives,
  // and the NotDifferentiable trait); tests/unit/ir_optable_test.cpp checks
  // the declarations. Here: the declared set is the one autodiff expects.
  std::vector<OpKind> none = {OpKind::Param, OpKind::Constant, OpKind::Not, OpKind::Mod, OpKind::FloorDiv,
                              OpKind::Eq, OpKind::Ne, OpKind::Lt, OpKind::Le, OpKind::Gt, OpKind::Ge,
                              OpKind::And, OpKind::Or, OpKind::ArgMax, OpKind::OneHot,
                              OpKind::RandomUniform, OpKind::Iota,
                              OpKind::Loop};  // a loop is differentiated by the pass itself
  for (const auto& info : ir::allOps()) {
    INFO(info.mnemonic);
    bool expectNone = info.cls == ir::OpClass::Collective ||
                      std::find(none.begin(), none.end(), info.kind) != none.end();
    CHECK((info.grad == nullptr) == expectNone);
    bool declaredNone = info.cls == ir::OpClass::Collective || info.cls == ir::OpClass::Source ||
                        info.has(ir::NotDifferentiable) || info.has(ir::HasBody);
    CHECK(declaredNone == expectNone);
  }
}

// ================================================================ unary

TEST_CASE("gradients of unary ops") {
  const Shape s{2, 3};
  SUBCASE("neg") { checkGrad({arg(rnd(s, -2, 2, 1))}, unary(OpKind::Neg)); }
  SUBCASE("exp") { checkGrad({arg(rnd(s, -1.5, 1.5, 2))}, unary(OpKind::Exp)); }
  SUBCASE("log") { checkGrad({arg(rnd(s, 0.5, 3, 3))}, unary(OpKind::Log)); }
  SUBCASE("sqrt") { checkGrad({arg(rnd(s, 0.5, 3, 4))}, unary(OpKind::Sqrt)); }
  SUBCASE("rsqrt") { checkGrad({arg(rnd(s, 0.5, 3, 5))}, unary(OpKind::Rsqrt)); }
  SUBCASE("tanh") { checkGrad({arg(rnd(s, -2, 2, 6))}, unary(OpKind::Tanh)); }
  SUBCASE("relu") { checkGrad({arg(rndAway(s, 0.1, 2, 7))}, unary(OpKind::Relu)); }
  SUBCASE("gelu") { checkGrad({arg(rnd({3, 4}, -3, 3, 8))}, unary(OpKind::Gelu)); }
  SUBCASE("sigmoid") { checkGrad({arg(rnd(s, -3, 3, 9))}, unary(OpKind::Sigmoid)); }
  SUBCASE("erf") { checkGrad({arg(rnd({3, 4}, -2.5, 2.5, 14))}, unary(OpKind::Erf)); }
  SUBCASE("gelu_exact") { checkGrad({arg(rnd({3, 4}, -3, 3, 15))}, unary(OpKind::GeluExact)); }
  // dropout with a key is linear in x (x times a fixed mask over 1 - p): its
  // gradient is the same mask over 1 - p; without a key, the identity.
  SUBCASE("dropout") {
    checkGrad({arg(rnd({6, 7}, -2, 2, 16)), arg(i32({3}, {4, 0, 0}), false)}, [](Builder& b, const std::vector<Value*>& v) {
      return b.op(OpKind::Dropout, {v[0], v[1]}, attrs({{"p", 0.4}, {"site", int64_t(2)}}));
    });
    checkGrad({arg(rnd(s, -2, 2, 17))}, [](Builder& b, const std::vector<Value*>& v) {
      return b.op(OpKind::Dropout, {v[0]}, attrs({{"p", 0.4}}));
    });
  }
  SUBCASE("abs") { checkGrad({arg(rndAway(s, 0.1, 2, 10))}, unary(OpKind::Abs)); }
  SUBCASE("copy") { checkGrad({arg(rnd(s, -2, 2, 11))}, unary(OpKind::Copy)); }
  SUBCASE("cast f32 -> f32") {
    checkGrad({arg(rnd(s, -2, 2, 12))}, unary(OpKind::Cast, attrs({{"dtype", DType::F32}})));
  }
  SUBCASE("cast i32 -> f32 passes no gradient to the i32 value") {
    checkGrad({arg(rnd(s, -2, 2, 13)), arg(i32(s, {1, -2, 3, 0, 5, 7}))},
              [](Builder& b, const std::vector<Value*>& v) {
                Value* c = b.op(OpKind::Cast, {v[1]}, attrs({{"dtype", DType::F32}}));
                return b.op(OpKind::Mul, {v[0], c});
              });
  }
}

// ================================================================ binary

TEST_CASE("gradients of binary ops, same shapes and broadcasting") {
  struct Shapes {
    Shape a, b;
  };
  const std::vector<Shapes> shapes = {{{2, 3}, {2, 3}}, {{2, 3}, {3}}, {{2, 1}, {1, 3}},
                                      {{}, {2, 3}},     {{4, 1, 3}, {2, 1}}};
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Shape &sa = shapes[i].a, &sb = shapes[i].b;
    CAPTURE(i);
    SUBCASE("add") { checkGrad({arg(rnd(sa, -2, 2, 20 + i)), arg(rnd(sb, -2, 2, 30 + i))}, nary(OpKind::Add)); }
    SUBCASE("sub") { checkGrad({arg(rnd(sa, -2, 2, 21 + i)), arg(rnd(sb, -2, 2, 31 + i))}, nary(OpKind::Sub)); }
    SUBCASE("mul") { checkGrad({arg(rnd(sa, -2, 2, 22 + i)), arg(rnd(sb, -2, 2, 32 + i))}, nary(OpKind::Mul)); }
    SUBCASE("div") {
      checkGrad({arg(rnd(sa, -2, 2, 23 + i)), arg(rndAway(sb, 0.5, 1.5, 33 + i))}, nary(OpKind::Div));
    }
    SUBCASE("pow") {
      checkGrad({arg(rnd(sa, 0.5, 2, 24 + i)), arg(rnd(sb, -1.5, 1.5, 34 + i))}, nary(OpKind::Pow));
    }
  }
  SUBCASE("pow with a constant exponent (x ** 2)") {
    checkGrad({arg(rnd({2, 3}, -2, 2, 40))}, [](Builder& b, const std::vector<Value*>& v) {
      return b.op(OpKind::Pow, {v[0], b.constant(2.0)});
    });
  }
  SUBCASE("pow: d/d exponent is 0 where the base is <= 0 (no NaN)") {
    Builder b;
    Value* a = b.f.addArg({DType::F32, {3}});
    Value* e = b.f.addArg({DType::F32, {3}});
    Value* loss = b.op(OpKind::Sum, {b.op(OpKind::Pow, {a, e})});
    auto g = passes::appendGradient(b.m, b.f, loss, {}, true);
    b.f.results = {g.args[0], g.args[1]};
    REQUIRE(ir::verifyFunction(b.m, b.f).empty());
    auto r = interpret(b.f, {Tensor::fromF32({3}, {0.0f, -2.0f, 1.5f}), Tensor::fromF32({3}, {2, 2, 2})}, {});
    std::vector<double> da = {0, -4, 3}, de = {0, 0, 2.25 * std::log(1.5)};
    for (int i = 0; i < 3; ++i) {
      CHECK(r[0].at(i) == doctest::Approx(da[i]));
      CHECK(r[1].at(i) == doctest::Approx(de[i]));
    }
  }
}

TEST_CASE("gradients of maximum and minimum") {
  // b = a + d with |d| in [0.1, 1): no ties within the finite-difference step.
  for (int bc = 0; bc < 2; ++bc) {
    Shape sa{2, 3}, sb = bc ? Shape{3} : Shape{2, 3};
    Tensor a = rnd(sa, -2, 2, 50), d = rndAway(sb, 0.1, 1, 51);
    Tensor b(TensorType{DType::F32, sb});
    for (int64_t i = 0; i < b.size(); ++i) b.f32()[i] = a.f32()[i] + d.f32()[i];
    CAPTURE(bc);
    SUBCASE("maximum") { checkGrad({arg(a), arg(b)}, nary(OpKind::Maximum)); }
    SUBCASE("minimum") { checkGrad({arg(a), arg(b)}, nary(OpKind::Minimum)); }
  }
  SUBCASE("a tie sends the gradient to the first operand") {
    Builder b;
    Value* x = b.f.addArg({DType::F32, {2}});
    Value* y = b.f.addArg({DType::F32, {2}});
    Value* mx = b.op(OpKind::Maximum, {x, y});
    Value* mn = b.op(OpKind::Minimum, {x, y});
    Value* loss = b.op(OpKind::Sum, {b.op(OpKind::Add, {mx, b.op(OpKind::Mul, {mn, b.constant(3.0)})})});
    auto g = passes::appendGradient(b.m, b.f, loss, {}, true);
    b.f.results = {g.args[0], g.args[1]};
    REQUIRE(ir::verifyFunction(b.m, b.f).empty());
    auto r = interpret(b.f, {Tensor::fromF32({2}, {1, 2}), Tensor::fromF32({2}, {1, 0})}, {});
    // element 0 ties (both go to x); element 1: max is x, min is y.
    CHECK(r[0].at(0) == 4.0);
    CHECK(r[0].at(1) == 1.0);
    CHECK(r[1].at(0) == 0.0);
    CHECK(r[1].at(1) == 3.0);
  }
}

TEST_CASE("gradient of where: to both branches, none to the condition") {
  Tensor c = boolT({2, 1}, {1, 0});
  Tensor c2 = boolT({2, 3}, {1, 0, 0, 1, 1, 0});
  SUBCASE("broadcast condition and operands") {
    checkGrad({arg(c), arg(rnd({2, 3}, -2, 2, 60)), arg(rnd({3}, -2, 2, 61))}, nary(OpKind::Where));
  }
  SUBCASE("full condition, scalar operand") {
    checkGrad({arg(c2), arg(rnd({}, -2, 2, 62)), arg(rnd({2, 3}, -2, 2, 63))}, nary(OpKind::Where));
  }
}

// ================================================================ contractions

TEST_CASE("gradient of matmul: 2-D, batched, broadcast batch dims, 1-D operands") {
  struct Case {
    Shape a, b;
  };
  const std::vector<Case> cases = {
      {{2, 3}, {3, 4}},       {{2, 2, 3}, {3, 4}},    {{2, 1, 2, 3}, {3, 3, 4}},
      {{3}, {3, 4}},          {{2, 3}, {3}},          {{3}, {3}},
      {{3}, {2, 3, 4}},       {{2, 2, 3}, {3}},       {{1, 2, 3}, {2, 3, 2}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    CAPTURE(i);
    checkGrad({arg(rnd(cases[i].a, -1, 1, 70 + i)), arg(rnd(cases[i].b, -1, 1, 80 + i))},
              nary(OpKind::MatMul));
  }
}

TEST_CASE("gradient of einsum") {
  auto es = [](const std::string& spec) {
    const size_t operands = std::count(spec.begin(), spec.end(), ',') + 1;
    return nary(OpKind::Einsum, attrs({{"spec", ir::einsumSpec(spec, operands)}}));
  };
  SUBCASE("gsm,me->gse") {
    checkGrad({arg(rnd({2, 3, 4}, -1, 1, 90)), arg(rnd({4, 2}, -1, 1, 91))}, es("gsm,me->gse"));
  }
  SUBCASE("gsec,gsm->egcm") {
    checkGrad({arg(rnd({2, 3, 2, 2}, -1, 1, 92)), arg(rnd({2, 3, 3}, -1, 1, 93))}, es("gsec,gsm->egcm"));
  }
  SUBCASE("bnqk,bnkh->bnqh") {
    checkGrad({arg(rnd({2, 2, 3, 4}, -1, 1, 94)), arg(rnd({2, 2, 4, 3}, -1, 1, 95))}, es("bnqk,bnkh->bnqh"));
  }
  SUBCASE("three operands: ij,jk,kl->il") {
    checkGrad({arg(rnd({2, 3}, -1, 1, 96)), arg(rnd({3, 4}, -1, 1, 97)), arg(rnd({4, 2}, -1, 1, 98))},
              es("ij,jk,kl->il"));
  }
  SUBCASE("ij-> (sum)") { checkGrad({arg(rnd({2, 3}, -1, 1, 99))}, es("ij->")); }
  SUBCASE("ij->ji (transpose)") { checkGrad({arg(rnd({2, 3}, -1, 1, 100))}, es("ij->ji")); }
  SUBCASE("implicit output: ij,jk") {
    checkGrad({arg(rnd({2, 3}, -1, 1, 101)), arg(rnd({3, 2}, -1, 1, 102))}, es("ij,jk"));
  }
  SUBCASE("a label summed out in one operand only: ij,jk->i") {
    checkGrad({arg(rnd({2, 3}, -1, 1, 103)), arg(rnd({3, 4}, -1, 1, 104))}, es("ij,jk->i"));
  }
  SUBCASE("outer product: i,j->ij") {
    checkGrad({arg(rnd({3}, -1, 1, 105)), arg(rnd({2}, -1, 1, 106))}, es("i,j->ij"));
  }
  SUBCASE("diagonals: ii->, ii->i, iij,jk->ik, ij,jj->i") {
    checkGrad({arg(rnd({3, 3}, -1, 1, 107))}, es("ii->"));
    checkGrad({arg(rnd({3, 3}, -1, 1, 108))}, es("ii->i"));
    checkGrad({arg(rnd({3, 3, 2}, -1, 1, 109)), arg(rnd({2, 2}, -1, 1, 110))}, es("iij,jk->ik"));
    checkGrad({arg(rnd({2, 3}, -1, 1, 111)), arg(rnd({3, 3}, -1, 1, 112))}, es("ij,jj->i"));
  }
  SUBCASE("the same value twice: ij,ij-> (adjoints accumulate)") {
    checkGrad({arg(rnd({2, 3}, -1, 1, 113))}, [](Builder& b, const std::vector<Value*>& v) {
      return b.op(OpKind::Einsum, {v[0], v[0]}, attrs({{"spec", ir::einsumSpec("ij,ij->", 2)}}));
    });
  }
}

// ================================================================ reductions

TEST_CASE("gradients of sum and mean") {
  const Shape s{2, 3, 4};
  for (OpKind k : {OpKind::Sum, OpKind::Mean}) {
    CAPTURE(ir::opName(k));
    checkGrad({arg(rnd(s, -1, 1, 120))}, unary(k));                                    // all axes
    checkGrad({arg(rnd(s, -1, 1, 121))}, unary(k, attrs({{"axis", Ints{1}}})));
    checkGrad({arg(rnd(s, -1, 1, 122))}, unary(k, attrs({{"axis", Ints{0, 2}}, {"keepdims", true}})));
    checkGrad({arg(rnd(s, -1, 1, 123))}, unary(k, attrs({{"axis", Ints{-1}}, {"keepdims", true}})));
  }
}

TEST_CASE("gradients of max and min reductions") {
  const Shape s{2, 3, 4};
  for (OpKind k : {OpKind::Max, OpKind::Min}) {
    CAPTURE(ir::opName(k));
    checkGrad({arg(distinct(s, 130))}, unary(k));
    checkGrad({arg(distinct(s, 131))}, unary(k, attrs({{"axis", Ints{1}}})));
    checkGrad({arg(distinct(s, 132))}, unary(k, attrs({{"axis", Ints{0, 2}}, {"keepdims", true}})));
  }
  SUBCASE("ties share the gradient evenly") {
    Builder b;
    Value* x = b.f.addArg({DType::F32, {2, 4}});
    Value* mx = b.op(OpKind::Max, {x}, attrs({{"axis", Ints{1}}}));
    Value* loss = b.op(OpKind::Sum, {b.op(OpKind::Mul, {mx, b.constant(6.0)})});
    auto g = passes::appendGradient(b.m, b.f, loss, {}, true);
    b.f.results = {g.args[0]};
    REQUIRE(ir::verifyFunction(b.m, b.f).empty());
    auto r = interpret(b.f, {Tensor::fromF32({2, 4}, {1, 3, 3, 2, 5, 5, 5, 0})}, {});
    std::vector<double> expect = {0, 3, 3, 0, 2, 2, 2, 0};
    for (int i = 0; i < 8; ++i) CHECK(r[0].at(i) == doctest::Approx(expect[i]));
  }
}

// ================================================================ normalisations

TEST_CASE("gradients of softmax, log_softmax and layer_norm") {
  const Shape s{2, 3, 4};
  for (int64_t axis : {0, 1, -1}) {
    CAPTURE(axis);
    checkGrad({arg(rnd(s, -2, 2, 140))}, unary(OpKind::Softmax, attrs({{"axis", axis}})));
    checkGrad({arg(rnd(s, -2, 2, 141))}, unary(OpKind::LogSoftmax, attrs({{"axis", axis}})));
  }
  checkGrad({arg(rnd(s, -2, 2, 142))}, unary(OpKind::LayerNorm, attrs({{"axis", Ints{-1}}})));
  checkGrad({arg(rnd(s, -2, 2, 143))}, unary(OpKind::LayerNorm, attrs({{"axis", Ints{1, 2}}})));
  checkGrad({arg(rnd(s, -2, 2, 144))}, unary(OpKind::LayerNorm, attrs({{"axis", Ints{0}}, {"eps", 0.1}})));
}

TEST_CASE("gradient of cumsum, inclusive and exclusive") {
  for (bool excl : {false, true})
    for (int64_t axis : {0, 1}) {
      CAPTURE(excl);
      CAPTURE(axis);
      checkGrad({arg(rnd({3, 4}, -1, 1, 150))},
                unary(OpKind::CumSum, attrs({{"axis", axis}, {"exclusive", excl}})));
    }
}

// ================================================================ data movement

TEST_CASE("gradients of data movement ops") {
  SUBCASE("reshape") {
    checkGrad({arg(rnd({2, 3, 2}, -1, 1, 160))}, unary(OpKind::Reshape, attrs({{"shape", Ints{3, -1}}})));
  }
  SUBCASE("transpose") {
    checkGrad({arg(rnd({2, 3, 4}, -1, 1, 161))}, unary(OpKind::Transpose, attrs({{"perm", Ints{2, 0, 1}}})));
    checkGrad({arg(rnd({2, 3}, -1, 1, 162))}, unary(OpKind::Transpose));
  }
  SUBCASE("concat") {
    checkGrad({arg(rnd({2, 1}, -1, 1, 163)), arg(rnd({2, 3}, -1, 1, 164)), arg(rnd({2, 2}, -1, 1, 165))},
              nary(OpKind::Concat, attrs({{"axis", int64_t(1)}})));
    checkGrad({arg(rnd({2, 3}, -1, 1, 166)), arg(rnd({1, 3}, -1, 1, 167))},
              nary(OpKind::Concat, attrs({{"axis", int64_t(0)}})));
  }
  SUBCASE("slice") {
    for (auto [st, en] : std::vector<std::pair<int64_t, int64_t>>{{1, 3}, {0, 2}, {2, 4}, {0, 4}}) {
      CAPTURE(st);
      checkGrad({arg(rnd({3, 4}, -1, 1, 168))},
                unary(OpKind::Slice, attrs({{"axis", int64_t(1)}, {"start", st}, {"end", en}})));
    }
    checkGrad({arg(rnd({3, 4}, -1, 1, 169))},
              unary(OpKind::Slice, attrs({{"axis", int64_t(0)}, {"start", int64_t(-2)}, {"end", int64_t(3)}})));
  }
  SUBCASE("broadcast") {
    checkGrad({arg(rnd({3}, -1, 1, 170))}, unary(OpKind::Broadcast, attrs({{"shape", Ints{2, 3}}})));
    checkGrad({arg(rnd({2, 1}, -1, 1, 171))}, unary(OpKind::Broadcast, attrs({{"shape", Ints{3, 2, 4}}})));
    checkGrad({arg(rnd({}, -1, 1, 172))}, unary(OpKind::Broadcast, attrs({{"shape", Ints{2, 2}}})));
  }
  SUBCASE("take (embedding lookup, repeated rows), no gradient to the indices") {
    auto r = checkGrad({arg(rnd({5, 3}, -1, 1, 173)), arg(i32({2, 3}, {4, 0, 4, 1, 1, 4}))}, nary(OpKind::Take));
    CHECK(r.grads.args[1] == nullptr);
    checkGrad({arg(rnd({5}, -1, 1, 174)), arg(i32({4}, {2, 2, 0, 3}))}, nary(OpKind::Take));
    checkGrad({arg(rnd({4, 2, 2}, -1, 1, 175)), arg(i32({}, {3}))}, nary(OpKind::Take));
  }
}

// ================================================================ the pass

TEST_CASE("adjoints accumulate over several uses of a value") {
  // y = x * x + exp(x) * x; z = tanh(y) + y
  checkGrad({arg(rnd({2, 3}, -1, 1, 180))}, [](Builder& b, const std::vector<Value*>& v) {
    Value* x = v[0];
    Value* y = b.op(OpKind::Add, {b.op(OpKind::Mul, {x, x}), b.op(OpKind::Mul, {b.op(OpKind::Exp, {x}), x})});
    return b.op(OpKind::Add, {b.op(OpKind::Tanh, {y}), y});
  });
}

TEST_CASE("a param read by two param ops gets the sum; unused params get zeros") {
  Tensor wv = rnd({3, 3}, -1, 1, 190);
  auto r = checkGrad({arg(rnd({2, 3}, -1, 1, 191)), param("w", wv), param("unused", rnd({4}, -1, 1, 192))},
                     [](Builder& b, const std::vector<Value*>& v) {
                       Value* h = b.op(OpKind::Tanh, {b.op(OpKind::MatMul, {v[0], v[1]})});
                       Value* w2 = b.param("w");  // a second read of @w
                       return b.op(OpKind::MatMul, {h, w2});
                     });
  // The zeros of @unused are a broadcast constant.
  REQUIRE(r.grads.params[1]->def);
  CHECK(r.grads.params[1]->type.str() == "f32[4]");
}

TEST_CASE("wrtArgs = false: gradients of params only") {
  auto r = checkGrad({arg(rnd({2, 3}, -1, 1, 200)), param("b", rnd({3}, -1, 1, 201))}, nary(OpKind::Add),
                     /*wrtArgs=*/false);
  CHECK(r.grads.args.empty());
}

TEST_CASE("only ops on a path from a differentiated input to the loss are visited") {
  // loss = sum(exp(x)), and the same loss plus branches that depend on no
  // differentiated input (a param not asked for, an i32 computation): the
  // extra branches add no gradient op.
  auto sweepSize = [](bool extra) {
    Builder b;
    b.m.params.push_back(ir::Param{"x", {DType::F32, {3}}, {}, {}, {}});
    b.m.params.push_back(ir::Param{"other", {DType::F32, {3}}, {}, {}, {}});
    Value* iv = b.f.addArg({DType::I32, {3}});
    Value* out = b.op(OpKind::Exp, {b.param("x")});
    if (extra) {
      Value* other = b.op(OpKind::Tanh, {b.op(OpKind::Sigmoid, {b.param("other")})});
      Value* ints = b.op(OpKind::Cast, {b.op(OpKind::Mul, {iv, iv})}, attrs({{"dtype", DType::F32}}));
      out = b.op(OpKind::Add, {b.op(OpKind::Add, {out, other}), ints});
    }
    Value* loss = b.op(OpKind::Sum, {out});
    size_t n = b.f.ops.size();
    auto g = passes::appendGradient(b.m, b.f, loss, {"x"}, true);
    CHECK(g.args[0] == nullptr);  // i32 argument
    b.f.results = {g.params[0]};
    REQUIRE(ir::verifyFunction(b.m, b.f).empty());
    // d/dx = exp(x)
    std::map<std::string, Tensor> ps = {{"x", rnd({3}, -1, 1, 210)}, {"other", rnd({3}, -1, 1, 211)}};
    KernelContext ctx;
    ctx.param = [&](const std::string& name) -> const Tensor& { return ps.at(name); };
    auto r = interpret(b.f, {i32({3}, {1, 2, 3})}, ctx);
    for (int i = 0; i < 3; ++i) CHECK(r[0].at(i) == doctest::Approx(std::exp(ps["x"].at(i))).epsilon(1e-6));
    return b.f.ops.size() - n;
  };
  CHECK(sweepSize(true) == sweepSize(false));
}

TEST_CASE("the loss not depending on any input gives zeros") {
  Builder b;
  b.m.params.push_back(ir::Param{"p", {DType::F32, {2, 2}}, {}, {}, {}});
  Value* x = b.f.addArg({DType::F32, {3}});
  Value* loss = b.op(OpKind::Sum, {b.op(OpKind::Exp, {b.constant(1.0, {DType::F32, {3}})})});
  auto g = passes::appendGradient(b.m, b.f, loss, {"p"}, true);
  b.f.results = {g.params[0], g.args[0]};
  REQUIRE(ir::verifyFunction(b.m, b.f).empty());
  KernelContext ctx;
  auto r = interpret(b.f, {rnd({3}, -1, 1, 220)}, ctx);
  CHECK(r[0].type() == (TensorType{DType::F32, {2, 2}}));
  CHECK(r[1].type() == x->type);
  for (auto& t : r)
    for (int64_t i = 0; i < t.size(); ++i) CHECK(t.at(i) == 0.0);
}

TEST_CASE("a 2-layer MLP with cross-entropy") {
  // logits = tanh(x @ W1 + b1) @ W2 + b2
  // loss = -mean(sum(log_softmax(logits) * one_hot(labels, 3), axis=-1))
  Tensor labels = i32({4}, {2, 0, 1, 2});
  auto r = checkGrad(
      {arg(rnd({4, 3}, -1, 1, 230)), param("W1", rnd({3, 5}, -1, 1, 231)), param("b1", rnd({5}, -0.5, 0.5, 232)),
       param("W2", rnd({5, 3}, -1, 1, 233)), param("b2", rnd({3}, -0.5, 0.5, 234)), arg(labels)},
      [](Builder& b, const std::vector<Value*>& v) {
        Value* h = b.op(OpKind::Tanh, {b.op(OpKind::Add, {b.op(OpKind::MatMul, {v[0], v[1]}), v[2]})});
        Value* logits = b.op(OpKind::Add, {b.op(OpKind::MatMul, {h, v[3]}), v[4]});
        Value* lsm = b.op(OpKind::LogSoftmax, {logits}, attrs({{"axis", int64_t(-1)}}));
        Value* oh = b.op(OpKind::OneHot, {v[5]}, attrs({{"n", int64_t(3)}}));
        Value* nll = b.op(OpKind::Sum, {b.op(OpKind::Mul, {lsm, oh})}, attrs({{"axis", Ints{-1}}}));
        return b.op(OpKind::Neg, {b.op(OpKind::Mean, {nll})});
      });
  CHECK(r.grads.args[1] == nullptr);  // labels: i32
}

TEST_CASE("a small attention block with layer_norm, softmax and gelu") {
  // q = layer_norm(x) @ Wq, k = x @ Wk; a = softmax(q k^T / 2); y = gelu(a @ x) + x
  checkGrad({arg(rnd({2, 4, 3}, -1, 1, 240)), param("Wq", rnd({3, 3}, -1, 1, 241)),
             param("Wk", rnd({3, 3}, -1, 1, 242))},
            [](Builder& b, const std::vector<Value*>& v) {
              Value* x = v[0];
              Value* q = b.op(OpKind::MatMul, {b.op(OpKind::LayerNorm, {x}, attrs({{"axis", Ints{-1}}})), v[1]});
              Value* k = b.op(OpKind::MatMul, {x, v[2]});
              Value* s = b.op(OpKind::Einsum, {q, k}, attrs({{"spec", ir::einsumSpec("bqd,bkd->bqk", 2)}}));
              Value* a = b.op(OpKind::Softmax, {b.op(OpKind::Div, {s, b.constant(2.0)})}, attrs({{"axis", int64_t(-1)}}));
              return b.op(OpKind::Add, {b.op(OpKind::Gelu, {b.op(OpKind::MatMul, {a, x})}), x});
            });
}

TEST_CASE("gradient IR prints, parses back and is partitioned like any IR") {
  // A data-parallel MLP step: x split over `data`, params replicated. The
  // sweep's values have no sharding; propagation gives them one and the
  // partitioner resolves the params' gradients (partial sums over `data`).
  auto m = std::make_unique<ir::Module>();
  m->np = 2;
  m->meshes.push_back(ir::Mesh{"m", {{"data", 2}}});
  m->params.push_back(ir::Param{"W1", {DType::F32, {3, 8}}, {}, {}, {}});
  m->params.push_back(ir::Param{"W2", {DType::F32, {8, 3}}, {}, {}, {}});
  m->functions.push_back(std::make_unique<ir::Function>());
  ir::Function& f = *m->functions.back();
  f.name = "step";
  auto op = [&](OpKind k, std::vector<Value*> operands, AttrMap at = {}) {
    std::vector<TensorType> in;
    for (Value* v : operands) in.push_back(v->type);
    TensorType out;
    REQUIRE(ir::inferType(k, in, at, out).empty());
    return f.append(k, std::move(operands), std::move(at), out)->result;
  };
  Value* x = f.addArg({DType::F32, {4, 3}});
  x->sharding = ir::Sharding::fromNames("m", {{"data"}, {}});
  Value* labels = f.addArg({DType::I32, {4}});
  Value* w1 = f.append(OpKind::Param, {}, attrs({{"name", std::string("W1")}}), m->params[0].type)->result;
  Value* w2 = f.append(OpKind::Param, {}, attrs({{"name", std::string("W2")}}), m->params[1].type)->result;
  Value* h = op(OpKind::Gelu, {op(OpKind::MatMul, {x, w1})});
  Value* lsm = op(OpKind::LogSoftmax, {op(OpKind::MatMul, {h, w2})}, attrs({{"axis", int64_t(-1)}}));
  Value* oh = op(OpKind::OneHot, {labels}, attrs({{"n", int64_t(3)}}));
  Value* loss = op(OpKind::Neg, {op(OpKind::Mean, {op(OpKind::Sum, {op(OpKind::Mul, {lsm, oh})}, attrs({{"axis", Ints{1}}}))})});
  auto g = passes::appendGradient(*m, f, loss, {"W1", "W2"}, false);
  f.results = {loss, g.params[0], g.params[1]};
  REQUIRE(ir::verify(*m).empty());

  std::string text = ir::printModule(*m);
  ir::IRParseResult parsed = ir::parseModule(text);
  REQUIRE_MESSAGE(parsed.module, parsed.error);
  CHECK(ir::printModule(*parsed.module) == text);

  auto local = passes::buildPerRankProgram(*m, f, /*gather=*/true);
  bool allReduce = false;
  for (auto& o : local->ops) allReduce |= o->kind == OpKind::AllReduce;
  CHECK(allReduce);  // the params' gradients are summed over `data`
}
