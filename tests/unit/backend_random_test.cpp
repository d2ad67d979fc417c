// backend/Random: Philox4x32-10 known answers, distributions, param init.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>

#include "backend/Random.h"

using namespace gsl::backend;
using gsl::ir::Param;
using gsl::ir::ParamInit;

namespace {

// Random123's counter words (c0..c3) and key words (k0, k1) in terms of the
// (key, stream, index) API: index = c1:c0, stream = c3:c2, key = k1:k0.
void philoxWords(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1,
                 uint32_t out[4]) {
  philox(((uint64_t)k1 << 32) | k0, ((uint64_t)c3 << 32) | c2, ((uint64_t)c1 << 32) | c0, out);
}

Param makeParam(const char* name, gsl::ir::Shape shape, ParamInit::Kind k, double a = 0, double b = 0) {
  Param p;
  p.name = name;
  p.type = TensorType{DType::F32, std::move(shape)};
  p.init.kind = k;
  p.init.a = a;
  p.init.b = b;
  return p;
}

}  // namespace

TEST_CASE("random: FNV-1a 64 test vectors") {
  CHECK(hashName("") == 0xcbf29ce484222325ULL);
  CHECK(hashName("a") == 0xaf63dc4c8601ec8cULL);
  CHECK(hashName("foobar") == 0x85944171f73967e8ULL);
}

TEST_CASE("random: Philox4x32-10 known-answer vectors (Random123 kat_vectors)") {
  uint32_t o[4];
  philoxWords(0, 0, 0, 0, 0, 0, o);
  CHECK(o[0] == 0x6627e8d5u);
  CHECK(o[1] == 0xe169c58du);
  CHECK(o[2] == 0xbc57ac4cu);
  CHECK(o[3] == 0x9b00dbd8u);
  philoxWords(0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, o);
  CHECK(o[0] == 0x408f276du);
  CHECK(o[1] == 0x41c83b0eu);
  CHECK(o[2] == 0xa20bc7c6u);
  CHECK(o[3] == 0x6d5451fdu);
  // Digits of pi.
  philoxWords(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u, o);
  CHECK(o[0] == 0xd16cfe09u);
  CHECK(o[1] == 0x94fdccebu);
  CHECK(o[2] == 0x5001e420u);
  CHECK(o[3] == 0x24126ea1u);
}

TEST_CASE("random: uniformAt and normalAt are pure and derived from philox") {
  uint32_t o[4];
  philox(42, 7, 1234, o);
  CHECK(uniformAt(42, 7, 1234) == (float)((o[0] >> 8) * (1.0 / 16777216.0)));
  double u1 = ((o[0] >> 8) + 1) * (1.0 / 16777216.0), u2 = (o[1] >> 8) * (1.0 / 16777216.0);
  CHECK(normalAt(42, 7, 1234) == (float)(std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2)));
  CHECK(uniformAt(42, 7, 1234) == uniformAt(42, 7, 1234));
  CHECK(normalAt(42, 7, 1234) == normalAt(42, 7, 1234));
  CHECK(uniformAt(42, 7, 1234) != uniformAt(43, 7, 1234));
  CHECK(uniformAt(42, 7, 1234) != uniformAt(42, 8, 1234));
  CHECK(uniformAt(42, 7, 1234) != uniformAt(42, 7, 1235));
  CHECK(randomOpStream(5) == (hashName("random_uniform") ^ (5ULL * 0x9E3779B97F4A7C15ULL)));
  CHECK(randomOpStream(-1) == (hashName("random_uniform") ^ (~0ULL * 0x9E3779B97F4A7C15ULL)));
}

TEST_CASE("random: uniform range and normal moments") {
  const int n = 100000;
  double usum = 0, umin = 1, umax = 0;
  double nsum = 0, nsq = 0;
  bool allFinite = true, all24 = true;
  for (int i = 0; i < n; ++i) {
    float u = uniformAt(7, 99, (uint64_t)i);
    umin = std::min(umin, (double)u);
    umax = std::max(umax, (double)u);
    usum += u;
    double scaled = (double)u * 16777216.0;
    all24 &= scaled == std::floor(scaled);
    float z = normalAt(7, 99, (uint64_t)i);
    allFinite &= std::isfinite(z);
    nsum += z;
    nsq += (double)z * z;
  }
  CHECK(umin >= 0.0);
  CHECK(umax < 1.0);
  CHECK(all24);
  CHECK(std::abs(usum / n - 0.5) < 0.005);
  CHECK(allFinite);
  double mean = nsum / n, sd = std::sqrt(nsq / n - mean * mean);
  CHECK(std::abs(mean) < 0.01);
  CHECK(std::abs(sd - 1.0) < 0.01);
}

TEST_CASE("random: initParam") {
  SUBCASE("zeros and ones") {
    Tensor z = initParam(makeParam("z", {3, 4}, ParamInit::Zeros), 1);
    Tensor o = initParam(makeParam("o", {3, 4}, ParamInit::Ones), 1);
    REQUIRE(z.size() == 12);
    for (int i = 0; i < 12; ++i) {
      CHECK(z.f32()[i] == 0.0f);
      CHECK(o.f32()[i] == 1.0f);
    }
    CHECK(initParam(makeParam("s", {}, ParamInit::Ones), 1).item() == 1.0);
  }
  SUBCASE("normal(std) is keyed by (seed, name, global index)") {
    Param p = makeParam("layer.w", {64, 32}, ParamInit::Normal, 0.02);
    Tensor t = initParam(p, 1234);
    REQUIRE(t.size() == 64 * 32);
    for (int64_t i : {0, 1, 31, 32, 2047})
      CHECK(t.f32()[i] == (float)(0.02 * (double)normalAt(1234, hashName("layer.w"), (uint64_t)i)));
    double s = 0, sq = 0;
    for (int64_t i = 0; i < t.size(); ++i) {
      s += t.f32()[i];
      sq += (double)t.f32()[i] * t.f32()[i];
    }
    double mean = s / t.size(), sd = std::sqrt(sq / t.size() - mean * mean);
    CHECK(std::abs(sd - 0.02) < 0.001);
    // Deterministic; another seed or another name gives other values.
    Tensor again = initParam(p, 1234);
    Tensor otherSeed = initParam(p, 1235);
    Param q = p;
    q.name = "layer.v";
    Tensor otherName = initParam(q, 1234);
    int same = 0, sameSeed = 0, sameName = 0;
    for (int64_t i = 0; i < t.size(); ++i) {
      same += t.f32()[i] == again.f32()[i];
      sameSeed += t.f32()[i] == otherSeed.f32()[i];
      sameName += t.f32()[i] == otherName.f32()[i];
    }
    CHECK(same == t.size());
    CHECK(sameSeed < 5);
    CHECK(sameName < 5);
  }
  SUBCASE("uniform(lo, hi)") {
    Tensor t = initParam(makeParam("u", {1000}, ParamInit::Uniform, -3.0, 5.0), 9);
    double lo = 1e9, hi = -1e9;
    for (int64_t i = 0; i < t.size(); ++i) {
      lo = std::min(lo, (double)t.f32()[i]);
      hi = std::max(hi, (double)t.f32()[i]);
      CHECK(t.f32()[i] == (float)(-3.0 + 8.0 * (double)uniformAt(9, hashName("u"), (uint64_t)i)));
    }
    CHECK(lo >= -3.0);
    CHECK(hi < 5.0);
    CHECK(lo < -2.9);
    CHECK(hi > 4.9);
  }
  SUBCASE("glorot bound") {
    // fan_in = 10 * 10 = 100, fan_out = 50: limit = sqrt(6 / 150) = 0.2.
    Tensor t = initParam(makeParam("g", {10, 10, 50}, ParamInit::Glorot), 3);
    double lim = std::sqrt(6.0 / 150.0), amax = 0;
    for (int64_t i = 0; i < t.size(); ++i) {
      CHECK(std::abs((double)t.f32()[i]) <= lim + 1e-7);
      amax = std::max(amax, std::abs((double)t.f32()[i]));
    }
    CHECK(amax > 0.99 * lim);
    // Rank 1: fan_in = fan_out = n.
    Tensor v = initParam(makeParam("g1", {12}, ParamInit::Glorot), 3);
    double lim1 = std::sqrt(6.0 / 24.0);
    for (int64_t i = 0; i < v.size(); ++i) CHECK(std::abs((double)v.f32()[i]) <= lim1 + 1e-7);
  }
}
