// A loop program equals its unrolled twin after sharding propagation and
// SPMD partitioning, on threads at -np 1, 2 and 4 (docs/loops.md): forward
// values and every gradient (params and the input), per rank, on each
// engine that runs loops.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "backend/Engine.h"
#include "backend/Interpreter.h"
#include "backend/jit/JitEngine.h"
#include "ir/IRParser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/Autodiff.h"
#include "passes/Pipeline.h"
#include "runtime/Distribute.h"
#include "runtime/ThreadComm.h"
#include "ir_texts.h"

using namespace gsl;
using backend::Tensor;

namespace {

constexpr int L = 4, B = 4, D = 8, F = 16;

// Module header: a (data x model) mesh over np ranks, stacked layer
// weights split over `model` (Megatron: w1 by columns, w2 by rows), a
// shared bias.
std::string header(int data, int model) {
  std::ostringstream s;
  s << "np = " << data * model << "\n"
    << "mesh @m = [data: " << data << ", model: " << model << "]\n"
    << "param @w1 : f32[" << L << ", " << D << ", " << F << "] @shard(m, [_, _, model]) = normal(0.5)\n"
    << "param @w2 : f32[" << L << ", " << F << ", " << D << "] @shard(m, [_, model, _]) = normal(0.5)\n"
    << "param @b : f32[" << D << "] = normal(0.1)\n\n";
  return s.str();
}

// One layer: h' = h + tanh(h @ w1[i]) @ w2[i] + b, aux' = aux + sum(h' * h').
// `i`, `h`, `aux`, `w1`, `w2`, `b` name values; `n` numbers the new ones
// from `next`. Returns the text; h' and aux' are %next+6 and %next+9.
std::string layer(const std::string& ind, const std::string& i, const std::string& h, const std::string& aux,
                  const std::string& w1, const std::string& w2, const std::string& b, int next) {
  auto v = [&](int k) { return "%" + std::to_string(next + k); };
  std::ostringstream s;
  s << irtext::mlpLayer(ind, i, h, w1, w2, next, B, D, F)
    << ind << v(6) << " = add " << v(5) << ", " << b << " : f32[" << B << ", " << D << "]\n"
    << ind << v(7) << " = mul " << v(6) << ", " << v(6) << " : f32[" << B << ", " << D << "]\n"
    << ind << v(8) << " = sum " << v(7) << " {axis = [0, 1], keepdims = false} : f32\n"
    << ind << v(9) << " = add " << aux << ", " << v(8) << " : f32\n";
  return s.str();
}

const std::string kSig = "func @f(%0: f32[4, 8] @shard(m, [data, _])) -> (f32[4, 8], f32, f32[4, 4, 8]) {\n"
                         "  %1 = param {name = \"w1\"} : f32[4, 8, 16] @shard(m, [_, _, model])\n"
                         "  %2 = param {name = \"w2\"} : f32[4, 16, 8] @shard(m, [_, model, _])\n"
                         "  %3 = param {name = \"b\"} : f32[8]\n"
                         "  %4 = constant {value = 0.0} : f32\n";

// The loop: carries (h, aux), stacks every layer's h.
std::string loopProgram(int data, int model) {
  std::ostringstream s;
  s << header(data, model) << kSig
    << "  %5, %6, %7 = loop %0, %4, %1, %2, %3 {carried = 2, trip = 4} : f32[4, 8], f32, f32[4, 4, 8] {\n"
    << "    body(%8: i32, %9: f32[4, 8], %10: f32, %11: f32[4, 8, 16], %12: f32[4, 16, 8], %13: f32[8]):\n"
    << layer("    ", "%8", "%9", "%10", "%11", "%12", "%13", 14) << "    yield %20, %23, %20\n"
    << "  }\n"
    << "  return %5, %6, %7\n}\n";
  return s.str();
}

// The same four layers written out, the index a constant per layer, the
// stacked output a concat of the layers' h reshaped to one row each.
std::string unrolledProgram(int data, int model) {
  std::ostringstream s;
  s << header(data, model) << kSig;
  std::string h = "%0", aux = "%4", rows;
  int next = 5;
  for (int l = 0; l < L; ++l) {
    std::string i = "%" + std::to_string(next);
    s << "  " << i << " = constant {value = " << l << ".0} : i32\n";
    s << layer("  ", i, h, aux, "%1", "%2", "%3", next + 1);
    h = "%" + std::to_string(next + 7);
    aux = "%" + std::to_string(next + 10);
    std::string row = "%" + std::to_string(next + 11);
    s << "  " << row << " = reshape " << h << " {shape = [1, 4, 8]} : f32[1, 4, 8]\n";
    rows += (rows.empty() ? "" : ", ") + row;
    next += 12;
  }
  s << "  %" << next << " = concat " << rows << " {axis = 0} : f32[4, 4, 8]\n";
  s << "  return " << h << ", " << aux << ", %" << next << "\n}\n";
  return s.str();
}

std::unique_ptr<ir::Module> parse(const std::string& text) {
  ir::IRParseResult r = ir::parseModule(text);
  REQUIRE_MESSAGE(r.module, r.error << "\n" << text);
  REQUIRE_MESSAGE(ir::verify(*r.module).empty(), ir::verify(*r.module));
  return std::move(r.module);
}

// Appends the gradient of loss = aux + sum(h * ys[last]) w.r.t. every
// param and the input; results: h, aux, ys, d/dw1, d/dw2, d/db, d/dx.
void withGradients(ir::Module& m) {
  ir::Function& f = *m.functions[0];
  auto op = [&](ir::OpKind k, std::vector<ir::Value*> xs, ir::AttrMap at = {}) {
    std::vector<ir::TensorType> in;
    for (ir::Value* v : xs) in.push_back(v->type);
    ir::TensorType t;
    REQUIRE(ir::inferType(k, in, at, t).empty());
    return f.append(k, std::move(xs), std::move(at), t)->result;
  };
  ir::AttrMap all;
  all.set("axis", std::vector<int64_t>{0, 1, 2});
  all.set("keepdims", false);
  ir::Value* s = op(ir::OpKind::Sum, {op(ir::OpKind::Mul, {f.results[2], f.results[2]})}, all);
  ir::Value* loss = op(ir::OpKind::Add, {f.results[1], s});
  auto g = passes::appendGradient(m, f, loss, {"w1", "w2", "b"}, /*wrtArgs=*/true);
  for (ir::Value* v : g.params) f.results.push_back(v);
  f.results.push_back(g.args[0]);
  f.resultShardings.resize(f.results.size());
  REQUIRE_MESSAGE(ir::verify(m).empty(), ir::verify(m));
}

Tensor input() {
  std::vector<float> v(B * D);
  for (size_t k = 0; k < v.size(); ++k) v[k] = std::sin(0.7f * (float)k) * 0.8f;
  return Tensor::fromF32({B, D}, v);
}

// The global function run on one device by the interpreter.
std::vector<Tensor> reference(const ir::Module& m, const backend::ParamStore& ps) {
  backend::KernelContext ctx;
  ctx.param = [&](const std::string& n) -> const Tensor& { return ps.get(n); };
  return backend::interpret(*m.functions[0], {input()}, ctx);
}

// The per-rank program (results gathered) run on np threads by `engine`;
// rank 0's results.
std::vector<Tensor> perRank(ir::Module& m, const backend::ParamStore& ps, bool jit, std::string* text) {
  ir::Function& f = *m.functions[0];
  const ir::Sharding inS = *f.args[0]->sharding;
  auto local = passes::buildPerRankProgram(m, f, /*gather=*/true);
  if (text) *text = ir::printFunction(*local);
  const int np = (int)m.np;
  std::vector<std::vector<Tensor>> out(np);
  runtime::runRanksOrThrow(np, [&](int rank, backend::Communicator& comm) {
    std::map<std::string, Tensor> params;
    for (const auto& p : m.params) params[p.name] = runtime::localBlock(m, ps.get(p.name), p.sharding, rank);
    backend::KernelContext ctx;
    ctx.rank = rank;
    ctx.comm = &comm;
    ctx.mesh = [&](const std::string& n) -> const ir::Mesh& { return *m.findMesh(n); };
    ctx.param = [&](const std::string& n) -> const Tensor& { return params.at(n); };
    auto engine = jit ? backend::makeJitEngine(ctx) : backend::makeInterpreterEngine(ctx);
    out[rank] = engine->call(*local, {runtime::localBlock(m, input(), inS, rank)});
  });
  for (int r = 1; r < np; ++r)
    for (size_t k = 0; k < out[0].size(); ++k) REQUIRE(out[r][k].type() == out[0][k].type());
  return out[0];
}

std::string compare(const std::vector<Tensor>& want, const std::vector<Tensor>& got) {
  if (want.size() != got.size()) return "result count";
  for (size_t k = 0; k < want.size(); ++k) {
    if (want[k].type() != got[k].type()) return "result " + std::to_string(k) + " type " + got[k].type().str();
    // f32 rounding scales with the tensor's largest elements (the weight
    // gradients reach ~300 while some of their elements nearly cancel to
    // ~0.01), so the bound has a term relative to the largest |want|.
    double scale = 0;
    for (int64_t e = 0; e < want[k].size(); ++e) scale = std::max(scale, std::fabs(want[k].at(e)));
    for (int64_t e = 0; e < want[k].size(); ++e) {
      double a = want[k].at(e), b = got[k].at(e);
      if (std::fabs(a - b) > 1e-4 * (1 + std::fabs(a)) + 1e-5 * scale)
        return "result " + std::to_string(k) + " element " + std::to_string(e) + ": " + std::to_string(a) +
               " vs " + std::to_string(b);
    }
  }
  return "";
}

void checkEquivalence(bool jit) {
  for (auto [data, model] : {std::pair{1, 1}, std::pair{1, 2}, std::pair{2, 2}}) {
    INFO("np = " << data * model << " (data " << data << ", model " << model << ")");
    auto loopM = parse(loopProgram(data, model));
    auto twinM = parse(unrolledProgram(data, model));
    withGradients(*loopM);
    withGradients(*twinM);
    backend::ParamStore ps;
    ps.initialize(*loopM, 11);
    std::vector<Tensor> want = reference(*twinM, ps);
    REQUIRE(want.size() == 7);
    CHECK(compare(want, reference(*loopM, ps)) == "");
    std::string text;
    CHECK(compare(want, perRank(*loopM, ps, jit, &text)) == "");
    // The per-rank program kept the forward and the backward loop.
    size_t loops = 0;
    for (size_t p = text.find("= loop "); p != std::string::npos; p = text.find("= loop ", p + 1)) ++loops;
    CHECK(loops == 2);
    if (model > 1) CHECK(text.find("all_reduce") != std::string::npos);
    CHECK(compare(want, perRank(*twinM, ps, jit, nullptr)) == "");
  }
}

}  // namespace

TEST_CASE("loop vs unrolled twin after partitioning, -np 1/2/4 on threads: interpreter") {
  checkEquivalence(false);
}

TEST_CASE("loop vs unrolled twin after partitioning, -np 1/2/4 on threads: JIT") {
  checkEquivalence(true);
}

TEST_CASE("JIT runs reverse and nested loops, i32 carried values and pass-through outputs as the interpreter") {
  // A reverse outer loop carrying (h, n: i32) with a nested forward loop;
  // its per-iteration output is the carried h entering the iteration (a
  // body argument yielded as is). Forward values and the gradients of
  // loss = sum(h) + sum(ys) w.r.t. both inputs (a reverse loop whose body
  // holds the nested loop's backward loop).
  const char* text =
      "np = 1\n"
      "\n"
      "func @g(%0: f32[2], %1: f32[3, 2, 2]) -> (f32[2], i32, f32[3, 2]) {\n"
      "  %2 = constant {value = 0} : i32\n"
      "  %3, %4, %5 = loop %0, %2, %1 {carried = 2, reverse = true, trip = 3} : f32[2], i32, f32[3, 2] {\n"
      "    body(%6: i32, %7: f32[2], %8: i32, %9: f32[3, 2, 2]):\n"
      "    %10 = add %8, %6 : i32\n"
      "    %11 = dynamic_index %9, %6 : f32[2, 2]\n"
      "    %12 = loop %7, %11 {carried = 1, trip = 2} : f32[2] {\n"
      "      body(%13: i32, %14: f32[2], %15: f32[2, 2]):\n"
      "      %16 = dynamic_index %15, %13 : f32[2]\n"
      "      %17 = mul %14, %16 : f32[2]\n"
      "      %18 = tanh %17 : f32[2]\n"
      "      yield %18\n"
      "    }\n"
      "    yield %12, %10, %7\n"
      "  }\n"
      "  return %3, %4, %5\n"
      "}\n";
  auto m = parse(text);
  ir::Function& f = *m->functions[0];
  auto op = [&](ir::OpKind k, std::vector<ir::Value*> xs, ir::AttrMap at = {}) {
    std::vector<ir::TensorType> in;
    for (ir::Value* v : xs) in.push_back(v->type);
    ir::TensorType t;
    REQUIRE(ir::inferType(k, in, at, t).empty());
    return f.append(k, std::move(xs), std::move(at), t)->result;
  };
  ir::AttrMap a1, a2;
  a1.set("axis", std::vector<int64_t>{0});
  a1.set("keepdims", false);
  a2.set("axis", std::vector<int64_t>{0, 1});
  a2.set("keepdims", false);
  ir::Value* loss = op(ir::OpKind::Add, {op(ir::OpKind::Sum, {f.results[0]}, a1), op(ir::OpKind::Sum, {f.results[2]}, a2)});
  auto g = passes::appendGradient(*m, f, loss, {}, /*wrtArgs=*/true);
  f.results.push_back(loss);
  f.results.push_back(g.args[0]);
  f.results.push_back(g.args[1]);
  f.resultShardings.resize(f.results.size());
  REQUIRE_MESSAGE(ir::verify(*m).empty(), ir::verify(*m));
  std::vector<float> w(12);
  for (size_t k = 0; k < w.size(); ++k) w[k] = 0.9f * std::cos(1.3f * (float)k);
  std::vector<Tensor> args = {Tensor::fromF32({2}, {0.8f, -0.6f}), Tensor::fromF32({3, 2, 2}, w)};
  backend::KernelContext ctx;
  std::vector<Tensor> want = backend::interpret(f, args, ctx);
  REQUIRE(want.size() == 6);
  CHECK(want[1].item() == 3);  // 0 + 2 + 1 + 0
  auto jit = backend::makeJitEngine(ctx);
  CHECK(compare(want, jit->call(f, args)) == "");
}

TEST_CASE("JIT: a fallback list naming loop or the indexing ops still runs loops") {
  // GSL_JIT_FALLBACK=loop,dynamic_index: the loop has no reference kernel
  // (it stays compiled), its body's dynamic_index runs the reference kernel.
  auto m = parse(loopProgram(1, 1));
  backend::ParamStore ps;
  ps.initialize(*m, 3);
  backend::KernelContext ctx;
  ctx.param = [&](const std::string& n) -> const Tensor& { return ps.get(n); };
  std::vector<Tensor> want = backend::interpret(*m->functions[0], {input()}, ctx);
  backend::JitOptions o;
  o.fallbackOps = {ir::OpKind::Loop, ir::OpKind::DynamicIndex};
  auto jit = backend::makeJitEngine(ctx, o);
  CHECK(compare(want, jit->call(*m->functions[0], {input()})) == "");
}
