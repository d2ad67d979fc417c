// backend/Tensor: the buffer pool (reuse by size, zero-fill on request,
// alignment) and uninitialised tensors.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "backend/Tensor.h"

using gsl::backend::Tensor;
using gsl::backend::tensorPoolStats;
using gsl::ir::DType;
using gsl::ir::TensorType;

TEST_CASE("Tensor pool: a freed large buffer is reused for the next tensor of its size, zero-filled again") {
  const TensorType t{DType::F32, {512, 513}};  // 1 MiB and a bit: pooled
  const void* first = nullptr;
  {
    Tensor a(t);
    first = a.raw();
    for (int64_t i = 0; i < a.size(); ++i) a.f32()[i] = 7.0f;
  }
  const auto before = tensorPoolStats();
  Tensor b(t);
  const auto after = tensorPoolStats();
  CHECK(b.raw() == first);
  CHECK(after.reused == before.reused + 1);
  CHECK(after.allocated == before.allocated);
  bool zero = true;
  for (int64_t i = 0; i < b.size(); ++i) zero = zero && b.f32()[i] == 0.0f;
  CHECK(zero);
}

TEST_CASE("Tensor pool: buffers in use are never handed out twice; sizes are kept apart") {
  const TensorType t{DType::I32, {100000}};
  std::vector<Tensor> live;
  for (int i = 0; i < 4; ++i) live.emplace_back(t);
  for (int i = 0; i < 4; ++i)
    for (int j = i + 1; j < 4; ++j) CHECK(live[i].raw() != live[j].raw());
  const void* freed = live[0].raw();
  live.erase(live.begin());
  Tensor other(TensorType{DType::I32, {100016}});  // another size: not the freed buffer
  CHECK(other.raw() != freed);
  Tensor same = Tensor::uninitialized(t);  // the freed one
  CHECK(same.raw() == freed);
  CHECK(same.size() == 100000);
}

TEST_CASE("Tensor buffers are 64-byte aligned, small and large, and copies share them") {
  for (int64_t n : {1, 3, 17, 16384, 16385, 300000}) {
    Tensor a = Tensor::uninitialized(TensorType{DType::F32, {n}});
    CHECK(reinterpret_cast<uintptr_t>(a.raw()) % 64 == 0);
    CHECK(a.size() == n);
    Tensor b = a;
    CHECK(b.raw() == a.raw());
  }
  Tensor s = Tensor::scalarF32(2.5f);
  CHECK(s.item() == 2.5);
  Tensor e(TensorType{DType::F32, {0}});
  CHECK(e.size() == 0);
  CHECK(e.defined());
}
