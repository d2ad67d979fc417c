// runtime::localBlock on dims its blocks do not divide: each rank's block
// has ceil(size / blocks) rows, the rows past the dim's end zeros
// (docs/sharding.md, "Uneven dims").
#include <doctest/doctest.h>

#include <cstring>

#include "runtime/Distribute.h"

using namespace gsl;

namespace {

ir::Module meshModule(int64_t a, int64_t b) {
  ir::Module m;
  m.np = a * b;
  ir::Mesh mesh;
  mesh.name = "m";
  mesh.axes = {{"a", a}, {"b", b}};
  m.meshes.push_back(mesh);
  return m;
}

ir::Sharding shard(std::vector<std::vector<std::string>> dims) {
  return gsl::ir::Sharding::fromNames("m", dims);
}

std::vector<float> values(const backend::Tensor& t) {
  std::vector<float> v((size_t)t.size());
  if (!v.empty()) std::memcpy(v.data(), t.raw(), v.size() * 4);
  return v;
}

backend::Tensor iota(const ir::Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  std::vector<float> v((size_t)n);
  for (int64_t i = 0; i < n; ++i) v[(size_t)i] = (float)(i + 1);
  return backend::Tensor::fromF32(s, v);
}

}  // namespace

TEST_CASE("localBlock: a padded row dim (5 rows over 2 ranks: blocks of 3)") {
  ir::Module m = meshModule(2, 1);
  backend::Tensor g = iota({5, 2});
  auto s = shard({{"a"}, {}});
  backend::Tensor r0 = runtime::localBlock(m, g, s, 0), r1 = runtime::localBlock(m, g, s, 1);
  CHECK(r0.type().shape == ir::Shape{3, 2});
  CHECK(values(r0) == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(r1.type().shape == ir::Shape{3, 2});
  CHECK(values(r1) == std::vector<float>{7, 8, 9, 10, 0, 0});  // the last row is padding
}

TEST_CASE("localBlock: both dims padded on a 2 x 3 mesh, and a block of padding only") {
  ir::Module m = meshModule(2, 3);
  backend::Tensor g = iota({3, 4});  // rows over a (2): blocks of 2; columns over b (3): blocks of 2
  auto s = shard({{"a"}, {"b"}});
  // rank 5 = (a 1, b 2): row 2 (+1 padding row), columns 4:6 (all padding)
  backend::Tensor r5 = runtime::localBlock(m, g, s, 5);
  CHECK(r5.type().shape == ir::Shape{2, 2});
  CHECK(values(r5) == std::vector<float>{0, 0, 0, 0});
  // rank 4 = (a 1, b 1): row 2, columns 2:4
  CHECK(values(runtime::localBlock(m, g, s, 4)) == std::vector<float>{11, 12, 0, 0});
  // rank 0 = (a 0, b 0): rows 0:2, columns 0:2
  CHECK(values(runtime::localBlock(m, g, s, 0)) == std::vector<float>{1, 2, 5, 6});
  // 3 rows over (a, b) = 6 blocks of 1 row: ranks 3..5 hold padding only.
  auto flat = shard({{"a", "b"}, {}});
  CHECK(values(runtime::localBlock(m, g, flat, 2)) == std::vector<float>{9, 10, 11, 12});
  CHECK(values(runtime::localBlock(m, g, flat, 3)) == std::vector<float>{0, 0, 0, 0});
}
