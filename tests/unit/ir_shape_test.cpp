// ir::localShape, blocksPerDim and globalShape: the one local-shape rule
// the partitioner, the runtime and the REPL share.
#include <doctest/doctest.h>

#include "ir/Module.h"

using namespace gsl::ir;

namespace {

Module meshModule() {
  Module m;
  m.np = 8;
  Mesh mesh;
  mesh.name = "m";
  mesh.axes = {{"data", 2}, {"model", 4}};
  m.meshes.push_back(mesh);
  return m;
}

Sharding shard(std::vector<std::vector<std::string>> dims, std::vector<std::string> partial = {}) {
  return gsl::ir::Sharding::fromNames("m", dims, partial);
}

}  // namespace

TEST_CASE("localShape divides each split dim by its axes; globalShape undoes it") {
  Module m = meshModule();
  TensorType t{DType::F32, {16, 8}};
  CHECK(localShape(m, t, std::nullopt) == Shape{16, 8});
  CHECK(localShape(m, t, Sharding::replicated("", 2)) == Shape{16, 8});
  CHECK(localShape(m, t, shard({{}, {}}, {"model"})) == Shape{16, 8});  // partial: whole shape
  CHECK(localShape(m, t, shard({{"data"}, {}})) == Shape{8, 8});
  CHECK(localShape(m, t, shard({{}, {"model"}})) == Shape{16, 2});
  CHECK(localShape(m, t, shard({{"model"}, {"data"}})) == Shape{4, 4});
  CHECK(localShape(m, t, shard({{"data", "model"}, {}})) == Shape{2, 8});
  CHECK(blocksPerDim(m, t, shard({{"data", "model"}, {}})) == std::vector<int64_t>{8, 1});
  CHECK(blocksPerDim(m, t, std::nullopt) == std::vector<int64_t>{1, 1});

  for (const auto& s : {shard({{"data"}, {}}), shard({{"model"}, {"data"}}), shard({{"data", "model"}, {}})}) {
    TensorType local{DType::F32, localShape(m, t, s)};
    CHECK(globalShape(m, local, s) == t.shape);
  }
  // A scalar has no dims to split.
  CHECK(localShape(m, TensorType{DType::I32, {}}, Sharding::replicated("m", 0)) == Shape{});
}

TEST_CASE("localShape pads a dim its blocks do not divide (docs/sharding.md, Uneven dims)") {
  Module m = meshModule();
  TensorType t{DType::F32, {11, 6, 3}};
  // 11 rows over model (4): blocks of 3, one padding row; 3 over data (2):
  // blocks of 2, one padding row.
  CHECK(localShape(m, t, shard({{"model"}, {}, {"data"}})) == Shape{3, 6, 2});
  CHECK(paddingPerDim(m, t, shard({{"model"}, {}, {"data"}})) == std::vector<int64_t>{1, 0, 1});
  CHECK(isPadded(m, t, shard({{"model"}, {}, {"data"}})));
  // 11 over (data, model) = 8 blocks: 2 rows each, 5 padding rows (the last
  // three blocks hold padding only or partly).
  CHECK(localShape(m, t, shard({{"data", "model"}, {}, {}})) == Shape{2, 6, 3});
  CHECK(paddingPerDim(m, t, shard({{"data", "model"}, {}, {}})) == std::vector<int64_t>{5, 0, 0});
  // A dim smaller than its blocks: one row each.
  CHECK(localShape(m, TensorType{DType::F32, {2}}, shard({{"model"}})) == Shape{1});
  // Even splits pad nothing.
  CHECK(!isPadded(m, TensorType{DType::F32, {8, 6}}, shard({{"model"}, {"data"}})));
  CHECK(paddingPerDim(m, TensorType{DType::F32, {8, 6}}, std::nullopt) == std::vector<int64_t>{0, 0});
}
