// Writes a known checkpoint to argv[1] with runtime/Checkpoint and prints
// its canonical dump (the format read_safetensors.py prints) to stdout:
//   meta KEY=VALUE                       (metadata, sorted by key)
//   tensor NAME DTYPE [d0,d1,...] v...   (header order; f32 as 8 hex digits
//                                         of its bits, i32 decimal, bool 0/1)
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "runtime/Checkpoint.h"
#include "support/BF16.h"

using gsl::backend::DType;
using gsl::backend::Tensor;
using gsl::backend::TensorType;
using gsl::runtime::NamedTensor;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.safetensors\n", argv[0]);
    return 2;
  }
  Tensor mask(TensorType{DType::Bool, {2, 3}});
  for (int i = 0; i < 6; ++i) mask.i32()[i] = (i % 3 == 0) ? 1 : 0;
  Tensor bf16(TensorType{DType::BF16, {2, 2}});  // 1.0, -2.5, 0.1 (rounded), inf
  for (int i = 0; i < 4; ++i) bf16.bf16()[i] = gsl::f32ToBF16(std::vector<float>{1.0f, -2.5f, 0.1f, std::numeric_limits<float>::infinity()}[i]);
  Tensor big(TensorType{DType::F32, {3, 5, 7}});
  for (int64_t i = 0; i < big.size(); ++i) big.f32()[i] = (float)i * 0.25f - 10.0f;
  std::vector<NamedTensor> ts = {
      {"layers.0.w", Tensor::fromF32({2, 3}, {0.5f, -1.25f, 3.0f, 1e-30f, -0.0f, 65504.0f})},
      {"ids", Tensor::fromI32({4}, {std::numeric_limits<int32_t>::min(), -1, 0,
                                    std::numeric_limits<int32_t>::max()})},
      {"mask", mask},
      {"lr", Tensor::scalarF32(0.001f)},
      {"step", Tensor::scalarI32(1234)},
      {"done", Tensor::scalarBool(true)},
      {"empty", Tensor(TensorType{DType::F32, {0, 3}})},
      {"big", big},
      {"caf\xc3\xa9 \"quoted\"", Tensor::fromI32({1}, {7})},
      {"half", bf16},
  };
  std::map<std::string, std::string> meta = {
      {"format", "gsl"}, {"step", "1234"}, {"note", "tab\there \"q\" \\ \xc3\xa9"}};
  try {
    gsl::runtime::writeSafetensors(argv[1], ts, meta);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  for (const auto& [k, v] : meta) std::printf("meta %s=%s\n", k.c_str(), v.c_str());
  for (const NamedTensor& nt : ts) {
    const Tensor& t = nt.value;
    const char* dt = t.dtype() == DType::F32    ? "F32"
                     : t.dtype() == DType::I32  ? "I32"
                     : t.dtype() == DType::BF16 ? "BF16"
                                                : "BOOL";
    std::string shape = "[";
    for (size_t i = 0; i < t.shape().size(); ++i) shape += (i ? "," : "") + std::to_string(t.shape()[i]);
    shape += "]";
    std::printf("tensor %s %s %s", nt.name.c_str(), dt, shape.c_str());
    for (int64_t i = 0; i < t.size(); ++i) {
      if (t.dtype() == DType::F32) {
        uint32_t bits;
        std::memcpy(&bits, &t.f32()[i], 4);
        std::printf(" %08x", bits);
      } else if (t.dtype() == DType::BF16) {
        std::printf(" %04x", (unsigned)t.bf16()[i]);
      } else {
        std::printf(" %d", (int)t.i32()[i]);
      }
    }
    std::printf("\n");
  }
  return 0;
}
