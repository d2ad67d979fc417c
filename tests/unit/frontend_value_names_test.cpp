// The source names of IR values (ir/ValueNames.h), which the REPL reads:
// the front end records them in the table of the function that owns each
// value (a loop body's values in the body's), passes/Training adds the
// training step's grad(w) and opt.m(w), and a clone starts without names.
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "frontend/Frontend.h"
#include "passes/Pipeline.h"

using namespace gsl;

namespace {

const char* kProgram = R"(
const B = 2
const D = 4
optimizer opt = adam(lr=0.01)
param w: f32[D, D] = glorot

fn inner(a: f32[B, D]) -> f32[B, D] {
  let q = a @ w
  return tanh(q)
}

fn outer(x: f32[B, D]) -> f32[B, D] {
  let h = inner(x)
  let s = h
  for l in 0..3 {
    let t = s @ w
    s = t
  }
  return s
}

fn loss(x: f32[B, D]) -> f32 {
  return mean(outer(x))
}

fn main() {
  let x = random_uniform([B, D], 0)
  print(opt.minimize(loss, x))
}
)";

struct Compiled {
  SourceManager sm;
  Diagnostics diags{sm};
  std::unique_ptr<frontend::CheckedProgram> prog;
};

std::unique_ptr<Compiled> compile() {
  auto c = std::make_unique<Compiled>();
  c->prog = frontend::compileSource("names.gsl", kProgram, {}, c->sm, c->diags);
  REQUIRE(c->prog);
  return c;
}

// The values of `f` (not of its loop bodies) named `n` in f's table.
std::vector<const ir::Value*> named(const ir::Function& f, const std::string& n) {
  std::vector<const ir::Value*> r;
  for (const ir::Value* a : f.args)
    if (f.names.name(a) == n) r.push_back(a);
  for (const auto& op : f.ops)
    for (const ir::Value* v : op->results)
      if (f.names.name(v) == n) r.push_back(v);
  return r;
}

// The values of `f` (not of its loop bodies) with call path `p`.
std::vector<const ir::Value*> withPath(const ir::Function& f, const std::string& p) {
  std::vector<const ir::Value*> r;
  auto has = [&](const ir::Value* v) {
    const auto& ps = f.names.callPaths(v);
    return std::find(ps.begin(), ps.end(), p) != ps.end();
  };
  for (const ir::Value* a : f.args)
    if (has(a)) r.push_back(a);
  for (const auto& op : f.ops)
    for (const ir::Value* v : op->results)
      if (has(v)) r.push_back(v);
  return r;
}

const ir::Op* firstLoop(const ir::Function& f) {
  for (const auto& op : f.ops)
    if (op->body) return op.get();
  return nullptr;
}

}  // namespace

TEST_CASE("the front end names arguments and lets in their function's table") {
  auto c = compile();
  const ir::Function& outer = *c->prog->module->findFunction("outer");
  // An argument has its name (and, passed to fn inner, the call path of
  // inner's argument); a let of the function's own body its name and its
  // call path, the let's name.
  CHECK(outer.names.name(outer.args[0]) == "x");
  CHECK(outer.names.callPaths(outer.args[0]) == std::vector<std::string>{"inner.a"});
  auto h = named(outer, "h");
  REQUIRE(h.size() == 1);
  // `let s = h` names the same value again: the first name stays, both are
  // call paths.
  CHECK(outer.names.callPaths(h[0]) == std::vector<std::string>{"h", "s"});
  // A let of an inlined call has no name in the caller, only its call path.
  CHECK(named(outer, "q").empty());
  auto q = withPath(outer, "inner.q");
  REQUIRE(q.size() == 1);
  CHECK(outer.names.name(q[0]).empty());

  // A loop body's values are named in the body's own table.
  const ir::Op* loop = firstLoop(outer);
  REQUIRE(loop);
  const ir::Function& body = *loop->body;
  CHECK(body.names.name(body.args[0]) == "l");
  CHECK(body.names.callPaths(body.args[0]) == std::vector<std::string>{"l"});
  CHECK(body.names.name(body.args[1]) == "s");
  CHECK(named(body, "t").size() == 1);
  CHECK(outer.names.name(body.args[0]).empty());
  // namesWithBodies: the function's and its bodies' names in one table.
  ir::ValueNames all = outer.namesWithBodies();
  CHECK(all.name(outer.args[0]) == "x");
  CHECK(all.name(body.args[0]) == "l");
  CHECK(all.name(named(body, "t")[0]) == "t");

  // A clone's values have no names (the REPL copies them: repl/CallPaths.h).
  auto copy = outer.clone();
  CHECK(copy->names.name(copy->args[0]).empty());
  CHECK(copy->names.callPaths(copy->ops[0]->result).empty());
  CHECK(firstLoop(*copy)->body->names.name(firstLoop(*copy)->body->args[0]).empty());
}

TEST_CASE("training names the step's gradients and optimizer states in the step's table") {
  auto c = compile();
  const ir::Module& m = *c->prog->module;
  passes::runGlobalPipeline(*c->prog->module);
  const ir::Function* step = nullptr;
  for (const auto& f : m.functions)
    if (f->train) step = f.get();
  REQUIRE(step);
  CHECK(withPath(*step, "grad(w)").size() == 1);
  auto m1 = withPath(*step, "opt.m(w)"), v1 = withPath(*step, "opt.v(w)");
  REQUIRE(m1.size() == 1);
  REQUIRE(v1.size() == 1);
  CHECK(m1[0]->argIndex >= 0);
  CHECK(v1[0]->argIndex >= 0);
  // The loss function's lets, inlined into the step, by their call paths
  // (from the loss function).
  CHECK(withPath(*step, "loss.outer.h").size() == 1);
  CHECK(withPath(*step, "loss.outer.inner.q").size() == 1);
}
