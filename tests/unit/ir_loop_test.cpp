// The loop op in the IR core (ir/Loop.h): its text form round trip, the
// parser's and the verifier's errors, and the indexing ops' type rules.
#include <doctest/doctest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "ir/IRParser.h"
#include "ir/Loop.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "ir_mutations.h"
#include "ir_texts.h"

using namespace gsl::ir;

namespace {

std::string roundTrip(const std::string& text) {
  IRParseResult r = parseModule(text);
  if (!r.module) return "PARSE ERROR: " + r.error;
  if (auto e = verify(*r.module); !e.empty()) return "VERIFY ERROR: " + e;
  return printModule(*r.module);
}

std::string parseError(const std::string& text) {
  IRParseResult r = parseModule(text);
  if (r.module) return "(parsed)";
  return r.error;
}

using irtext::kLoopMlp;

// Replaces the first occurrence of `from` in kLoopMlp (which must be there).
std::string mlpWith(const std::string& from, const std::string& to) {
  std::string s = kLoopMlp;
  auto p = s.find(from);
  REQUIRE_MESSAGE(p != std::string::npos, from);
  return s.replace(p, from.size(), to);
}

}  // namespace

TEST_CASE("loop IR: round trip of a stacked-weight MLP") { CHECK(roundTrip(kLoopMlp) == kLoopMlp); }

TEST_CASE("loop IR: the parsed structure") {
  IRParseResult r = parseModule(kLoopMlp);
  REQUIRE(r.module);
  Function& f = *r.module->functions[0];
  Op& loop = *f.ops[2];
  REQUIRE(loop.kind == OpKind::Loop);
  REQUIRE(loop.body);
  CHECK(loop.results.size() == 3);
  CHECK(loop.result == loop.results[0]);
  for (Value* v : loop.results) CHECK(v->def == &loop);
  LoopInfo li(loop);
  CHECK(li.trip == 4);
  CHECK(li.carried == 2);
  CHECK(li.invariants == 2);
  CHECK(li.outputs == 1);
  CHECK(!li.reverse);
  CHECK(loop.body->args.size() == 5);
  CHECK(loop.body->results.size() == 3);
  CHECK(f.results[2]->type.str() == "f32[4, 2, 3]");
}

TEST_CASE("loop IR: clone is deep and prints the same") {
  IRParseResult r = parseModule(kLoopMlp);
  REQUIRE(r.module);
  Function& f = *r.module->functions[0];
  auto c = f.clone();
  REQUIRE(c->ops[2]->body);
  CHECK(c->ops[2]->body.get() != f.ops[2]->body.get());
  CHECK(c->ops[2]->body->ops[0].get() != f.ops[2]->body->ops[0].get());
  CHECK(verifyFunction(*r.module, *c) == "");
  CHECK(printFunction(*c) == printFunction(f));
}

TEST_CASE("loop IR: reverse loops, nested loops and i32 carried values") {
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
      "      yield %17\n"
      "    }\n"
      "    yield %12, %10, %7\n"
      "  }\n"
      "  return %3, %4, %5\n"
      "}\n";
  CHECK(roundTrip(text) == text);
}

TEST_CASE("loop IR: dynamic_index and dynamic_update type rules") {
  AttrMap at;
  TensorType out;
  const TensorType idx{DType::I32, {}};
  CHECK(inferType(OpKind::DynamicIndex, {{DType::F32, {4, 2, 3}}, idx}, at, out) == "");
  CHECK(out.str() == "f32[2, 3]");
  CHECK(inferType(OpKind::DynamicIndex, {{DType::F32, {}}, idx}, at, out) ==
        "dynamic_index needs a tensor of rank >= 1, got f32");
  CHECK(inferType(OpKind::DynamicIndex, {{DType::F32, {4}}, {DType::I32, {1}}}, at, out) ==
        "dynamic_index needs an i32 scalar index, got i32[1]");
  CHECK(inferType(OpKind::DynamicUpdate, {{DType::F32, {4, 2}}, {DType::F32, {2}}, idx}, at, out) == "");
  CHECK(out.str() == "f32[4, 2]");
  CHECK(inferType(OpKind::DynamicUpdate, {{DType::F32, {4, 2}}, {DType::F32, {3}}, idx}, at, out) ==
        "dynamic_update of f32[4, 2] needs a row of type f32[2], got f32[3]");
  CHECK(inferType(OpKind::DynamicUpdate, {{DType::F32, {4, 2}}, {DType::F32, {2}}, {DType::F32, {}}}, at, out) ==
        "dynamic_update needs an i32 scalar index, got f32");
}

TEST_CASE("loop IR: sharding rules of dynamic_index and dynamic_update") {
  Function f;
  Value* x = f.addArg(TensorType{DType::F32, {4, 6, 8}});
  Value* u = f.addArg(TensorType{DType::F32, {6, 8}});
  Value* i = f.addArg(TensorType{DType::I32, {}});
  Op* di = f.append(OpKind::DynamicIndex, {x, i}, {}, TensorType{DType::F32, {6, 8}});
  DimLabels L = shardDynamicIndex(*di);
  REQUIRE(L.operands.size() == 2);
  REQUIRE(L.operands[0].size() == 3);
  CHECK(L.operands[1].empty());
  CHECK(L.unsplittable == std::set<int>{L.operands[0][0]});
  CHECK(L.result == std::vector<int>{L.operands[0][1], L.operands[0][2]});
  CHECK(!L.partialSum);
  Op* du = f.append(OpKind::DynamicUpdate, {x, u, i}, {}, x->type);
  L = shardDynamicUpdate(*du);
  REQUIRE(L.operands.size() == 3);
  CHECK(L.result == L.operands[0]);
  CHECK(L.operands[1] == std::vector<int>{L.operands[0][1], L.operands[0][2]});
  CHECK(L.operands[2].empty());
  CHECK(L.unsplittable == std::set<int>{L.operands[0][0]});
}

TEST_CASE("loop IR: parser errors") {
  CHECK(parseError(mlpWith("trip = 4", "trip = 0")) == "7:16: loop trip count must be >= 1, got 0");
  CHECK(parseError(mlpWith("carried = 2", "carried = 5")) ==
        "7:16: loop carries 5 values but has 4 operands");
  CHECK(parseError(mlpWith("{carried = 2, trip = 4}", "{trip = 4}")) ==
        "7:16: loop needs attribute 'carried' (an integer)");
  CHECK(parseError(mlpWith("%11: f32[3]):", "%11: f32[1, 3]):")) ==
        "7:16: loop body argument 4 has type f32[1, 3] but the loop's invariant operand 3 is f32[3]");
  CHECK(parseError(mlpWith("%11: f32[3]):", "%11: f32[3], %99: f32):")) ==
        "7:16: loop body takes 6 arguments, expected 5 (the index, 2 carried and 2 invariant)");
  CHECK(parseError(mlpWith("body(%7: i32,", "body(%7: f32,")) ==
        "9:11: dynamic_index needs an i32 scalar index, got f32");  // the body is checked first
  CHECK(parseError(mlpWith("yield %15, %18, %15", "yield %15, %15, %15")) ==
        "7:16: loop carried value 1 has type f32 but the body yields f32[2, 3] for it");
  CHECK(parseError(mlpWith("yield %15, %18, %15", "yield %15")) ==
        "7:16: loop body yields 1 values, fewer than the 2 carried");
  CHECK(parseError(mlpWith(": f32[2, 3], f32, f32[4, 2, 3] {", ": f32[2, 3], f32, f32[3, 2, 3] {")) ==
        "7:11: type mismatch for %6: printed f32[3, 2, 3] but inferred f32[4, 2, 3]");
  CHECK(parseError(mlpWith("%4, %5, %6 = loop", "%4, %5 = loop")) ==
        "7:3: op defines 2 values but 3 types are given");
  CHECK(parseError(mlpWith("%13 = matmul %8, %12", "%13 = matmul %0, %12")) ==
        "10:18: %0 is defined outside this loop body (a body reads only its arguments)");
  CHECK(parseError(mlpWith("%12 = dynamic_index %10, %7 : f32[3, 3]",
                           "%12 = param {name = \"w\"} : f32[4, 3, 3]")) ==
        "9:11: a loop body cannot read a param (pass it to the loop as an operand)");
  CHECK(parseError(mlpWith("%16 = mul", "%7 = mul")) == "13:5: %7 is defined twice");
  CHECK(parseError(mlpWith("    yield %15, %18, %15\n", "    yield %15, %18, %15\n    %5 = copy %15 : f32[2, 3]\n")) ==
        "17:5: expected '}', got %5");
  CHECK(parseError(mlpWith("%3 = constant", "%3, %99 = constant")) == "6:7: constant has one result, got 2");
  CHECK(parseError(mlpWith("  }\n  return", "  return")) == "17:3: expected '}', got 'return'");
  CHECK(parseError(mlpWith("    yield %15, %18, %15\n", "")) ==
        "16:3: expected an op '%ID = ...' or 'yield', got '}'");
  CHECK(parseError(mlpWith("    body(", "    (")) == "8:5: expected 'body(...)', got '('");
}

TEST_CASE("loop IR: the loop type rule") {
  // A body (i, c: f32[2]) -> (c, i as a per-iteration output).
  auto body = [](DType index) {
    auto b = std::make_unique<Function>();
    Value* i = b->addArg(TensorType{index, {}});
    Value* c = b->addArg(TensorType{DType::F32, {2}});
    b->results = {c, i};
    return b;
  };
  AttrMap at;
  at.set("trip", int64_t(5));
  at.set("carried", int64_t(1));
  std::vector<TensorType> out;
  CHECK(inferLoopTypes({{DType::F32, {2}}}, at, *body(DType::I32), out) == "");
  REQUIRE(out.size() == 2);
  CHECK(out[0].str() == "f32[2]");
  CHECK(out[1].str() == "i32[5]");
  CHECK(inferLoopTypes({{DType::F32, {2}}}, at, *body(DType::F32), out) ==
        "loop body argument 0 (the iteration index) has type f32, expected i32");
  at.set("trip", int64_t(-1));
  CHECK(inferLoopTypes({{DType::F32, {2}}}, at, *body(DType::I32), out) ==
        "loop trip count must be >= 1, got -1");
  at.set("trip", int64_t(1) << 62);
  CHECK(inferLoopTypes({{DType::F32, {2}}}, at, *body(DType::I32), out) ==
        "loop output 0 stacked over 4611686018427387904 iterations is too large (its byte size overflows 64 bits)");
}

TEST_CASE("loop IR: verifier errors on IR built by a pass") {
  auto load = [] {
    IRParseResult r = parseModule(kLoopMlp);
    REQUIRE(r.module);
    return std::move(r.module);
  };
  SUBCASE("a carried value whose type the body changes") {
    auto m = load();
    Function& body = *m->functions[0]->ops[2]->body;
    body.results[1] = body.ops[5]->result;  // the sum: f32, but mistyped below
    body.ops[5]->result->type = TensorType{DType::F32, {1}};
    CHECK(verify(*m) ==
          "function @f: loop body: %17 = sum: result type is f32[1] but the type rule gives f32");
    body.ops[5]->result->type = TensorType{DType::F32, {}};
    body.results[0] = body.ops[5]->result;
    CHECK(verify(*m) ==
          "function @f: %4 = loop: loop carried value 0 has type f32[2, 3] but the body yields f32 for it");
  }
  SUBCASE("a stacked result of the wrong type") {
    auto m = load();
    m->functions[0]->ops[2]->results[2]->type = TensorType{DType::F32, {2, 3}};
    CHECK(verify(*m) ==
          "function @f: %4 = loop: result 2 has type f32[2, 3] but the loop's type rule gives f32[4, 2, 3]");
  }
  SUBCASE("a body reading a value of the enclosing function") {
    auto m = load();
    Function& f = *m->functions[0];
    f.ops[2]->body->ops[1]->operands[0] = f.args[0];
    CHECK(verify(*m) ==
          "function @f: loop body: %13 = matmul: operand 0 (%0) is not defined before use in this function");
  }
  SUBCASE("a loop without a body, a body on another op") {
    auto m = load();
    Function& f = *m->functions[0];
    f.ops[1]->body = std::move(f.ops[2]->body);
    CHECK(verify(*m) == "function @f: %3 = constant: an op with a body that is not a loop");
    f.ops[1]->body.reset();
    CHECK(verify(*m) == "function @f: %4 = loop: a loop without a body");
  }
  SUBCASE("several results on an op that is not a loop") {
    auto m = load();
    Function& f = *m->functions[0];
    f.addResult(f.ops[1].get(), TensorType{DType::F32, {}});
    CHECK(verify(*m) == "function @f: %3 = constant: has 2 results (only a loop has several)");
  }
}

TEST_CASE("loop IR: nesting is bounded") {
  // A loop nested `depth` deep, each level carrying one f32.
  auto nested = [](int depth) {
    std::string s = "np = 1\n\nfunc @n(%0: f32) -> (f32) {\n";
    int id = 1;
    std::string indent = "  ";
    std::vector<int> yields;
    int carried = 0;
    for (int d = 0; d < depth; ++d) {
      int res = id++, i = id++, c = id++;
      s += indent + "%" + std::to_string(res) + " = loop %" + std::to_string(carried) +
           " {carried = 1, trip = 2} : f32 {\n";
      if (depth <= 64) indent += "  ";  // (the printed layout; the parser needs none)
      s += indent + "body(%" + std::to_string(i) + ": i32, %" + std::to_string(c) + ": f32):\n";
      yields.push_back(res);
      carried = c;
    }
    int last = carried;
    for (int d = depth - 1; d >= 0; --d) {
      s += indent + "yield %" + std::to_string(last) + "\n";
      if (depth <= 64) indent.resize(indent.size() - 2);
      s += indent + "}\n";
      last = yields[d];
    }
    s += "  return %" + std::to_string(last) + "\n}\n";
    return s;
  };
  std::string ok = nested(64);
  CHECK(roundTrip(ok) == ok);
  CHECK(parseError(nested(65)).find("loops are nested more than 64 deep") != std::string::npos);
  CHECK(parseError(nested(100000)).find("loops are nested more than 64 deep") != std::string::npos);
}

TEST_CASE("loop IR: truncations and mutations never crash") {
  irtext::ParsedCounts parsed = irtext::checkTruncationsAndMutations(
      kLoopMlp, {0x2545F4914F6CDD1DULL, 3000, 3, 6, "%@=,:()[]{}-0123456789\n _abdilopy"});
  CHECK(parsed.prefixes > 0);   // prefixes ending after a whole declaration parse
  CHECK(parsed.mutations > 0);  // some mutations (a changed value id, ...) still parse
}
