// ir/IRParser: print(parse(text)) == text, error messages, fuzz safety.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "ir/IRParser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "ir_mutations.h"

using namespace gsl::ir;

namespace {

std::string roundTrip(const std::string& text) {
  IRParseResult r = parseModule(text);
  if (!r.module) return "PARSE ERROR: " + r.error;
  return printModule(*r.module);
}

std::string parseError(const std::string& text) {
  IRParseResult r = parseModule(text);
  if (r.module) return "(parsed)";
  return r.error;
}

const char* kMlp =
    "np = 4\n"
    "mesh @m = [data: 2, model: 2]\n"
    "param @w1 : f32[64, 256] @shard(m, [_, model]) = normal(0.02)\n"
    "param @w2 : f32[256, 64] @shard(m, [model, _]) = normal(0.02)\n"
    "\n"
    "func @mlp(%0: f32[32, 64] @shard(m, [data, _])) -> (f32[32, 64]) {\n"
    "  %1 = param {name = \"w1\"} : f32[64, 256] @shard(m, [_, model])\n"
    "  %2 = matmul %0, %1 : f32[32, 256]\n"
    "  %3 = relu %2 : f32[32, 256]\n"
    "  %4 = param {name = \"w2\"} : f32[256, 64] @shard(m, [model, _])\n"
    "  %5 = matmul %3, %4 : f32[32, 64] @shard(m, [data, _]) partial(model)\n"
    "  return %5\n"
    "}\n";

// Every attribute kind, every param init, (a, b) sharding entries, tuple
// results, sharded results, scalars, empty lists, escapes, inf/nan.
const char* kKitchenSink =
    "np = 8\n"
    "mesh @m = [data: 2, model: 2, pipe: 2]\n"
    "mesh @flat = [all: 8]\n"
    "mesh @one = []\n"
    "param @emb : f32[16, 8] @shard(m, [(data, model), _]) = uniform(-1.0, 1.0)\n"
    "param @g : f32[8, 8] @shard(flat, [_, all]) = glorot\n"
    "param @z : f32[8] = zeros\n"
    "param @o : f32 = ones\n"
    "param @n : f32[4, 8] = normal(1e-05)\n"
    "\n"
    "func @f(%0: f32[4, 8] @shard(m, [(data, pipe), model]), %1: i32[4], %2: bool[4, 8]) -> (f32[4, 8] "
    "@shard(m, [data, _]), i32[4], f32) {\n"
    "  %3 = exp %0 : f32[4, 8]\n"
    "  %4 = add %3, %0 : f32[4, 8]\n"
    "  %5 = sum %4 {axis = [1], keepdims = false} : f32[4]\n"
    "  %6 = layer_norm %4 {axis = [1], eps = 1e-05} : f32[4, 8]\n"
    "  %7 = cast %1 {dtype = f32} : f32[4]\n"
    "  %8 = softmax %6 {axis = 1} : f32[4, 8]\n"
    "  %9 = where %2, %8, %0 : f32[4, 8]\n"
    "  %10 = einsum %9, %0 {spec = \"ab,ab->a\"} : f32[4]\n"
    "  %11 = one_hot %1 {n = 8} : f32[4, 8]\n"
    "  %12 = reshape %11 {shape = [2, 16]} : f32[2, 16]\n"
    "  %13 = transpose %12 {perm = [1, 0]} : f32[16, 2]\n"
    "  %14 = slice %0 {axis = 1, end = 4, start = 0} : f32[4, 4]\n"
    "  %15 = concat %14, %14 {axis = 1} : f32[4, 8] @shard(m, [data, _]) partial(model, pipe)\n"
    "  %16 = constant {value = -2.5} : f32\n"
    "  %17 = copy %16 {flag = true, note = \"say \\\"hi\\\" \\\\ bye\", offset = -3} : f32\n"
    "  %18 = argmax %15 {axis = 1} : i32[4]\n"
    "  %19 = cumsum %15 {axis = 0, exclusive = true} : f32[4, 8] @shard(m, [data, _])\n"
    "  %20 = constant {value = 7} : i32\n"
    "  %21 = random_uniform %20 {shape = [2, 3]} : f32[2, 3]\n"
    "  %22 = constant {hi = inf, lo = -inf, x = nan, y = 1e+300, z = -0.0} : f32\n"
    "  %23 = constant {values = [1, -2, 3]} : i32[3]\n"
    "  %24 = reshape %16 {shape = [1, 1]} : f32[1, 1]\n"
    "  %25 = reshape %24 {shape = []} : f32\n"
    "  %26 = param {name = \"emb\"} : f32[16, 8] @shard(m, [(data, model), _])\n"
    "  %27 = take %26, %1 : f32[4, 8]\n"
    "  %28 = mean %27 {axis = [0, 1], keepdims = true} : f32[1, 1]\n"
    "  %29 = broadcast %28 {shape = [4, 8]} : f32[4, 8]\n"
    "  %30 = lt %29, %27 : bool[4, 8]\n"
    "  %31 = and %30, %2 : bool[4, 8]\n"
    "  %32 = not %31 : bool[4, 8]\n"
    "  %33 = max %27 {axis = [0], keepdims = false} : f32[8]\n"
    "  %34 = constant {big = 9223372036854775807, small = -9223372036854775808} : i32\n"
    "  %35 = div %25, %16 : f32\n"
    "  return %19, %18, %35\n"
    "}\n"
    "\n"
    "func @empty() -> () {\n"
    "  return\n"
    "}\n"
    "\n"
    "func @ident(%0: f32[2] @replicate_is_not_printed_so_none_here) -> (f32[2]) {\n"
    "  return %0\n"
    "}\n";

}  // namespace

TEST_CASE("IR parser: round trip of a printed MLP") { CHECK(roundTrip(kMlp) == kMlp); }

TEST_CASE("IR parser: round trip covering every attribute kind") {
  // The last function uses an invalid sharding name on purpose; strip it for
  // the round trip (it is tested as an error below).
  std::string text = kKitchenSink;
  const std::string bad = " @replicate_is_not_printed_so_none_here";
  text.replace(text.find(bad), bad.size(), "");
  CHECK(roundTrip(text) == text);

  IRParseResult r = parseModule(text);
  REQUIRE(r.module);
  CHECK(verify(*r.module) == "");
  Module& m = *r.module;
  CHECK(m.np == 8);
  CHECK(m.meshes.size() == 3);
  CHECK(m.meshes[2].axes.empty());
  CHECK(m.params.size() == 5);
  CHECK(m.params[0].init.kind == ParamInit::Uniform);
  CHECK(m.params[0].init.a == -1.0);
  CHECK(m.params[0].init.b == 1.0);
  CHECK(gsl::ir::namesOf(m.params[0].sharding->dims[0]) == std::vector<std::string>{"data", "model"});
  CHECK(m.params[4].init.a == 1e-05);
  Function* f = m.findFunction("f");
  REQUIRE(f);
  CHECK(f->args.size() == 3);
  CHECK(f->results.size() == 3);
  REQUIRE(f->resultShardings.size() == 3);
  CHECK(f->resultShardings[0].has_value());
  CHECK(!f->resultShardings[1].has_value());
  // Attribute kinds are as printed.
  const Op& copy = *f->ops[14];
  CHECK(copy.kind == OpKind::Copy);
  CHECK(copy.attrs.getString("note") == "say \"hi\" \\ bye");
  CHECK(copy.attrs.getInt("offset") == -3);
  CHECK(copy.attrs.getBool("flag") == true);
  // An einsum's spec, written as a string, is kept parsed.
  for (const auto& op : f->ops)
    if (op->kind == OpKind::Einsum) {
      const EinsumSpec& es = op->attrs.getEinsum("spec");
      CHECK(es.text == "ab,ab->a");
      CHECK(es.inputs == std::vector<std::string>{"ab", "ab"});
      CHECK(es.output == "a");
    }
  const Op& c22 = *f->ops[19];
  CHECK(std::isinf(c22.attrs.getFloat("hi")));
  CHECK(c22.attrs.getFloat("lo") < 0);
  CHECK(std::isnan(c22.attrs.getFloat("x")));
  CHECK(std::signbit(c22.attrs.getFloat("z")));
  CHECK(f->ops[4]->attrs.getDType("dtype") == DType::F32);
  CHECK(f->ops[20]->attrs.getInts("values") == std::vector<int64_t>{1, -2, 3});
  CHECK(f->ops[22]->attrs.getInts("shape").empty());
  CHECK(f->ops[31]->attrs.getInt("small") == INT64_MIN);
  const Value* v15 = f->ops[12]->result;
  REQUIRE(v15->sharding);
  CHECK(gsl::ir::namesOf(v15->sharding->partial) == std::vector<std::string>{"model", "pipe"});
  CHECK(m.findFunction("empty")->results.empty());
}

TEST_CASE("IR parser: value ids are arbitrary and get renumbered") {
  const char* in =
      "np = 1\n"
      "func @g(%x: f32[3], %7: f32[3]) -> (f32[3], f32[3]) {\n"
      "  %100 = add %x, %7 : f32[3]\n"
      "  %tmp = mul %100, %x : f32[3]\n"
      "  return %tmp, %100\n"
      "}\n";
  const char* out =
      "np = 1\n"
      "\n"
      "func @g(%0: f32[3], %1: f32[3]) -> (f32[3], f32[3]) {\n"
      "  %2 = add %0, %1 : f32[3]\n"
      "  %3 = mul %2, %0 : f32[3]\n"
      "  return %3, %2\n"
      "}\n";
  CHECK(roundTrip(in) == out);
  CHECK(roundTrip(out) == out);
}

TEST_CASE("IR parser: comments, free layout, @replicate and canonicalisation") {
  const char* in =
      "# a comment\n"
      "np = 2 mesh @m = [d: 2]\n"
      "func @h(%0: f32[2, 3] @replicate(m)) -> f32[2] {   # one result, no parens\n"
      "  %1 = sum %0 {axis = [-1]} : f32[2]\n"
      "  return %1 }\n";
  const char* out =
      "np = 2\n"
      "mesh @m = [d: 2]\n"
      "\n"
      "func @h(%0: f32[2, 3] @shard(m, [_, _])) -> (f32[2]) {\n"
      "  %1 = sum %0 {axis = [1], keepdims = false} : f32[2]\n"
      "  return %1\n"
      "}\n";
  CHECK(roundTrip(in) == out);
}

TEST_CASE("IR parser: empty module") {
  CHECK(roundTrip("") == "np = 1\n");
  CHECK(roundTrip("np = 3\n") == "np = 3\n");
}

TEST_CASE("IR parser: error messages") {
  const std::string head = "np = 1\nmesh @m = [a: 2, b: 2]\n";
  // Inferred and printed types differ.
  CHECK(parseError("np = 1\nfunc @f(%0: f32[2]) -> (f32[2]) {\n  %3 = neg %0 : f32[3]\n  return %3\n}\n") ==
        "3:3: type mismatch for %3: printed f32[3] but inferred f32[2]");
  CHECK(parseError("np = 1\nfunc @f(%0: f32[2]) -> (f32[2]) {\n  %1 = neg %9 : f32[2]\n  return %1\n}\n") ==
        "3:12: %9 is not defined");
  CHECK(parseError("np = 1\nfunc @f(%0: f32[2]) -> (f32[2]) {\n  %1 = frob %0 : f32[2]\n  return %1\n}\n") ==
        "3:8: unknown op 'frob'");
  CHECK(parseError("np = 1\nfunc @f(%0: f32[2]) -> (f32[2]) {\n  %0 = neg %0 : f32[2]\n  return %0\n}\n") ==
        "3:3: %0 is defined twice");
  CHECK(parseError("np = 1\nfunc @f(%0: f32[2]) -> (f32[2]) {\n  %1 = add %0 : f32[2]\n  return %1\n}\n") ==
        "3:8: add takes 2 operands, got 1");
  CHECK(parseError("np = 1\nfunc @f(%0: f32[2]) -> (f32[2]) {\n  %1 = reshape %0 : f32[2]\n  return %1\n}\n") ==
        "3:8: reshape needs attribute 'shape' (an integer list)");
  CHECK(parseError("np = 1\nfunc @f(%0: f32[2]) -> (f32[2]) {\n  %1 = reshape %0 {shape = 2} : f32[2]\n  return %1\n}\n") ==
        "3:8: attribute 'shape' of reshape must be an integer list, got 2");
  CHECK(parseError("np = 1\nfunc @f(%0: f32[2], %1: f32[3]) -> (f32[2]) {\n  %2 = add %0, %1 : f32[2]\n  return %2\n}\n") ==
        "3:8: shapes f32[2] and f32[3] cannot be broadcast together");
  CHECK(parseError("np = 1\nfunc @f(%0: f32[2]) -> (f32[3]) {\n  return %0\n}\n") ==
        "3:10: %0 has type f32[2] but result 0 of @f is declared f32[3]");
  CHECK(parseError("np = 1\nfunc @f(%0: f32[2]) -> (f32[2], f32[2]) {\n  return %0\n}\n") ==
        "3:3: return gives 1 value but @f declares 2 results");
  CHECK(parseError("np = 1\nfunc @f(%0: f32[2]) -> (f32[2]) {\n  %1 = copy %0 {s = \"abc} : f32[2]\n  return %1\n}\n") ==
        "3:21: unterminated string");
  CHECK(parseError("np = 1\nfunc @f(%0: f32[2]) -> (f32[2]) {\n  %1 = copy %0 {s = \"a\\nb\"} : f32[2]\n  return %1\n}\n") ==
        "3:23: invalid escape '\\n' in string (only \\\" and \\\\ are allowed)");
  CHECK(parseError("np = 1\nfunc @f(%0: f32[2]) -> (f32[2]) {\n  %1 = copy %0 {s = 1, s = 2} : f32[2]\n  return %1\n}\n") ==
        "3:24: attribute 's' is given twice");
  CHECK(parseError("np = 1\nfunc @f(%0: f32[2]) -> (f32[2]) {\n  %1 = copy %0 {s = foo} : f32[2]\n  return %1\n}\n") ==
        "3:21: invalid attribute value 'foo'");
  CHECK(parseError("np = 1\nfunc @f(%0: f32[2]) -> (f32[2]) {\n  %1 = copy %0 {s = [1, 2.5]} : f32[2]\n  return %1\n}\n") ==
        "3:25: expected an integer, got 2.5");
  CHECK(parseError("np = 1\nfunc @f(%0: f32[2]) -> (f32[2]) {\n  %1 = copy %0 {s = 99999999999999999999} : f32[2]\n  return %1\n}\n") ==
        "3:21: integer 99999999999999999999 is out of range");
  CHECK(parseError("np = 1\nfunc @f(%0: f32[2]) -> (f32[2]) {\n  %1 = copy %0 : f32[2]\n}\n") ==
        "4:1: expected an op '%ID = ...' or 'return', got '}'");
  CHECK(parseError("np = 1\nfunc @f(%0: f64[2]) -> (f32[2]) {\n  return %0\n}\n") ==
        "2:13: unknown element type 'f64' (expected f32, i32, bool or bf16)");
  CHECK(parseError("np = 1\nfunc @f(%0: f32[-2]) -> (f32[2]) {\n  return %0\n}\n") ==
        "2:17: dimension -2 is negative");
  CHECK(parseError("np = 1\nfunc @f(%0: f32[4294967296, 4294967296]) -> () {\n  return\n}\n") ==
        "2:13: type f32[4294967296, 4294967296] is too large (its byte size overflows 64 bits)");
  CHECK(parseError("np = 1\n$") == "2:1: unexpected character '$'");
  CHECK(parseError("np = 1\nfoo") == "2:1: expected 'np', 'mesh', 'param' or 'func', got 'foo'");
  CHECK(parseError("np = 0\n") == "1:6: np must be >= 1, got 0");
  CHECK(parseError("np = 1\nnp = 2\n") == "2:1: np is given twice");
  CHECK(parseError("np = 1\nfunc @f(") == "2:9: expected an argument '%ID', got end of input");
  CHECK(parseError("np = 1\nfunc @f(%0 f32)") == "2:12: expected ':', got 'f32'");
  // An einsum spec and a reduction are parsed where they enter, with the
  // type rules' messages.
  const std::string ein = "np = 1\nfunc @f(%0: f32[2, 3], %1: f32[3, 4]) -> (f32[2, 4]) {\n  %2 = einsum %0, %1 {spec = ";
  CHECK(parseError(ein + "\"i1,jk->ik\"} : f32[2, 4]\n  return %2\n}\n") ==
        "3:8: einsum spec \"i1,jk->ik\" has invalid character '1' (use letters, ',' and '->')");
  CHECK(parseError(ein + "\"ij,jk,kl->ik\"} : f32[2, 4]\n  return %2\n}\n") ==
        "3:8: einsum spec \"ij,jk,kl->ik\" names 3 operands but 2 were given");
  CHECK(parseError(ein + "\"ij,jk->iz\"} : f32[2, 4]\n  return %2\n}\n") ==
        "3:8: einsum output label 'z' does not appear in any input of \"ij,jk->iz\"");
  CHECK(parseError(ein + "3} : f32[2, 4]\n  return %2\n}\n") == "3:8: attribute 'spec' of einsum must be a string, got 3");
  const std::string ar = head + "func @f(%0: f32[2]) -> (f32[2]) {\n  %1 = all_reduce %0 {axes = [0], mesh = \"m\", reduce = ";
  CHECK(parseError(ar + "\"prod\"} : f32[2]\n  return %1\n}\n") == "4:8: all_reduce: unknown reduction 'prod'");
  CHECK(parseError(ar + "1} : f32[2]\n  return %1\n}\n") == "4:8: attribute 'reduce' of all_reduce must be a string, got 1");
  IRParseResult max = parseModule(ar + "\"max\"} : f32[2]\n  return %1\n}\n");
  REQUIRE(max.module);
  CHECK(max.module->findFunction("f")->ops[0]->attrs.getReduce("reduce") == ReduceOp::Max);
  // Meshes, params and shardings.
  CHECK(parseError(head + "mesh @m = [c: 4]\n") == "3:6: mesh @m is declared twice");
  CHECK(parseError("np = 1\nmesh @m = [a: 0]\n") == "2:6: mesh @m axis 'a' has size 0 (must be >= 1)");
  CHECK(parseError("np = 1\nmesh @m = [a: 2, a: 2]\n") == "2:6: mesh @m names axis 'a' twice");
  CHECK(parseError(head + "param @p : f32[4] @shard(q, [a]) = zeros\n") ==
        "3:19: sharding @shard(q, [a]) names an undeclared mesh 'q'");
  CHECK(parseError(head + "param @p : f32[4] @shard(m, [a, _]) = zeros\n") ==
        "3:19: sharding @shard(m, [a, _]) has 2 entries for a value of rank 1");
  CHECK(parseError(head + "param @p : f32[4] @shard(m, [c]) = zeros\n") ==
        "3:19: sharding @shard(m, [c]) names axis 'c', which mesh @m does not have");
  CHECK(parseError(head + "param @p : f32[4, 4] @shard(m, [a, (b, a)]) = zeros\n") ==
        "3:22: sharding @shard(m, [a, (b, a)]) uses mesh axis 'a' twice");
  CHECK(parseError(head + "param @p : f32[4] @shard(m, [a]) partial(a) = zeros\n") ==
        "3:19: sharding @shard(m, [a]) partial(a) uses mesh axis 'a' twice");
  CHECK(parseError(head + "param @p : f32[4] @split(m, [a]) = zeros\n") ==
        "3:19: expected '@shard(...)' or '@replicate(...)', got @split");
  CHECK(parseError(head + "param @p : f32[4] = gaussian\n") ==
        "3:21: unknown initialiser 'gaussian' (expected zeros, ones, normal(std), uniform(lo, hi) or glorot)");
  CHECK(parseError(head + "param @p : f32[4] = zeros\nparam @p : f32[4] = ones\n") ==
        "4:7: param @p is declared twice");
  CHECK(parseError(head + "param @p : f32[4] = zeros\nfunc @f() -> (f32[4]) {\n  %0 = param {name = \"q\"} : f32[4]\n  return %0\n}\n") ==
        "5:8: param op names an undeclared param @q");
  CHECK(parseError(head + "param @p : f32[4] = zeros\nfunc @f() -> (f32[5]) {\n  %0 = param {name = \"p\"} : f32[5]\n  return %0\n}\n") ==
        "5:3: type mismatch for %0: printed f32[5] but param @p is f32[4]");
  CHECK(parseError(head + "param @p : f32[4] = zeros\nfunc @f() -> (f32[4]) {\n  %0 = param : f32[4]\n  return %0\n}\n") ==
        "5:8: param needs a string attribute 'name'");
  CHECK(parseError("np = 1\nfunc @f() -> () {\n  return\n}\nfunc @f() -> () {\n  return\n}\n") ==
        "5:6: function @f is declared twice");
  // The invalid sharding name in the kitchen sink.
  CHECK(parseError(kKitchenSink).find("expected '@shard(...)' or '@replicate(...)', got "
                                      "@replicate_is_not_printed_so_none_here") != std::string::npos);
}

TEST_CASE("IR parser: truncations and mutations never crash") {
  std::string base = kKitchenSink;
  const std::string bad = " @replicate_is_not_printed_so_none_here";
  base.replace(base.find(bad), bad.size(), "");
  REQUIRE(parseModule(base).module);
  irtext::ParsedCounts parsed = irtext::checkTruncationsAndMutations(
      base, {0x9E3779B97F4A7C15ULL, 4000, 4, 8, "%@=,:()[]{}-.0123456789eE\"\\ \n_abfinxz#\x93\xff"});
  CHECK(parsed.prefixes + parsed.mutations > 0);
}
