#include "backend/Random.h"

#include <cmath>

#include "support/BF16.h"
#include "support/Diagnostics.h"

namespace gsl::backend {

uint64_t hashName(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a 64 offset basis
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;  // FNV-1a 64 prime
  }
  return h;
}

// Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as
// easy as 1, 2, 3", SC11), with the constants of Random123.
void philox(uint64_t key, uint64_t stream, uint64_t index, uint32_t out[4]) {
  constexpr uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u;
  constexpr uint32_t W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
  uint32_t c0 = (uint32_t)index, c1 = (uint32_t)(index >> 32);
  uint32_t c2 = (uint32_t)stream, c3 = (uint32_t)(stream >> 32);
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += W0;
      k1 += W1;
    }
    uint64_t p0 = (uint64_t)M0 * c0;
    uint64_t p1 = (uint64_t)M1 * c2;
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    uint32_t n0 = hi1 ^ c1 ^ k0;
    uint32_t n1 = lo1;
    uint32_t n2 = hi0 ^ c3 ^ k1;
    uint32_t n3 = lo0;
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

static constexpr double kTwoPow24Inv = 1.0 / 16777216.0;  // 2^-24

float uniformAt(uint64_t key, uint64_t stream, uint64_t index) {
  uint32_t o[4];
  philox(key, stream, index, o);
  return (float)((double)(o[0] >> 8) * kTwoPow24Inv);
}

float normalAt(uint64_t key, uint64_t stream, uint64_t index) {
  uint32_t o[4];
  philox(key, stream, index, o);
  double u1 = ((double)(o[0] >> 8) + 1.0) * kTwoPow24Inv;  // (0, 1]: log is finite
  double u2 = (double)(o[1] >> 8) * kTwoPow24Inv;          // [0, 1)
  const double twoPi = 6.283185307179586476925286766559;
  double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(twoPi * u2);
  return (float)z;
}

uint64_t randomOpStream(int64_t seedOperand) {
  return hashName("random_uniform") ^ ((uint64_t)seedOperand * 0x9E3779B97F4A7C15ULL);
}

uint64_t dropoutStream(int64_t site, int64_t step) {
  const uint64_t word = ((uint64_t)(uint32_t)step << 32) | (uint64_t)(uint32_t)site;
  return hashName("dropout") ^ (word * 0x9E3779B97F4A7C15ULL);
}

Tensor initParam(const ir::Param& p, uint64_t seed) {
  GSL_ASSERT(p.type.sizeFits(), "initParam: param @" + p.name + " is too large");
  Tensor t(p.type);
  const int64_t n = t.size();
  const uint64_t stream = hashName(p.name);
  const ir::ParamInit& init = p.init;

  // Value of global element i, as double.
  auto value = [&](int64_t i) -> double {
    switch (init.kind) {
      case ir::ParamInit::Zeros: return 0.0;
      case ir::ParamInit::Ones: return 1.0;
      case ir::ParamInit::Normal: return init.a * (double)normalAt(seed, stream, (uint64_t)i);
      case ir::ParamInit::Uniform:
        return init.a + (init.b - init.a) * (double)uniformAt(seed, stream, (uint64_t)i);
      case ir::ParamInit::Glorot: break;
    }
    return 0.0;
  };
  double limit = 0;
  if (init.kind == ir::ParamInit::Glorot) {
    // A stacked param (a param group's member) has one layer's fans.
    const Shape s(p.type.shape.begin() + std::min<size_t>(init.stacked, p.type.shape.size()), p.type.shape.end());
    double fanIn = 1, fanOut = 1;
    if (s.size() == 1) {
      fanIn = fanOut = (double)s[0];
    } else if (s.size() >= 2) {
      fanOut = (double)s.back();
      for (size_t d = 0; d + 1 < s.size(); ++d) fanIn *= (double)s[d];
    }
    limit = fanIn + fanOut > 0 ? std::sqrt(6.0 / (fanIn + fanOut)) : 0.0;
  }
  auto elem = [&](int64_t i) -> double {
    if (init.kind == ir::ParamInit::Glorot)
      return -limit + 2.0 * limit * (double)uniformAt(seed, stream, (uint64_t)i);
    return value(i);
  };

  switch (p.type.dtype) {
    case DType::F32: {
      float* d = t.f32();
      for (int64_t i = 0; i < n; ++i) d[i] = (float)elem(i);
      break;
    }
    case DType::I32: {
      int32_t* d = t.i32();
      for (int64_t i = 0; i < n; ++i) d[i] = (int32_t)elem(i);
      break;
    }
    case DType::Bool: {
      int32_t* d = t.i32();
      for (int64_t i = 0; i < n; ++i) d[i] = elem(i) != 0.0 ? 1 : 0;
      break;
    }
    case DType::BF16: {  // params are f32; kept total for any future bf16 initialiser
      uint16_t* d = t.bf16();
      for (int64_t i = 0; i < n; ++i) d[i] = f32ToBF16((float)elem(i));
      break;
    }
  }
  return t;
}

}  // namespace gsl::backend
