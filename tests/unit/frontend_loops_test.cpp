// The loop surface (frontend/LowerLoops.cpp, docs/language.md "Loops and
// indexing"): a GSL program written with `for` over a param group equals
// its hand-unrolled twin (the same layers called one after another with
// constant indices) in forward value, in every gradient and along a
// 20-step SGD loss curve. Both variants are compiled from source, run by
// the reference interpreter and differentiated by the autodiff pass; the
// twin reads each layer with slice + reshape, the loop with dynamic_index
// inside a loop op, so the comparison checks the lowering end to end.
//
// Tolerances: the forward ops are the same f32 ops in the same order
// (1e-6 relative); gradients sum the same terms in another order (1e-5);
// the loss curve compounds that over 20 steps (1e-4).
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/Interpreter.h"
#include "backend/Random.h"
#include "frontend/Frontend.h"
#include "ir/Loop.h"
#include "ir/Verifier.h"
#include "passes/Autodiff.h"

using namespace gsl;
using backend::Tensor;

namespace {

// A residual MLP stack of L layers, each with its own weights, a carried
// hidden state and a carried sum of per-layer aux terms (as MoE layer pairs
// carry their aux losses), called both ways.
const char* kDeep = R"(
const L = 3
const B = 4
const D = 6
const F = 10
param blocks[L] {
  w1: f32[D, F] = glorot
  b1: f32[F] = normal(0.1)
  w2: f32[F, D] = glorot
  g: f32[D] = uniform(0.5, 1.5)
}
param head: f32[D, 1] = glorot

fn block(h: f32[B, D], l: i32) -> (f32[B, D], f32) {
  let u = tanh(h @ blocks.w1[l] + blocks.b1[l])
  return h + (u @ blocks.w2[l]) * blocks.g[l], mean(u * u)
}

fn loss_loop(x: f32[B, D], y: f32[B, 1]) -> f32 {
  let h = x
  let aux = 0.0
  for l in 0..L {
    let (h2, a) = block(h, l)
    h = h2
    aux = aux + a
  }
  let e = h @ head - y
  return mean(e * e) + 0.1 * aux
}

fn loss_unrolled(x: f32[B, D], y: f32[B, 1]) -> f32 {
  let (h1, a1) = block(x, 0)
  let (h2, a2) = block(h1, 1)
  let (h3, a3) = block(h2, 2)
  let e = h3 @ head - y
  return mean(e * e) + 0.1 * (0.0 + a1 + a2 + a3)
}

# Nested loops over a slice of the stack and an offset range, and indexing
# with constants and slices, against the same written out.
fn nested_loop(x: f32[B, D]) -> f32 {
  let s = 0.0
  for i in 1..3 {
    for j in 0..2 {
      s = s + sum((x[:, 0:4] @ blocks.w1[i][0:4, 2:5]) * x[j + 1][2:5])
    }
  }
  return s + sum(x[-1])
}

fn nested_unrolled(x: f32[B, D]) -> f32 {
  let p1 = x[:, 0:4] @ blocks.w1[1][0:4, 2:5]
  let p2 = x[:, 0:4] @ blocks.w1[2][0:4, 2:5]
  let s = 0.0 + sum(p1 * x[1][2:5]) + sum(p1 * x[2][2:5]) + sum(p2 * x[1][2:5]) + sum(p2 * x[2][2:5])
  return s + sum(x[3])
}
)";

struct Compiled {
  SourceManager sm;
  Diagnostics diags{sm};
  std::unique_ptr<frontend::CheckedProgram> prog;
};

std::unique_ptr<Compiled> compile(const std::string& src) {
  auto c = std::make_unique<Compiled>();
  c->prog = frontend::compileSource("deep.gsl", src, {}, c->sm, c->diags);
  return c;
}

const ir::Function& fn(const ir::Module& m, const std::string& name) {
  const ir::Function* f = m.findFunction(name);
  REQUIRE_MESSAGE(f, name);
  return *f;
}

bool hasLoop(const ir::Function& f) {
  for (const auto& op : f.ops)
    if (op->kind == ir::OpKind::Loop) return true;
  return false;
}

Tensor data(const ir::Shape& s, uint64_t salt) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = (float)std::sin(0.7 * (double)(i + 1) + (double)salt);
  return Tensor::fromF32(s, v);
}

void checkClose(const Tensor& a, const Tensor& b, double rel, const std::string& what) {
  REQUIRE(a.type() == b.type());
  const float* x = a.f32();
  const float* y = b.f32();
  for (int64_t i = 0; i < a.size(); ++i) {
    double tol = rel * std::max(1.0, std::max(std::fabs((double)x[i]), std::fabs((double)y[i])));
    INFO(what << " element " << i << ": " << x[i] << " vs " << y[i]);
    CHECK(std::fabs((double)x[i] - (double)y[i]) <= tol);
  }
}

// Runs `f` with gradients of every param appended: results are the loss,
// then one gradient per param of the module (in module order).
std::vector<Tensor> lossAndGrads(const ir::Module& m, const ir::Function& f, const std::vector<Tensor>& args,
                                 const std::map<std::string, Tensor>& params) {
  auto g = f.clone();
  std::vector<std::string> names;
  for (const auto& p : m.params) names.push_back(p.name);
  passes::Gradients gr = passes::appendGradient(m, *g, g->results[0], names, false);
  g->results.resize(1);
  for (ir::Value* v : gr.params) g->results.push_back(v);
  g->resultShardings.assign(g->results.size(), std::nullopt);
  g->renumber();
  std::string err = ir::verifyFunction(m, *g);
  REQUIRE_MESSAGE(err.empty(), err);
  backend::KernelContext ctx;
  ctx.param = [&](const std::string& n) -> const Tensor& { return params.at(n); };
  return backend::interpret(*g, args, ctx);
}

}  // namespace

TEST_CASE("loops: a param group is one stacked param per member, per-layer glorot fans, distinct layers") {
  auto c = compile(kDeep);
  REQUIRE_MESSAGE(c->prog, "compile failed");
  const ir::Module& m = *c->prog->module;
  const ir::Param* w1 = m.findParam("blocks.w1");
  REQUIRE(w1);
  CHECK(w1->type.str() == "f32[3, 6, 10]");
  CHECK(w1->init.stacked == 1);
  CHECK(w1->init.str() == "glorot(stacked = 1)");
  REQUIRE(m.findParam("blocks.g"));
  CHECK(m.findParam("blocks.g")->type.str() == "f32[3, 6]");
  Tensor t = backend::initParam(*w1, 7);
  const double limit = std::sqrt(6.0 / (6 + 10));  // one layer's fans: 6 in, 10 out
  double maxAbs = 0;
  for (int64_t i = 0; i < t.size(); ++i) maxAbs = std::max(maxAbs, std::fabs((double)t.f32()[i]));
  CHECK(maxAbs <= limit);
  CHECK(maxAbs > 0.8 * limit);  // not the smaller limit of fans (18, 10)
  // Each layer gets its own values.
  const int64_t per = 6 * 10;
  int same = 0;
  for (int64_t i = 0; i < per; ++i) same += t.f32()[i] == t.f32()[per + i];
  CHECK(same < per / 10);
}

TEST_CASE("loops: the loop version lowers to one loop op; the twin has none") {
  auto c = compile(kDeep);
  REQUIRE(c->prog);
  const ir::Module& m = *c->prog->module;
  CHECK(hasLoop(fn(m, "loss_loop")));
  CHECK_FALSE(hasLoop(fn(m, "loss_unrolled")));
  CHECK(hasLoop(fn(m, "nested_loop")));
  for (const auto& op : fn(m, "loss_loop").ops)
    if (op->kind == ir::OpKind::Loop) {
      ir::LoopInfo li(*op);
      CHECK(li.trip == 3);
      CHECK(li.carried == 2);     // h and aux
      CHECK(li.invariants == 4);  // the four stacked members (head is read after the loop)
    }
}

TEST_CASE("loops: forward values and every gradient equal the unrolled twin") {
  auto c = compile(kDeep);
  REQUIRE(c->prog);
  const ir::Module& m = *c->prog->module;
  std::map<std::string, Tensor> params;
  for (const auto& p : m.params) params[p.name] = backend::initParam(p, 11);
  std::vector<Tensor> args = {data({4, 6}, 1), data({4, 1}, 2)};
  auto a = lossAndGrads(m, fn(m, "loss_loop"), args, params);
  auto b = lossAndGrads(m, fn(m, "loss_unrolled"), args, params);
  REQUIRE(a.size() == m.params.size() + 1);
  REQUIRE(b.size() == a.size());
  checkClose(a[0], b[0], 1e-6, "loss");
  for (size_t i = 1; i < a.size(); ++i) checkClose(a[i], b[i], 1e-5, "gradient of " + m.params[i - 1].name);
  // The loss depends on every layer: no gradient is all zeros.
  for (size_t i = 1; i < a.size(); ++i) {
    double s = 0;
    for (int64_t k = 0; k < a[i].size(); ++k) s += std::fabs((double)a[i].f32()[k]);
    CHECK_MESSAGE(s > 0, m.params[i - 1].name);
  }

  auto n1 = lossAndGrads(m, fn(m, "nested_loop"), {args[0]}, params);
  auto n2 = lossAndGrads(m, fn(m, "nested_unrolled"), {args[0]}, params);
  checkClose(n1[0], n2[0], 1e-6, "nested loss");
  for (size_t i = 1; i < n1.size(); ++i) checkClose(n1[i], n2[i], 1e-5, "nested gradient of " + m.params[i - 1].name);
}

TEST_CASE("loops: a 20-step SGD loss curve equals the unrolled twin's") {
  auto c = compile(kDeep);
  REQUIRE(c->prog);
  const ir::Module& m = *c->prog->module;
  std::vector<Tensor> args = {data({4, 6}, 3), data({4, 1}, 4)};
  std::vector<double> curve[2];
  const char* fns[2] = {"loss_loop", "loss_unrolled"};
  for (int v = 0; v < 2; ++v) {
    std::map<std::string, Tensor> params;
    for (const auto& p : m.params) params[p.name] = backend::initParam(p, 5);
    for (int step = 0; step < 20; ++step) {
      auto r = lossAndGrads(m, fn(m, fns[v]), args, params);
      curve[v].push_back(r[0].f32()[0]);
      for (size_t i = 0; i < m.params.size(); ++i) {
        Tensor& p = params[m.params[i].name];
        for (int64_t k = 0; k < p.size(); ++k) p.f32()[k] -= 0.05f * r[i + 1].f32()[k];
      }
    }
  }
  for (int step = 0; step < 20; ++step) {
    INFO("step " << step << ": " << curve[0][step] << " vs " << curve[1][step]);
    CHECK(std::fabs(curve[0][step] - curve[1][step]) <= 1e-4 * std::max(1.0, std::fabs(curve[1][step])));
  }
  CHECK(curve[0].back() < curve[0].front());  // it trains
}
