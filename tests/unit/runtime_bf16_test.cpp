// bf16 collectives on thread ranks: they send bf16 (2 bytes an element), so
// the bytes the communicator counts at run time are half of f32's for the
// same op and shape, and their values are those of the f32 collective on
// the same (bf16-representable) inputs, rounded once: all_reduce and
// reduce_scatter sum in f32 in member order.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "backend/Kernels.h"
#include "ir/Function.h"
#include "ir/OpTable.h"
#include "runtime/ThreadComm.h"
#include "support/BF16.h"

using namespace gsl;
using namespace gsl::backend;
using ir::AttrMap;
using ir::DType;
using ir::OpKind;
using ir::Shape;
using ir::TensorType;

namespace {

ir::Mesh mesh4() {
  ir::Mesh m;
  m.name = "m";
  m.axes.push_back({"x", 4});
  return m;
}

// Rank r's input: multiples of 1/8 in [-8, 8) plus r/4, exact in bf16 and
// with sums over 4 ranks exact in f32 (so f32 and bf16 runs agree exactly
// where the bf16 result is representable, and within one rounding
// otherwise).
Tensor input(DType dt, const Shape& s, int rank) {
  Tensor f(TensorType{DType::F32, s});
  for (int64_t i = 0; i < f.size(); ++i) f.f32()[i] = (float)((i * 37 + rank * 11) % 128 - 64) / 8.0f + rank / 4.0f;
  if (dt == DType::F32) return f;
  Tensor b(TensorType{DType::BF16, s});
  narrowBF16(f.f32(), b.bf16(), f.size());
  return b;
}

struct Run {
  std::vector<Tensor> out;            // per rank
  std::vector<CommStats> stats;       // per rank
};

Run run(OpKind k, DType dt, const Shape& s, AttrMap at) {
  const ir::Mesh m = mesh4();
  at.set("mesh", std::string("m"));
  at.set("axes", std::vector<int64_t>{0});
  ir::Function f;
  ir::Value* x = f.addArg(TensorType{dt, s});
  TensorType out;
  std::string err = ir::inferType(k, {x->type}, at, out);
  REQUIRE_MESSAGE(err.empty(), err);
  ir::Op* op = f.append(k, {x}, at, out);
  op->groups = std::make_shared<const ir::CollectiveGroups>(m, op->attrs.getInts("axes"));
  Run r;
  r.out.resize(4);
  r.stats.resize(4);
  runtime::runRanksOrThrow(4, [&](int rank, Communicator& comm) {
    KernelContext ctx;
    ctx.rank = rank;
    ctx.comm = &comm;
    ctx.mesh = [&](const std::string&) -> const ir::Mesh& { return m; };
    r.out[rank] = evalOp(*op, {input(dt, s, rank)}, ctx);
    r.stats[rank] = comm.stats;
  });
  return r;
}

}  // namespace

TEST_CASE("bf16 collectives send half the bytes of f32 and give the f32 result rounded") {
  struct C {
    OpKind k;
    AttrMap at;
    const char* name;
  };
  auto with = [](std::initializer_list<std::pair<const char*, ir::Attr>> kv) {
    AttrMap a;
    for (auto& [key, v] : kv) a.set(key, v);
    return a;
  };
  const std::vector<C> cases = {
      {OpKind::AllReduce, with({{"reduce", ReduceOp::Sum}}), "all_reduce"},
      {OpKind::AllReduce, with({{"reduce", ReduceOp::Max}}), "all_reduce"},
      {OpKind::AllGather, with({{"n", int64_t(4)}, {"dim", int64_t(1)}}), "all_gather"},
      {OpKind::ReduceScatter, with({{"n", int64_t(4)}, {"dim", int64_t(1)}}), "reduce_scatter"},
      {OpKind::AllToAll, with({{"n", int64_t(4)}, {"split_dim", int64_t(0)}, {"concat_dim", int64_t(1)}}),
       "all_to_all"},
  };
  const Shape s = {8, 12};
  for (const C& c : cases) {
    INFO(c.name << " case " << (&c - cases.data()));
    Run f = run(c.k, DType::F32, s, c.at);
    Run b = run(c.k, DType::BF16, s, c.at);
    for (int rank = 0; rank < 4; ++rank) {
      const uint64_t fb = f.stats[rank].bytesSent.at(c.k), bb = b.stats[rank].bytesSent.at(c.k);
      CHECK(fb > 0);
      CHECK(bb * 2 == fb);
      REQUIRE(b.out[rank].shape() == f.out[rank].shape());
      for (int64_t i = 0; i < f.out[rank].size(); ++i) {
        INFO("rank " << rank << " element " << i);
        CHECK(bf16ToF32(b.out[rank].bf16()[i]) == roundBF16(f.out[rank].f32()[i]));
      }
    }
  }
}

TEST_CASE("bf16 all_reduce accumulates in f32: 256 + 1 + 1 + 1 is not stuck at 256") {
  // In bf16 arithmetic 256 + 1 rounds back to 256; summed in f32 and
  // rounded once the result is 259 -> 260 (the nearest even bf16).
  const ir::Mesh m = mesh4();
  AttrMap at;
  at.set("mesh", std::string("m"));
  at.set("axes", std::vector<int64_t>{0});
  at.set("reduce", ReduceOp::Sum);
  ir::Function f;
  ir::Value* x = f.addArg(TensorType{DType::BF16, {1}});
  TensorType out;
  REQUIRE(ir::inferType(OpKind::AllReduce, {x->type}, at, out).empty());
  ir::Op* op = f.append(OpKind::AllReduce, {x}, at, out);
  op->groups = std::make_shared<const ir::CollectiveGroups>(m, op->attrs.getInts("axes"));
  std::vector<float> got(4);
  runtime::runRanksOrThrow(4, [&](int rank, Communicator& comm) {
    KernelContext ctx;
    ctx.rank = rank;
    ctx.comm = &comm;
    ctx.mesh = [&](const std::string&) -> const ir::Mesh& { return m; };
    Tensor in(TensorType{DType::BF16, {1}});
    in.bf16()[0] = f32ToBF16(rank == 0 ? 256.0f : 1.0f);
    got[rank] = (float)evalOp(*op, {in}, ctx).at(0);
  });
  for (float v : got) CHECK(v == 260.0f);
}
