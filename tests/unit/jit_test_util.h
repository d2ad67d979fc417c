// Shared helpers of the JIT tests: build small functions with the op
// table's type rules, run them on the reference interpreter and on the JIT,
// and compare (f32: |jit - interp| <= 1e-6 + 1e-5 |interp|, NaN and
// infinities must agree; i32 and bool: exact).
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backend/Interpreter.h"
#include "backend/Random.h"
#include "backend/jit/JitEngine.h"
#include "backend/jit/JitOptions.h"
#include "ir/Function.h"
#include "ir/OpTable.h"
#include "support/BF16.h"

namespace jittest {

using namespace gsl;
using namespace gsl::backend;
using ir::AttrMap;
using ir::DType;
using ir::OpKind;
using ir::Shape;
using ir::TensorType;
using ir::Value;
using Ints = std::vector<int64_t>;

// The options every test compiles with: the defaults, or what the GSL_JIT_*
// variables ask for (ctest runs this binary again with some of them set:
// unit_jit_fallback, unit_jit_gemm_width* in tests/CMakeLists.txt). Read
// once, here at the edge, as the gsl tool does.
inline const JitOptions& testOptions() {
  static const JitOptions opts = jitOptionsFromEnvironment();
  return opts;
}

inline AttrMap attrs(std::initializer_list<std::pair<const char*, ir::Attr>> kv) {
  AttrMap m;
  for (auto& [k, v] : kv) m.set(k, v);
  return m;
}

// Deterministic random tensors.
inline Tensor randF32(const Shape& s, float lo = -2.0f, float hi = 2.0f, uint32_t seed = 1) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  Tensor t(TensorType{DType::F32, s});
  for (int64_t i = 0; i < t.size(); ++i) t.f32()[i] = d(g);
  return t;
}
// Small integers as f32: products and sums of them are exact in f32, so a
// contraction gives the same bits in any summation order.
inline Tensor randIntF32(const Shape& s, int lo = -4, int hi = 4, uint32_t seed = 4) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  Tensor t(TensorType{DType::F32, s});
  for (int64_t i = 0; i < t.size(); ++i) t.f32()[i] = (float)d(g);
  return t;
}
inline Tensor randI32(const Shape& s, int lo = -9, int hi = 9, uint32_t seed = 2) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  Tensor t(TensorType{DType::I32, s});
  for (int64_t i = 0; i < t.size(); ++i) t.i32()[i] = d(g);
  return t;
}
inline Tensor randBool(const Shape& s, uint32_t seed = 3) {
  std::mt19937 g(seed);
  Tensor t(TensorType{DType::Bool, s});
  for (int64_t i = 0; i < t.size(); ++i) t.i32()[i] = (int32_t)(g() & 1);
  return t;
}
inline Tensor f32(const Shape& s, std::vector<float> v) { return Tensor::fromF32(s, std::move(v)); }
// f32 values rounded to bf16 (nearest even), and bf16 widened (exactly).
inline Tensor toBF16(const Tensor& f) {
  Tensor t(TensorType{DType::BF16, f.shape()});
  narrowBF16(f.f32(), t.bf16(), f.size());
  return t;
}
inline Tensor widenToF32(const Tensor& h) {
  Tensor t(TensorType{DType::F32, h.shape()});
  widenBF16(h.bf16(), t.f32(), h.size());
  return t;
}
inline Tensor i32(const Shape& s, std::vector<int32_t> v) { return Tensor::fromI32(s, std::move(v)); }

inline bool close(float a, float b) {
  if (std::isnan(b)) return std::isnan(a);
  if (std::isinf(b)) return a == b;
  return std::fabs((double)a - (double)b) <= 1e-6 + 1e-5 * std::fabs((double)b);
}

// Checks that `jit` equals `ref` (type and every element); returns the
// number of mismatching elements. `normwise`: f32 elements may differ by
// 1e-5 of the largest |ref| (sums in another order: GEMMs with cancellation).
inline int64_t compareTensors(const Tensor& jit, const Tensor& ref, const std::string& what, bool normwise = false) {
  INFO(what);
  REQUIRE(jit.type() == ref.type());
  double scale = 0;
  if (normwise)
    for (int64_t i = 0; i < ref.size(); ++i) scale = std::max(scale, (double)std::fabs(ref.f32()[i]));
  int64_t bad = 0;
  for (int64_t i = 0; i < ref.size(); ++i) {
    bool ok = ref.dtype() != DType::F32 ? jit.i32()[i] == ref.i32()[i]
              : normwise ? std::fabs((double)jit.f32()[i] - ref.f32()[i]) <= 1e-6 + 1e-5 * scale
                         : close(jit.f32()[i], ref.f32()[i]);
    if (!ok && bad++ < 5) {
      INFO("element " << i << ": jit " << jit.at(i) << " vs interp " << ref.at(i));
      CHECK(ok);
    }
  }
  CHECK_MESSAGE(bad == 0, what << ": " << bad << " of " << ref.size() << " elements differ");
  return bad;
}

// Builds one ir::Function, typing every op with the op table's rule.
struct Builder {
  ir::Function f;
  std::vector<Tensor> args;
  // The mesh of the collectives built by op(): their groups resolved over
  // it, as passes/ResolveGroups does for a compiled program.
  const ir::Mesh* mesh = nullptr;

  Builder() { f.name = "t"; }

  Value* arg(const Tensor& t) {
    args.push_back(t);
    return f.addArg(t.type());
  }
  Value* op(OpKind k, std::vector<Value*> operands, AttrMap at = {}) {
    std::vector<TensorType> in;
    for (Value* v : operands) in.push_back(v->type);
    TensorType out;
    std::string err = ir::inferType(k, in, at, out);
    REQUIRE_MESSAGE(err.empty(), err);
    ir::Op* o = f.append(k, std::move(operands), std::move(at), out);
    if (o->info().cls == ir::OpClass::Collective) {
      REQUIRE_MESSAGE(mesh, "Builder: a collective needs Builder::mesh");
      o->groups = std::make_shared<const ir::CollectiveGroups>(*mesh, o->attrs.getInts("axes"));
    }
    return o->result;
  }
  Value* typed(OpKind k, AttrMap at, const TensorType& t, std::vector<Value*> operands = {}) {
    return f.append(k, std::move(operands), std::move(at), t)->result;
  }
  Value* constant(double v, const TensorType& t) { return typed(OpKind::Constant, attrs({{"value", v}}), t); }

  // Runs the function on both engines and compares every result.
  std::vector<Tensor> check(std::vector<Value*> results, const KernelContext& ctx = {}, bool normwise = false) {
    f.results = std::move(results);
    std::vector<Tensor> ref = interpret(f, args, ctx);
    std::vector<Tensor> got = makeJitEngine(ctx, testOptions())->call(f, args);
    REQUIRE(got.size() == ref.size());
    for (size_t i = 0; i < ref.size(); ++i) compareTensors(got[i], ref[i], "result " + std::to_string(i), normwise);
    return got;
  }
  Tensor check1(Value* r, const KernelContext& ctx = {}, bool normwise = false) {
    return check({r}, ctx, normwise).at(0);
  }
};

// One op on the given operands, compared.
inline Tensor checkOp(OpKind k, const std::vector<Tensor>& ins, AttrMap at = {}, bool normwise = false) {
  Builder b;
  std::vector<Value*> vs;
  for (auto& t : ins) vs.push_back(b.arg(t));
  INFO("op " << ir::opName(k));
  return b.check1(b.op(k, vs, std::move(at)), {}, normwise);
}

// A contraction twice: on integer-valued f32 operands (exact in any
// summation order, so compared element by element) and on real-valued
// ones (compared norm-wise).
inline void checkContraction(OpKind k, const std::vector<Shape>& shapes, AttrMap at = {}) {
  std::vector<Tensor> ints, reals;
  for (size_t i = 0; i < shapes.size(); ++i) {
    ints.push_back(randIntF32(shapes[i], -4, 4, 100 + (uint32_t)i));
    reals.push_back(randF32(shapes[i], -2, 2, 200 + (uint32_t)i));
  }
  checkOp(k, ints, at);
  checkOp(k, reals, at, /*normwise=*/true);
}

}  // namespace jittest
