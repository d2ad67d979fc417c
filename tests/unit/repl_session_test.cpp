// The REPL (repl/): sessions driven through runRepl with string streams,
// completion candidates, and the lexical helpers. The transcripts of whole
// sessions are compared in tests/repl/*.session; the terminal (libedit,
// history, Ctrl-C) is tested under tmux by tests/repl/terminal_test.sh.
#include <doctest/doctest.h>

#include <sstream>
#include <string>

#include "repl/Repl.h"
#include "repl/Session.h"
#include "repl/Text.h"

namespace {

std::string mlpPath() { return std::string(GSL_SOURCE_DIR) + "/examples/mlp.gsl"; }

std::string session(const std::string& input, const std::string& file = "", int64_t np = 4) {
  std::istringstream in(input);
  std::ostringstream out;
  gsl::repl::ReplOptions o;
  o.in = &in;
  o.out = &out;
  o.np = np;
  o.file = file;
  CHECK(gsl::repl::runRepl(o) == 0);
  return out.str();
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

size_t count(const std::string& s, const std::string& part) {
  size_t n = 0;
  for (size_t p = s.find(part); p != std::string::npos; p = s.find(part, p + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("repl: where w1 lives and why, and what another sharding would cost") {
  std::string out = session(":sharding w1\n:show w1\n:sharding mlp.h\n:try w1 @shard(m, [model, _])\n:cost mlp\n", mlpPath());
  INFO(out);
  CHECK(has(out, "loaded "));
  CHECK(has(out, "w1: @shard(m, [_, model]) annotated at " + mlpPath() + ":11:21"));
  // The picture: two column blocks, each held by two devices.
  CHECK(has(out, "|       0,2       |       1,3       |"));
  CHECK(has(out, "|  [0:64, 0:128]  | [0:64, 128:256] |"));
  // The chain of h back to the annotations of x and w1.
  CHECK(has(out, "mlp.h: @shard(m, [data, model])\n  <- relu(%2)\n  <- matmul(x, w1) from\n"));
  CHECK(has(out, "x @shard(m, [data, _]) annotated at " + mlpPath() + ":14:21"));
  // :try: the traffic grows (a reduce_scatter of the hidden layer's partial
  // sums joins the all_reduce); the session itself is unchanged.
  CHECK(has(out, "param w1: @shard(m, [_, model]) -> @shard(m, [model, _])"));
  CHECK(has(out, "all_reduce               1 call, 4,096 B   1 call, 4,096 B"));
  CHECK(has(out, "reduce_scatter                         -   1 call, 8,192 B"));
  CHECK(has(out, "bytes sent (all kinds)           4,096 B          12,288 B"));
  CHECK(has(out, "machine model: 100 GFLOP/s per rank, 10 GB/s per link, 5 us latency per collective call"));
  CHECK(has(out, "fn mlp, per rank (np = 4):\n  flops                            526,336\n"));
}

TEST_CASE("repl: no prompts without a terminal, unless echoing") {
  std::string out = session("1 + 2\n");
  CHECK(out == "3\ni32 (replicated)\n");
  std::istringstream in("let x = 2\nx * 3\n");
  std::ostringstream os;
  gsl::repl::ReplOptions o;
  o.in = &in;
  o.out = &os;
  o.echo = true;
  gsl::repl::runRepl(o);
  CHECK(os.str() == "gsl> let x = 2\nx: i32 (replicated)\ngsl> x * 3\n6\ni32 (replicated)\n");
}

TEST_CASE("repl: a failing input is dropped and the session goes on") {
  std::string out = session(
      "const D = 8\n"
      "param w: f32[D, Q] = zeros\n"  // error: Q
      "mesh m = [a: NP]\n"
      "param w: f32[D, D] @shard(m, [a, _]) = ones\n"
      "fn f(x: f32[D, D]) -> f32[D, D] {\n"
      "  let y = x @ w\n"
      "  return y\n"
      "}\n"
      "let v = random_uniform([D, D], 1) @shard(m, [_, a])\n"
      "v @ undefined\n"  // error
      "sum(f(v))\n"
      ":sharding f.y\n"
      ":np 3\n"  // 3 does not divide 8: the split dims are padded
      ":type v\n");
  INFO(out);
  CHECK(has(out, "<input 2>:1:17: error: unknown name 'Q'"));
  CHECK(has(out, "    param w: f32[D, Q] = zeros\n                    ^\n"));
  CHECK(has(out, "v: f32[8, 8] @shard(m, [_, a])"));
  CHECK(has(out, "<input 7>:1:5: error: unknown name 'undefined'"));  // a multi-line fn is one input
  CHECK(count(out, "error:") == 2);  // Q and undefined; :np 3 pads (docs/sharding.md, "Uneven dims")
  CHECK(has(out, "np = 3; m = [a: 3]"));
  CHECK(has(out, "f32[8, 8] @shard(m, [_, a])\n"));
  // w's split dim is contracted: y is a partial sum, replicated once reduced.
  CHECK(has(out, "f.y: replicated\n  <- matmul(x, w) from\n       x @shard(m, [_, a]) (propagated)\n"
                 "       w @shard(m, [a, _]) annotated at <input 4>:1:20\n"));
}

TEST_CASE("repl: multi-line input continues while a bracket is open") {
  std::string out = session(
      "mesh m = [a: NP]\n"
      "fn g(x: f32[4, 4]) -> f32[4, 4] {   # a ( in a comment does not count\n"
      "  let z = (x * 2) @shard(m, [a, _])\n"
      "  return z\n"
      "}\n"
      ":sharding g.x\n"
      ":spmd g\n");
  INFO(out);
  CHECK(has(out, "g.x: @shard(m, [a, _])\n  <- used by mul(x, %1) = z @shard(m, [a, _]) annotated at <input 2>:2:19\n"));
  CHECK(has(out, "   func @g("));
  CHECK(has(out, "# no collectives"));
}

TEST_CASE("repl: :spmd marks collectives, :ir prints the session's IR, :llvm answers") {
  std::string out = session(":spmd mlp\n:ir mlp\n:llvm mlp\n:cost nothere\n", mlpPath());
  INFO(out.substr(0, 4000));
  CHECK(has(out, ">>   %6 = all_reduce %5"));
  CHECK(has(out, "# collectives: 1 all_reduce"));
  CHECK(has(out, "func @mlp(%0: f32[32, 64] @shard(m, [data, _])) -> (f32[32, 64]) {"));
  CHECK((has(out, "define ") || has(out, "the LLVM JIT is not available")));
  CHECK(has(out, "error: no function 'nothere' (functions: mlp)"));
}

TEST_CASE("repl: host variables keep their values and shardings across inputs") {
  std::string out = session(
      "let x = random_uniform([32, 64], 7) * 2.0 - 1.0\n"
      "let y = mlp(x)\n"
      ":sharding y\n"
      "y = y * 0\n"
      "sum(y)\n"
      ":sharding y\n"
      ":show y\n",
      mlpPath());
  INFO(out);
  CHECK(has(out, "y: f32[32, 64] @shard(m, [data, _])"));
  CHECK(has(out, "0.0\nf32 (replicated)\n"));
  CHECK(has(out, "(argument x of fn mlp, called at <input 2>:1:13)"));
  CHECK(has(out, "y: @shard(m, [data, _])\n  <- mul(y, %1) from\n"
                 "       y @shard(m, [data, _]) (host variable y: its value before this assignment)\n"));
  CHECK(has(out, "|      0,1      |"));
}

TEST_CASE("repl: completion of commands, builtins and session names") {
  std::ostringstream out;
  gsl::repl::Session s(out, false, 4, {});
  s.load(mlpPath());
  size_t start = 0;
  auto c = s.complete(":sha", start);
  REQUIRE(c.size() == 1);
  CHECK(c[0] == ":sharding");
  CHECK(start == 0);
  c = s.complete("x = soft", start);
  REQUIRE(c.size() == 1);
  CHECK(c[0] == "softmax");
  CHECK(start == 4);
  c = s.complete(":sharding ml", start);
  CHECK(c == std::vector<std::string>{"mlp", "mlp.h", "mlp.return", "mlp.x"});
  c = s.complete(":show w", start);
  CHECK(c == std::vector<std::string>{"w1", "w2", "where"});
  c = s.complete("let a = mod", start);
  CHECK(c == std::vector<std::string>{"model"});  // a mesh axis
  c = s.complete(":s", start);
  CHECK(c == std::vector<std::string>{":sharding", ":show", ":spmd"});
}

TEST_CASE("repl: completion of param-group members and of lets in a loop body") {
  std::ostringstream out;
  gsl::repl::Session s(out, false, 4, {});
  s.handle("mesh m = [data: 2, model: 2]");
  s.handle("param blocks[3] {\n  w: f32[16, 16] @shard(m, [_, model]) = glorot\n  g: f32[16] = ones\n}");
  s.handle("fn net(x: f32[8, 16]) -> f32 {\n  let h = x\n  for l in 0..3 {\n    let u = relu(h @ blocks.w[l])\n"
           "    h = u @ transpose(blocks.w[l]) * blocks.g[l]\n  }\n  return sum(h)\n}");
  INFO(out.str());
  REQUIRE(out.str().find("error") == std::string::npos);
  size_t start = 0;
  auto c = s.complete(":show blocks.", start);
  CHECK(c == std::vector<std::string>{"blocks.g", "blocks.w"});
  c = s.complete(":sharding net.", start);
  CHECK(c == std::vector<std::string>{"net.h", "net.l", "net.return", "net.u", "net.x"});
  // The value the completion offers is found, inside its loop.
  out.str("");
  s.handle(":sharding net.u");
  CHECK(out.str().find("net.u: @shard(m, [_, model])") != std::string::npos);
  CHECK(out.str().find("inside the loop over l (3 iterations") != std::string::npos);
}

TEST_CASE("repl: -D applies to a const once it is declared, and names no const before") {
  std::ostringstream out;
  gsl::repl::Session s(out, false, 4, {{"K", 5}, {"UNUSED", 1}});
  s.handle("print(NP)");  // K and UNUSED name no const yet: no error
  s.handle("const K = 2");
  s.handle("print(K * 10)");
  CHECK(out.str() == "4\n50\n");
}

TEST_CASE("repl: :spmd marks and counts the collectives of the per-rank program") {
  std::string out = session(":spmd mlp\n", mlpPath());
  // mlp: x @ w1 is local, h @ w2 leaves a partial sum over `model`.
  CHECK(has(out, ">>   %"));
  CHECK(has(out, " = all_reduce "));
  size_t marked = count(out, ">>   %"), reduces = count(out, " = all_reduce ");
  CHECK(marked == reduces);
  CHECK(has(out, "# collectives: " + std::to_string(reduces) + " all_reduce\n"));
}

TEST_CASE("repl: :cost and :spmd show a pipeline's stages, microbatches, shifts and bubble") {
  // tests/repl/pipeline_train.gsl: 8 layers over S = 4 stages, M = 4
  // microbatches; per rank the state's row is f32[1, 2, 16] (128 B).
  const std::string file = std::string(GSL_SOURCE_DIR) + "/tests/repl/pipeline_train.gsl";
  const std::string schedule =
      "stages S = 4 (axis stage of mesh m), microbatches M = 4, rounds R = 1: M*R + S - 1 = 7 iterations, "
      "2 layers per stage per round\n";
  const std::string bubble = "predicted bubble fraction (S - 1)/(M*R + S - 1) = 3/7 = 0.43\n";
  const std::string fwd = "forward time loop, per iteration: 1 collective_permute of f32[1, 2, 16], 128 B; x 7 iterations = 896 B\n";
  // The training step: the forward and the backward pipeline (the
  // gradients' shift back: autodiff saves the rows the stages start from,
  // so the backward does not shift forward again); the same text in :cost
  // and :spmd.
  const std::string step = session(":cost step\n:spmd step\n", file);
  CHECK(count(step, "  " + schedule) == 2);
  CHECK(count(step, "  " + bubble) == 2);
  CHECK(count(step, "  " + fwd) == 2);
  CHECK(count(step,
              "  backward time loop, per iteration: 1 collective_permute of f32[1, 2, 16], 128 B; x 7 iterations = 896 B\n") == 2);
  CHECK(count(step, "  shifts per step: 14 collective_permute, 1,792 B (forward 896 B + backward 896 B)\n") == 2);
  CHECK(has(step, "\n#   " + bubble));  // :spmd's lines are comments
  // A function: its forward pipeline only; in rounds, R = 2 and the last
  // stage's row going back to the waiting microbatches.
  const std::string fn = session(":spmd loss\n:cost circular\n", file);
  CHECK(has(fn, "\n#   " + schedule + "#   " + bubble + "#   " + fwd + "#   shifts per call: 7 collective_permute, 896 B\n"));
  CHECK(has(fn,
            "\n  stages S = 4 (axis stage of mesh m), microbatches M = 4, rounds R = 2: M*R + S - 1 = 11 iterations, "
            "1 layer per stage per round\n"
            "  predicted bubble fraction (S - 1)/(M*R + S - 1) = 3/11 = 0.27\n"));
  // Not pipelined: no section.
  CHECK(!has(session(":cost mlp\n:spmd mlp\n", mlpPath()), "pipeline ("));
}

TEST_CASE("repl: lexical helpers") {
  using namespace gsl::repl;
  CHECK(openBrackets("fn f(x: f32[4]) -> f32[4] {") == 1);
  CHECK(openBrackets("print(\"(\")  # (") == 0);
  CHECK(openBrackets("let x = [1, (2") == 2);
  bool found = false;
  std::string t = blankMain("const A = 1\nfn main() {\n  print(\"}\")\n}\nconst B = 2\n", found);
  CHECK(found);
  CHECK(t == "const A = 1\n           \n            \n \nconst B = 2\n");
  CHECK(rankList({0, 2}) == "0,2");
  CHECK(rankList({0, 1, 2, 3, 8, 9}) == "0-3,8,9");
  CHECK(thousands(1234567) == "1,234,567");
  CHECK(matchingClose("@shard(m, [(a, b), _]) = x", 0, '(') == 22);
}
