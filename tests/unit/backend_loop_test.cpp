// The loop op run by the interpreter and differentiated by the autodiff
// pass (ir/Loop.h, passes/Autodiff.h, docs/loops.md): a loop against its
// hand-unrolled twin (forward values and every gradient), gradients
// against central finite differences, reverse and nested loops.
//
// The twin reads layer l's weights with slice + reshape (not
// dynamic_index), so both the indexing op and the loop are checked against
// ops tested elsewhere. Loop and twin compute the same f32 operations in
// the same order, so forward values agree to rounding (1e-6 relative);
// gradients sum the same terms in a different order (1e-5). Finite
// differences use the tolerances of backend_grad_test.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/Interpreter.h"
#include "ir/Function.h"
#include "ir/IRParser.h"
#include "ir/Loop.h"
#include "ir/Module.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/Autodiff.h"

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

AttrMap attrs(std::initializer_list<std::pair<const char*, ir::Attr>> kv) {
  AttrMap m;
  for (auto& [k, v] : kv) m.set(k, v);
  return m;
}

Value* op(ir::Function& f, OpKind k, std::vector<Value*> operands, AttrMap at = {}) {
  std::vector<TensorType> in;
  for (Value* v : operands) in.push_back(v->type);
  TensorType out;
  std::string err = ir::inferType(k, in, at, out);
  REQUIRE_MESSAGE(err.empty(), err);
  return f.append(k, std::move(operands), std::move(at), out)->result;
}

Value* constant(ir::Function& f, double v, DType dt = DType::F32) {
  return f.append(OpKind::Constant, {}, attrs({{"value", v}}), TensorType{dt, {}})->result;
}

Value* sumAll(ir::Function& f, Value* v) {
  Ints axes;
  for (int d = 0; d < v->type.rank(); ++d) axes.push_back(d);
  return op(f, OpKind::Sum, {v}, attrs({{"axis", axes}, {"keepdims", false}}));
}

ir::Op* loop(ir::Function& f, std::vector<Value*> operands, int64_t carried, int64_t trip,
             std::unique_ptr<ir::Function> body, bool reverse = false) {
  AttrMap at = attrs({{"carried", carried}, {"trip", trip}});
  if (reverse) at.set("reverse", true);
  std::vector<TensorType> in, types;
  for (Value* v : operands) in.push_back(v->type);
  std::string err = ir::inferLoopTypes(in, at, *body, types);
  REQUIRE_MESSAGE(err.empty(), err);
  return f.appendMulti(OpKind::Loop, std::move(operands), std::move(at), types, std::move(body));
}

struct Lcg {
  uint64_t s;
  explicit Lcg(uint64_t seed) : s(seed * 2654435761u + 12345) {}
  double next() {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)((s >> 40) & 0xFFFFFF) / (double)(1 << 24);
  }
};

Tensor rnd(const Shape& s, double lo, double hi, uint64_t seed) {
  Lcg g(seed);
  int64_t n = 1;
  for (auto d : s) n *= d;
  std::vector<float> v(n);
  for (auto& x : v) x = (float)(lo + (hi - lo) * g.next());
  return Tensor::fromF32(s, v);
}

void checkClose(const Tensor& a, const Tensor& b, double rel, const std::string& what) {
  REQUIRE(a.type() == b.type());
  for (int64_t e = 0; e < a.size(); ++e) {
    INFO(what << " element " << e << ": " << a.at(e) << " vs " << b.at(e));
    CHECK(std::fabs(a.at(e) - b.at(e)) <= rel * (1.0 + std::fabs(b.at(e))));
  }
}

// The model: L layers h = tanh(h @ w[l] + b), carrying (h, aux) with
// aux += sum(h * h), stacking every layer's h; the loss is
// sum(hL * hL) + aux + sum(Y * k) for a fixed k (an argument).
constexpr int64_t L = 4, N = 2, D = 3;

struct Model {
  ir::Module m;
  ir::Function f;
  Value *x, *b, *k, *loss;
  std::vector<Value*> extra;  // further values to return (set by the builder)
};

void declare(Model& md) {
  md.m.params.push_back(ir::Param{"w", TensorType{DType::F32, {L, D, D}}, {}, {}, {}});
  md.f.name = "f";
  md.x = md.f.addArg(TensorType{DType::F32, {N, D}});
  md.b = md.f.addArg(TensorType{DType::F32, {D}});
  md.k = md.f.addArg(TensorType{DType::F32, {L, N, D}});
}

Value* layer(ir::Function& f, Value* h, Value* wl, Value* b) {
  return op(f, OpKind::Tanh, {op(f, OpKind::Add, {op(f, OpKind::MatMul, {h, wl}), b})});
}

void buildLoop(Model& md) {
  declare(md);
  ir::Function& f = md.f;
  Value* w = f.append(OpKind::Param, {}, attrs({{"name", std::string("w")}}), md.m.params[0].type)->result;
  auto body = std::make_unique<ir::Function>();
  ir::Function& B = *body;
  B.name = "f";
  Value* i = B.addArg(TensorType{DType::I32, {}});
  Value* h = B.addArg(md.x->type);
  Value* aux = B.addArg(TensorType{DType::F32, {}});
  Value* wb = B.addArg(w->type);
  Value* bb = B.addArg(md.b->type);
  Value* h2 = layer(B, h, op(B, OpKind::DynamicIndex, {wb, i}), bb);
  Value* aux2 = op(B, OpKind::Add, {aux, sumAll(B, op(B, OpKind::Mul, {h2, h2}))});
  B.results = {h2, aux2, h2};
  ir::Op* lp = loop(f, {md.x, constant(f, 0.0), w, md.b}, 2, L, std::move(body));
  Value *hL = lp->results[0], *auxL = lp->results[1], *Y = lp->results[2];
  md.loss = op(f, OpKind::Add, {op(f, OpKind::Add, {sumAll(f, op(f, OpKind::Mul, {hL, hL})), auxL}),
                                sumAll(f, op(f, OpKind::Mul, {Y, md.k}))});
  md.extra = {hL, auxL, Y};
}

void buildUnrolled(Model& md) {
  declare(md);
  ir::Function& f = md.f;
  Value* w = f.append(OpKind::Param, {}, attrs({{"name", std::string("w")}}), md.m.params[0].type)->result;
  Value* h = md.x;
  Value* aux = constant(f, 0.0);
  std::vector<Value*> ys;
  for (int64_t l = 0; l < L; ++l) {
    Value* wl = op(f, OpKind::Reshape,
                   {op(f, OpKind::Slice, {w}, attrs({{"axis", int64_t(0)}, {"start", l}, {"end", l + 1}}))},
                   attrs({{"shape", Ints{D, D}}}));
    h = layer(f, h, wl, md.b);
    aux = op(f, OpKind::Add, {aux, sumAll(f, op(f, OpKind::Mul, {h, h}))});
    ys.push_back(op(f, OpKind::Reshape, {h}, attrs({{"shape", Ints{1, N, D}}})));
  }
  Value* Y = op(f, OpKind::Concat, ys, attrs({{"axis", int64_t(0)}}));
  md.loss = op(f, OpKind::Add, {op(f, OpKind::Add, {sumAll(f, op(f, OpKind::Mul, {h, h})), aux}),
                                sumAll(f, op(f, OpKind::Mul, {Y, md.k}))});
  md.extra = {h, aux, Y};
}

struct Inputs {
  std::vector<Tensor> args;
  std::map<std::string, Tensor> params;
  KernelContext ctx;
  Inputs() {
    args = {rnd({N, D}, -1, 1, 1), rnd({D}, -0.5, 0.5, 2), rnd({L, N, D}, -1, 1, 3)};
    params["w"] = rnd({L, D, D}, -0.8, 0.8, 4);
    ctx.param = [this](const std::string& n) -> const Tensor& { return params.at(n); };
  }
};

// Runs `md` with results (loss, extra..., d loss/dw, d loss/dx, d loss/db).
std::vector<Tensor> runWithGradients(Model& md, Inputs& in) {
  passes::Gradients g = passes::appendGradient(md.m, md.f, md.loss, {"w"}, true);
  md.f.results = {md.loss};
  for (Value* v : md.extra) md.f.results.push_back(v);
  md.f.results.push_back(g.params[0]);
  md.f.results.push_back(g.args[0]);
  md.f.results.push_back(g.args[1]);
  std::string err = ir::verifyFunction(md.m, md.f);
  REQUIRE_MESSAGE(err.empty(), err);
  return interpret(md.f, in.args, in.ctx);
}

}  // namespace

TEST_CASE("loop: the interpreter gives the unrolled twin's values") {
  Model lp, un;
  buildLoop(lp);
  buildUnrolled(un);
  Inputs in;
  lp.f.results = {lp.loss, lp.extra[0], lp.extra[1], lp.extra[2]};
  un.f.results = {un.loss, un.extra[0], un.extra[1], un.extra[2]};
  REQUIRE(ir::verifyFunction(lp.m, lp.f) == "");
  std::vector<Tensor> a = interpret(lp.f, in.args, in.ctx), b = interpret(un.f, in.args, in.ctx);
  const char* names[] = {"loss", "final h", "aux sum", "stacked h"};
  for (size_t r = 0; r < a.size(); ++r) checkClose(a[r], b[r], 1e-6, names[r]);
  CHECK(std::fabs(a[0].item()) > 0.1);  // not trivially zero
}

TEST_CASE("loop: with --remat the backward pass recomputes the whole body, to the same gradients") {
  Model lp, un;
  buildLoop(lp);
  buildUnrolled(un);
  lp.m.remat = true;
  Inputs in;
  size_t forwardOps = lp.f.ops.size();
  std::vector<Tensor> a = runWithGradients(lp, in), b = runWithGradients(un, in);
  const char* names[] = {"loss", "final h", "aux sum", "stacked h", "dw", "dx", "db"};
  for (size_t r = 0; r < a.size(); ++r) checkClose(a[r], b[r], r < 4 ? 1e-6 : 1e-5, names[r]);
  // The forward loop saves its carried inputs (h, aux) only; the backward
  // body runs the body's matmul again beside the VJP's two.
  CHECK(ir::LoopInfo(*lp.f.ops[2]).outputs == 3);
  int matmuls = 0;
  for (size_t o = forwardOps; o < lp.f.ops.size(); ++o)
    if (lp.f.ops[o]->kind == OpKind::Loop)
      for (const auto& op : lp.f.ops[o]->body->ops) matmuls += op->kind == OpKind::MatMul;
  CHECK(matmuls == 3);
}

TEST_CASE("loop: gradients equal the unrolled twin's and finite differences") {
  Model lp, un;
  buildLoop(lp);
  buildUnrolled(un);
  Inputs in;
  size_t forwardOps = lp.f.ops.size();
  std::vector<Tensor> a = runWithGradients(lp, in), b = runWithGradients(un, in);
  const char* names[] = {"loss", "final h", "aux sum", "stacked h", "dw", "dx", "db"};
  for (size_t r = 0; r < a.size(); ++r) checkClose(a[r], b[r], r < 4 ? 1e-6 : 1e-5, names[r]);

  SUBCASE("the backward pass is one reverse loop") {
    int loops = 0;
    for (size_t o = forwardOps; o < lp.f.ops.size(); ++o)
      if (lp.f.ops[o]->kind == OpKind::Loop) {
        ++loops;
        ir::LoopInfo li(*lp.f.ops[o]);
        CHECK(li.reverse);
        CHECK(li.trip == L);
        // carried: the adjoints of h and aux, and b's accumulator; w's
        // gradient is stacked per iteration (w is read as w[i] only).
        CHECK(li.carried == 3);
        CHECK(li.outputs == 1);
        // The body's matmul is read from the forward loop's saved rows,
        // not recomputed: its two matmuls are the VJP's (dh and dw).
        int matmuls = 0;
        for (const auto& op : lp.f.ops[o]->body->ops) matmuls += op->kind == OpKind::MatMul;
        CHECK(matmuls == 2);
      }
    CHECK(loops == 1);
    // The forward loop also saves its carried inputs (h, aux) and its
    // matmul's result per iteration.
    ir::LoopInfo fwd(*lp.f.ops[2]);
    CHECK(fwd.outputs == 4);
    // It prints, parses back and prints the same.
    ir::Module copy;
    copy.params = lp.m.params;
    copy.functions.push_back(lp.f.clone());
    std::string text = ir::printModule(copy);
    ir::IRParseResult r = ir::parseModule(text);
    REQUIRE_MESSAGE(r.module, r.error);
    CHECK(ir::printModule(*r.module) == text);
  }

  SUBCASE("finite differences") {
    Model fwd;
    buildLoop(fwd);
    fwd.f.results = {fwd.loss};
    auto lossAt = [&] { return interpret(fwd.f, in.args, in.ctx).at(0).item(); };
    auto check = [&](Tensor& x, const Tensor& g, const char* what) {
      for (int64_t e = 0; e < x.size(); ++e) {
        float x0 = x.f32()[e];
        float h = 1e-2f * std::max(1.0f, std::fabs(x0));
        x.f32()[e] = x0 + h;
        double lp1 = lossAt();
        x.f32()[e] = x0 - h;
        double lm1 = lossAt();
        x.f32()[e] = x0;
        double fd = (lp1 - lm1) / (2.0 * (double)h), ad = g.at(e);
        INFO(what << " element " << e << ": autodiff " << ad << ", finite difference " << fd);
        CHECK(std::fabs(ad - fd) <= 1e-3 + 1e-2 * std::fabs(fd));
      }
    };
    check(in.params["w"], a[4], "dw");
    check(in.args[0], a[5], "dx");
    check(in.args[1], a[6], "db");
  }
}

TEST_CASE("loop: reverse order, i32 carried values, outputs stacked at the iteration index") {
  // c' = 2 c + i (i32), y_i = c (the carry entering iteration i).
  ir::Module m;
  ir::Function f;
  f.name = "r";
  auto body = std::make_unique<ir::Function>();
  Value* i = body->addArg(TensorType{DType::I32, {}});
  Value* c = body->addArg(TensorType{DType::I32, {}});
  Value* two = constant(*body, 2, DType::I32);
  body->results = {op(*body, OpKind::Add, {op(*body, OpKind::Mul, {c, two}), i}), c};
  for (bool reverse : {false, true}) {
    CAPTURE(reverse);
    ir::Function g;
    g.name = "r";
    ir::Op* lp = loop(g, {constant(g, 1, DType::I32)}, 1, 4, body->clone(), reverse);
    g.results = {lp->results[0], lp->results[1]};
    REQUIRE(ir::verifyFunction(m, g) == "");
    std::vector<Tensor> r = interpret(g, {}, KernelContext{});
    // forward: i = 0,1,2,3: c = 1, 2, 5, 12 -> 27; rows y[i] = c entering i.
    // reverse: i = 3,2,1,0: c = 1, 5, 12, 25 -> 50; y[3]=1, y[2]=5, y[1]=12, y[0]=25.
    std::vector<double> rows = reverse ? std::vector<double>{25, 12, 5, 1} : std::vector<double>{1, 2, 5, 12};
    CHECK(r[0].item() == (reverse ? 50 : 27));
    REQUIRE(r[1].type().str() == "i32[4]");
    for (int e = 0; e < 4; ++e) CHECK(r[1].at(e) == rows[e]);
  }
}

TEST_CASE("loop: gradient through a nested loop and an i32 carried counter") {
  // Outer loop over 3 layers carries (h f32[2], n i32); its body runs an
  // inner 2-step loop h = h * v[j] + s with v = u[i] (a per-layer table)
  // and s an invariant scalar. Checked against finite differences.
  ir::Module m;
  m.params.push_back(ir::Param{"u", TensorType{DType::F32, {3, 2, 2}}, {}, {}, {}});
  ir::Function f;
  f.name = "n";
  Value* x = f.addArg(TensorType{DType::F32, {2}});
  Value* s = f.addArg(TensorType{DType::F32, {}});
  Value* u = f.append(OpKind::Param, {}, attrs({{"name", std::string("u")}}), m.params[0].type)->result;

  auto inner = std::make_unique<ir::Function>();
  {
    ir::Function& B = *inner;
    Value* j = B.addArg(TensorType{DType::I32, {}});
    Value* h = B.addArg(TensorType{DType::F32, {2}});
    Value* v = B.addArg(TensorType{DType::F32, {2, 2}});
    Value* sc = B.addArg(TensorType{DType::F32, {}});
    Value* h2 = op(B, OpKind::Tanh, {op(B, OpKind::Add, {op(B, OpKind::Mul, {h, op(B, OpKind::DynamicIndex, {v, j})}), sc})});
    B.results = {h2};
  }
  auto outer = std::make_unique<ir::Function>();
  {
    ir::Function& B = *outer;
    Value* i = B.addArg(TensorType{DType::I32, {}});
    Value* h = B.addArg(TensorType{DType::F32, {2}});
    Value* n = B.addArg(TensorType{DType::I32, {}});
    Value* ub = B.addArg(u->type);
    Value* sb = B.addArg(s->type);
    ir::Op* in = loop(B, {h, op(B, OpKind::DynamicIndex, {ub, i}), sb}, 1, 2, std::move(inner));
    Value* n2 = op(B, OpKind::Add, {n, i});
    B.results = {in->result, n2};
  }
  ir::Op* lp = loop(f, {x, constant(f, 0, DType::I32), u, s}, 2, 3, std::move(outer));
  Value* loss = sumAll(f, op(f, OpKind::Mul, {lp->results[0], op(f, OpKind::Cast, {lp->results[1]}, attrs({{"dtype", DType::F32}}))}));
  std::unique_ptr<ir::Function> fwd = f.clone();
  fwd->results = {fwd->ops.back()->result};  // the clone of `loss`
  passes::Gradients g = passes::appendGradient(m, f, loss, {"u"}, true);
  f.results = {loss, g.params[0], g.args[0], g.args[1]};
  REQUIRE(ir::verifyFunction(m, f) == "");
  REQUIRE(ir::verifyFunction(m, *fwd) == "");

  std::vector<Tensor> args = {rnd({2}, -1, 1, 7), Tensor::scalarF32(0.3f)};
  std::map<std::string, Tensor> params{{"u", rnd({3, 2, 2}, -1, 1, 8)}};
  KernelContext ctx;
  ctx.param = [&](const std::string& nm) -> const Tensor& { return params.at(nm); };
  std::vector<Tensor> r = interpret(f, args, ctx);
  auto lossAt = [&] { return interpret(*fwd, args, ctx).at(0).item(); };
  CHECK(r[0].item() == lossAt());
  auto check = [&](Tensor& t, const Tensor& gr, const char* what) {
    for (int64_t e = 0; e < t.size(); ++e) {
      float x0 = t.f32()[e];
      float h = 1e-2f * std::max(1.0f, std::fabs(x0));
      t.f32()[e] = x0 + h;
      double lp1 = lossAt();
      t.f32()[e] = x0 - h;
      double lm1 = lossAt();
      t.f32()[e] = x0;
      double fd = (lp1 - lm1) / (2.0 * (double)h), ad = gr.at(e);
      INFO(what << " element " << e << ": autodiff " << ad << ", finite difference " << fd);
      CHECK(std::fabs(ad - fd) <= 1e-3 + 1e-2 * std::fabs(fd));
    }
  };
  check(params["u"], r[1], "du");
  check(args[0], r[2], "dx");
  check(args[1], r[3], "ds");
}

// Checks every f32 argument's gradient of `f` (loss = its first result,
// an f32 scalar) against central finite differences; returns the gradients.
static std::vector<Tensor> checkArgGradients(ir::Function& f, std::vector<Tensor> args) {
  ir::Module m;
  std::unique_ptr<ir::Function> fwd = f.clone();
  passes::Gradients g = passes::appendGradient(m, f, f.results[0], {}, true);
  Value* loss = f.results[0];
  f.results = {loss};
  for (Value* v : g.args)
    if (v) f.results.push_back(v);
  std::string err = ir::verifyFunction(m, f);
  REQUIRE_MESSAGE(err.empty(), err);
  std::vector<Tensor> r = interpret(f, args, KernelContext{});
  auto lossAt = [&] { return interpret(*fwd, args, KernelContext{}).at(0).item(); };
  CHECK(r[0].item() == lossAt());
  size_t k = 1;
  for (size_t a = 0; a < args.size(); ++a) {
    if (args[a].dtype() != DType::F32) continue;
    Tensor& t = args[a];
    const Tensor& gr = r[k++];
    for (int64_t e = 0; e < t.size(); ++e) {
      float x0 = t.f32()[e];
      float h = 1e-2f * std::max(1.0f, std::fabs(x0));
      t.f32()[e] = x0 + h;
      double lp1 = lossAt();
      t.f32()[e] = x0 - h;
      double lm1 = lossAt();
      t.f32()[e] = x0;
      double fd = (lp1 - lm1) / (2.0 * (double)h), ad = gr.at(e);
      INFO("argument " << a << " element " << e << ": autodiff " << ad << ", finite difference " << fd);
      CHECK(std::fabs(ad - fd) <= 1e-3 + 1e-2 * std::fabs(fd));
    }
  }
  return r;
}

TEST_CASE("loop gradients: reverse loops, unused outputs, a stacked input read whole") {
  // Body: (i, h: f32[3], w: f32[4, 3], v: f32[4, 3]) ->
  //   (h' = sigmoid(h * w[i] + sum(v) ), y = h' * v[i])
  // v has one row per iteration but is also read whole (sum), so its
  // gradient is summed, not stacked; w's is stacked.
  auto build = [](bool reverse, bool useOutputs) {
    auto f = std::make_unique<ir::Function>();
    f->name = "g";
    Value* x = f->addArg(TensorType{DType::F32, {3}});
    Value* w = f->addArg(TensorType{DType::F32, {4, 3}});
    Value* v = f->addArg(TensorType{DType::F32, {4, 3}});
    auto body = std::make_unique<ir::Function>();
    ir::Function& B = *body;
    Value* i = B.addArg(TensorType{DType::I32, {}});
    Value* h = B.addArg(x->type);
    Value* wb = B.addArg(w->type);
    Value* vb = B.addArg(v->type);
    Value* pre = op(B, OpKind::Add, {op(B, OpKind::Mul, {h, op(B, OpKind::DynamicIndex, {wb, i})}),
                                     op(B, OpKind::Mul, {sumAll(B, vb), constant(B, 0.1)})});
    Value* h2 = op(B, OpKind::Sigmoid, {pre});
    B.results = {h2, op(B, OpKind::Mul, {h2, op(B, OpKind::DynamicIndex, {vb, i})})};
    ir::Op* lp = loop(*f, {x, w, v}, 1, 4, std::move(body), reverse);
    Value* loss = sumAll(*f, op(*f, OpKind::Mul, {lp->results[0], lp->results[0]}));
    if (useOutputs) loss = op(*f, OpKind::Add, {loss, sumAll(*f, op(*f, OpKind::Tanh, {lp->results[1]}))});
    f->results = {loss};
    return f;
  };
  std::vector<Tensor> args = {rnd({3}, -1, 1, 11), rnd({4, 3}, -1.5, 1.5, 12), rnd({4, 3}, -1, 1, 13)};
  for (bool reverse : {false, true})
    for (bool useOutputs : {true, false}) {
      CAPTURE(reverse);
      CAPTURE(useOutputs);
      auto f = build(reverse, useOutputs);
      checkArgGradients(*f, args);
      // The backward loop runs the other way; w's gradient is stacked (one
      // per-iteration output), v's summed in a carried accumulator.
      const ir::Op* back = nullptr;
      for (auto& o : f->ops)
        if (o->kind == OpKind::Loop) back = o.get();
      REQUIRE(back);
      ir::LoopInfo li(*back);
      CHECK(li.reverse == !reverse);
      CHECK(li.carried == 2);  // h's adjoint, v's accumulator
      CHECK(li.outputs == 1);  // w's rows
    }
}

TEST_CASE("loop gradients: a carried value the loss never reads gets no adjoint carry") {
  // Body: (i, h: f32[3], s: f32, w: f32[4, 3]) ->
  //   (h' = tanh(h * w[i] (+ 0.1 s when `feeds`)), s' = s + sum(h' * h'))
  // The loss reads only the final h; the final s is returned beside it
  // (telemetry, as opt.minimize's aux outputs). Without `feeds` nothing
  // the loss reads depends on s: the backward loop carries h's adjoint
  // only. With `feeds`, h depends on s, so s's adjoint is carried too.
  auto build = [](bool feeds) {
    auto f = std::make_unique<ir::Function>();
    f->name = "g";
    Value* x = f->addArg(TensorType{DType::F32, {3}});
    Value* w = f->addArg(TensorType{DType::F32, {4, 3}});
    auto body = std::make_unique<ir::Function>();
    ir::Function& B = *body;
    Value* i = B.addArg(TensorType{DType::I32, {}});
    Value* h = B.addArg(x->type);
    Value* sv = B.addArg(TensorType{DType::F32, {}});
    Value* wb = B.addArg(w->type);
    Value* pre = op(B, OpKind::Mul, {h, op(B, OpKind::DynamicIndex, {wb, i})});
    if (feeds) pre = op(B, OpKind::Add, {pre, op(B, OpKind::Mul, {sv, constant(B, 0.1)})});
    Value* h2 = op(B, OpKind::Tanh, {pre});
    B.results = {h2, op(B, OpKind::Add, {sv, sumAll(B, op(B, OpKind::Mul, {h2, h2}))})};
    ir::Op* lp = loop(*f, {x, constant(*f, 0.5), w}, 2, 4, std::move(body));
    f->results = {sumAll(*f, op(*f, OpKind::Mul, {lp->results[0], lp->results[0]})), lp->results[1]};
    return f;
  };
  std::vector<Tensor> args = {rnd({3}, -1, 1, 21), rnd({4, 3}, -1.5, 1.5, 22)};
  for (bool feeds : {false, true}) {
    CAPTURE(feeds);
    auto f = build(feeds);
    checkArgGradients(*f, args);
    const ir::Op* back = nullptr;
    for (auto& o : f->ops)
      if (o->kind == OpKind::Loop) back = o.get();
    REQUIRE(back);
    ir::LoopInfo li(*back);
    CHECK(li.carried == (feeds ? 2 : 1));  // h's adjoint (and s's)
    CHECK(li.outputs == 1);                // w's rows
  }
}

TEST_CASE("gradients of dynamic_index and dynamic_update") {
  // loss = sum(tanh(dynamic_update(x, u * dynamic_index(x, 2), 1)) * k)
  ir::Function f;
  f.name = "d";
  Value* x = f.addArg(TensorType{DType::F32, {3, 2}});
  Value* u = f.addArg(TensorType{DType::F32, {2}});
  Value* k = f.addArg(TensorType{DType::F32, {3, 2}});
  Value* i1 = constant(f, 1, DType::I32);
  Value* i2 = constant(f, 2, DType::I32);
  Value* row = op(f, OpKind::Mul, {u, op(f, OpKind::DynamicIndex, {x, i2})});
  Value* y = op(f, OpKind::Tanh, {op(f, OpKind::DynamicUpdate, {x, row, i1})});
  f.results = {sumAll(f, op(f, OpKind::Mul, {y, k}))};
  std::vector<Tensor> r =
      checkArgGradients(f, {rnd({3, 2}, -1, 1, 21), rnd({2}, -1, 1, 22), rnd({3, 2}, -1, 1, 23)});
  // Row 1 of x is overwritten: its gradient is exactly zero.
  CHECK(r[1].at(2) == 0.0);
  CHECK(r[1].at(3) == 0.0);
}

TEST_CASE("dynamic_index and dynamic_update kernels") {
  ir::Function f;
  f.name = "d";
  Value* x = f.addArg(TensorType{DType::F32, {3, 2}});
  Value* u = f.addArg(TensorType{DType::F32, {2}});
  Value* i = f.addArg(TensorType{DType::I32, {}});
  f.results = {op(f, OpKind::DynamicIndex, {x, i}), op(f, OpKind::DynamicUpdate, {x, u, i})};
  Tensor xt = Tensor::fromF32({3, 2}, {1, 2, 3, 4, 5, 6}), ut = Tensor::fromF32({2}, {7, 8});
  auto values = [](const Tensor& t) {
    std::vector<double> v;
    for (int64_t e = 0; e < t.size(); ++e) v.push_back(t.at(e));
    return v;
  };
  using V = std::vector<double>;
  std::vector<Tensor> r = interpret(f, {xt, ut, Tensor::scalarI32(1)}, KernelContext{});
  CHECK(r[0].type().str() == "f32[2]");
  CHECK(values(r[0]) == V{3, 4});
  CHECK(r[1].type().str() == "f32[3, 2]");
  CHECK(values(r[1]) == V{1, 2, 7, 8, 5, 6});
  CHECK(values(xt) == V{1, 2, 3, 4, 5, 6});  // the input is not changed
  r = interpret(f, {xt, ut, Tensor::scalarI32(2)}, KernelContext{});
  CHECK(values(r[0]) == V{5, 6});
  CHECK(values(r[1]) == V{1, 2, 3, 4, 7, 8});
  r = interpret(f, {xt, ut, Tensor::scalarI32(0)}, KernelContext{});
  CHECK(values(r[0]) == V{1, 2});
  CHECK(values(r[1]) == V{7, 8, 3, 4, 5, 6});
}
