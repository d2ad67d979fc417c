// runtime/HostWalk: the host-script walk without running (the memory
// estimate and the REPL use it; the run shares its HostWalker): how each
// host variable lies, and one per-rank program per distinct input sharding.
#include <doctest/doctest.h>

#include <set>

#include "frontend/Frontend.h"
#include "runtime/HostWalk.h"

using namespace gsl;

namespace {

struct Compiled {
  SourceManager sm;
  Diagnostics diags{sm};
  std::unique_ptr<frontend::CheckedProgram> prog;
};

std::unique_ptr<Compiled> compile(const std::string& text, int64_t np) {
  auto c = std::make_unique<Compiled>();
  frontend::Options o;
  o.np = np;
  c->prog = frontend::compileSource("walk.gsl", text, o, c->sm, c->diags);
  return c;
}

// Counts the thunks the walk visits and the distinct programs it gets.
class CountingWalk : public runtime::ShardingWalk {
 public:
  using ShardingWalk::ShardingWalk;
  int thunks = 0;
  std::set<const ir::Function*> programs;

 protected:
  void visit(const frontend::Thunk&, const ir::Function& f, bool, const std::vector<std::optional<ir::Sharding>>&) override {
    ++thunks;
    programs.insert(&f);
  }
};

}  // namespace

TEST_CASE("the walk finds each host variable's sharding as the run gives it") {
  auto c = compile(R"(
mesh m = [data: 2, model: 2]
fn twice(x: f32[8, 4]) -> f32[8, 4] {
  return x + x
}
fn main() {
  let a = load("a.npy") : f32[8, 4] @shard(m, [data, _])
  let b = load("b.npy") : f32[8, 4]
  let c = twice(a)
  let d = twice(b)
  for i in 0..3 {
    let e = twice(c)
  }
  print(sum(d))
}
)",
                   4);
  REQUIRE(c->prog);
  runtime::PerRankPrograms programs(*c->prog->module);
  CountingWalk walk(programs);
  const auto& vars = walk.walk(c->prog->host.body);
  auto text = [&](const std::string& n) {
    const auto& s = vars.at(n).sharding;
    return s && !s->isReplicated() ? s->str() : std::string("whole");
  };
  CHECK(text("a") == "@shard(m, [data, _])");  // load: as annotated
  CHECK(text("b") == "whole");
  CHECK(text("c") == "@shard(m, [data, _])");  // a thunk's result: as its program leaves it
  CHECK(text("e") == "@shard(m, [data, _])");  // loop bodies are walked once
  CHECK(text("i") == "whole");
  CHECK(vars.at("i").type == ir::TensorType{ir::DType::I32, {}});
  CHECK(vars.at("c").thunk != nullptr);
  CHECK(vars.at("c").inputs.size() == 1);
  CHECK(vars.at("c").type == ir::TensorType{ir::DType::F32, {8, 4}});
  // a, b (loads), c, d, the loop's bounds, e, print's sum: one visit each.
  CHECK(walk.thunks == 8);

  // The same thunk for inputs lying the same way is one program; another
  // sharding of the inputs is another.
  const frontend::Thunk& tc = c->prog->host.body[2].value;
  std::vector<std::optional<ir::Sharding>> split{vars.at("a").sharding}, whole{std::nullopt};
  const ir::Function& p1 = programs.perRank(tc, split, false);
  CHECK(&programs.perRank(tc, split, false) == &p1);
  CHECK(&programs.perRank(tc, whole, false) != &p1);
  CHECK(&programs.perRank(tc, split, true) != &p1);
}
