// ir/Verifier: good and bad modules built in code.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <string>

#include "ir/Verifier.h"

using namespace gsl::ir;

namespace {

TensorType f32(Shape s) { return TensorType{DType::F32, std::move(s)}; }

Sharding shard(const std::string& mesh, std::vector<std::vector<std::string>> dims,
               std::vector<std::string> partial = {}) {
  return gsl::ir::Sharding::fromNames(mesh, dims, partial);
}

AttrMap attrs(std::initializer_list<std::pair<const char*, Attr>> kv) {
  AttrMap m;
  for (auto& [k, v] : kv) m.set(k, v);
  return m;
}

// np = 4, mesh @m = [data: 2, model: 2], param @w : f32[8, 16] sharded,
// func @f(%0: f32[4, 8]) -> f32[4, 16]: matmul(x, param w), relu, sum.
std::unique_ptr<Module> goodModule() {
  auto m = std::make_unique<Module>();
  m->np = 4;
  m->meshes.push_back(Mesh{"m", {{"data", 2}, {"model", 2}}});
  Param w;
  w.name = "w";
  w.type = f32({8, 16});
  w.sharding = shard("m", {{}, {"model"}});
  w.init.kind = ParamInit::Normal;
  w.init.a = 0.02;
  m->params.push_back(w);
  auto f = std::make_unique<Function>();
  f->name = "f";
  Value* x = f->addArg(f32({4, 8}));
  x->sharding = shard("m", {{"data"}, {}});
  Op* p = f->append(OpKind::Param, {}, attrs({{"name", std::string("w")}}), f32({8, 16}));
  p->result->sharding = w.sharding;
  Op* mm = f->append(OpKind::MatMul, {x, p->result}, {}, f32({4, 16}));
  mm->result->sharding = shard("m", {{"data"}, {"model"}});
  Op* r = f->append(OpKind::Relu, {mm->result}, {}, f32({4, 16}));
  Op* s = f->append(OpKind::Sum, {r->result}, attrs({{"axis", std::vector<int64_t>{1}}, {"keepdims", false}}),
                    f32({4}));
  f->results = {r->result, s->result};
  f->resultShardings = {shard("m", {{"data"}, {}}), std::nullopt};
  m->functions.push_back(std::move(f));
  return m;
}

Function& fn(Module& m) { return *m.functions[0]; }

}  // namespace

TEST_CASE("verifier: a well-formed module passes") {
  auto m = goodModule();
  CHECK(verify(*m) == "");
  verifyOrDie(*m, "test");  // must not abort
  Module empty;
  CHECK(verify(empty) == "");
}

TEST_CASE("verifier: SSA violations") {
  SUBCASE("use before definition") {
    auto m = goodModule();
    std::swap(fn(*m).ops[1], fn(*m).ops[2]);  // relu now runs before the matmul
    CHECK(verify(*m) == "function @f: %3 = relu: operand 0 (%2) is not defined before use in this function");
  }
  SUBCASE("operand from another function") {
    auto m = goodModule();
    auto g = std::make_unique<Function>();
    g->name = "g";
    Value* y = g->addArg(f32({4, 16}));
    g->append(OpKind::Neg, {fn(*m).ops[1]->result}, {}, f32({4, 16}));
    g->results = {y};
    m->functions.push_back(std::move(g));
    CHECK(verify(*m) == "function @g: %1 = neg: operand 0 (%2) is not defined before use in this function");
  }
  SUBCASE("result not defined in the function") {
    auto m = goodModule();
    Function other;
    Value* stray = other.addArg(f32({4}));
    fn(*m).results[1] = stray;
    CHECK(verify(*m) == "function @f: result 1 (%0) is not defined in this function");
  }
  SUBCASE("null operand") {
    auto m = goodModule();
    fn(*m).ops[2]->operands[0] = nullptr;
    CHECK(verify(*m) == "function @f: %3 = relu: operand 0 is null");
  }
}

TEST_CASE("verifier: operand counts, attributes and type rules") {
  SUBCASE("too few operands") {
    auto m = goodModule();
    fn(*m).ops[1]->operands.pop_back();
    CHECK(verify(*m) == "function @f: %2 = matmul: matmul takes 2 operands, got 1");
  }
  SUBCASE("variadic op with no operands") {
    auto m = goodModule();
    fn(*m).append(OpKind::Concat, {}, attrs({{"axis", int64_t(0)}}), f32({1}));
    CHECK(verify(*m) == "function @f: %5 = concat: concat takes at least 1 operand, got 0");
  }
  SUBCASE("missing required attribute") {
    auto m = goodModule();
    Value* r = fn(*m).ops[2]->result;
    fn(*m).append(OpKind::Reshape, {r}, {}, f32({64}));
    CHECK(verify(*m) == "function @f: %5 = reshape: reshape needs attribute 'shape' (an integer list)");
  }
  SUBCASE("attribute of the wrong kind") {
    auto m = goodModule();
    fn(*m).ops[3]->attrs.set("keepdims", int64_t(1));
    CHECK(verify(*m) == "function @f: %4 = sum: attribute 'keepdims' of sum must be true or false, got 1");
  }
  SUBCASE("defaulted attribute may be absent") {
    auto m = goodModule();
    fn(*m).ops[3]->attrs.erase("keepdims");
    CHECK(verify(*m) == "");
  }
  SUBCASE("wrong result type") {
    auto m = goodModule();
    fn(*m).ops[2]->result->type = f32({4, 15});
    CHECK(verify(*m) == "function @f: %3 = relu: result type is f32[4, 15] but the type rule gives f32[4, 16]");
  }
  SUBCASE("type rule error") {
    auto m = goodModule();
    Value* x = fn(*m).args[0];
    Value* r = fn(*m).ops[2]->result;
    fn(*m).append(OpKind::Add, {x, r}, {}, f32({4, 16}));
    CHECK(verify(*m) == "function @f: %5 = add: shapes f32[4, 8] and f32[4, 16] cannot be broadcast together");
  }
  SUBCASE("negative dimension") {
    auto m = goodModule();
    m->params[0].type = f32({8, -16});
    CHECK(verify(*m) == "param @w: type f32[8, -16] has a negative dimension");
  }
}

TEST_CASE("verifier: param ops") {
  SUBCASE("undeclared param") {
    auto m = goodModule();
    fn(*m).ops[0]->attrs.set("name", std::string("nope"));
    CHECK(verify(*m) == "function @f: %1 = param: names an undeclared param @nope");
  }
  SUBCASE("param of another type") {
    auto m = goodModule();
    m->params[0].type = f32({8, 32});
    m->params[0].sharding.reset();
    CHECK(verify(*m) == "function @f: %1 = param: result type is f32[8, 16] but param @w is f32[8, 32]");
  }
  SUBCASE("missing name") {
    auto m = goodModule();
    fn(*m).ops[0]->attrs.erase("name");
    CHECK(verify(*m) == "function @f: %1 = param: param needs a string attribute 'name'");
  }
  SUBCASE("declared twice") {
    auto m = goodModule();
    m->params.push_back(m->params[0]);
    CHECK(verify(*m) == "param @w is declared twice");
  }
}

TEST_CASE("verifier: shardings") {
  SUBCASE("undeclared mesh") {
    auto m = goodModule();
    m->params[0].sharding->mesh = gsl::Symbol("q");
    CHECK(verify(*m) == "param @w: sharding @shard(q, [_, model]) names an undeclared mesh 'q'");
  }
  SUBCASE("wrong number of entries") {
    auto m = goodModule();
    fn(*m).args[0]->sharding = shard("m", {{"data"}});
    CHECK(verify(*m) == "function @f: argument %0: sharding @shard(m, [data]) has 1 entries for a value of rank 2");
  }
  SUBCASE("unknown axis") {
    auto m = goodModule();
    fn(*m).ops[1]->result->sharding = shard("m", {{"data"}, {"pipe"}});
    CHECK(verify(*m) ==
          "function @f: %2 = matmul: sharding @shard(m, [data, pipe]) names axis 'pipe', which mesh @m does not have");
  }
  SUBCASE("axis used twice") {
    auto m = goodModule();
    fn(*m).ops[1]->result->sharding = shard("m", {{"data"}, {"model", "data"}});
    CHECK(verify(*m) == "function @f: %2 = matmul: sharding @shard(m, [data, (model, data)]) uses mesh axis 'data' twice");
  }
  SUBCASE("axis both split and partial") {
    auto m = goodModule();
    fn(*m).ops[1]->result->sharding = shard("m", {{"data"}, {}}, {"data"});
    CHECK(verify(*m) == "function @f: %2 = matmul: sharding @shard(m, [data, _]) partial(data) uses mesh axis 'data' twice");
  }
  SUBCASE("partial over model is fine") {
    auto m = goodModule();
    fn(*m).ops[1]->result->sharding = shard("m", {{"data"}, {}}, {"model"});
    CHECK(verify(*m) == "");
  }
  SUBCASE("result sharding") {
    auto m = goodModule();
    fn(*m).resultShardings[1] = shard("m", {{}, {}});
    CHECK(verify(*m) == "function @f: result 1: sharding @shard(m, [_, _]) has 2 entries for a value of rank 1");
  }
  SUBCASE("bad meshes") {
    auto m = goodModule();
    m->meshes.push_back(Mesh{"m", {{"x", 4}}});
    CHECK(verify(*m) == "mesh @m is declared twice");
    m->meshes.back().name = "n";
    m->meshes.back().axes[0].size = 0;
    CHECK(verify(*m) == "mesh @n axis 'x' has size 0 (must be >= 1)");
  }
}

TEST_CASE("verifyOrDie aborts with an internal error naming the pass") {
  auto m = goodModule();
  fn(*m).ops[2]->result->type = f32({1});
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // Undo doctest's crash handlers so the child just aborts, silently.
    std::signal(SIGABRT, SIG_DFL);
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, 1);
    dup2(fds[1], 2);
    close(fds[0]);
    verifyOrDie(*m, "my-pass");
    _exit(0);  // not reached
  }
  close(fds[1]);
  std::string err;
  char buf[512];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) err.append(buf, (size_t)n);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGABRT);
  CHECK(err.find("internal error: invalid IR after my-pass: function @f: %3 = relu: result type is f32[1]") !=
        std::string::npos);
}
