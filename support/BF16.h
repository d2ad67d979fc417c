// bfloat16 <-> f32 conversions, the one definition every layer uses (the
// interpreter's kernels, the communicators' reductions, checkpoints).
//
// bf16 keeps f32's upper 16 bits: sign, 8-bit exponent, 7 stored mantissa
// bits. Widening is exact (append 16 zero bits). Narrowing rounds to
// nearest, ties to even, as `vcvtneps2bf16` and PyTorch do; a NaN stays a
// NaN (its top mantissa bits kept, the quiet bit set so that truncating a
// NaN whose payload lives only in the low bits cannot make an infinity).
#pragma once
#include <cstdint>
#include <cstring>

namespace gsl {

inline float bf16ToF32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t f32ToBF16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu))  // NaN
    return (uint16_t)((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even; overflow carries into inf
  return (uint16_t)(u >> 16);
}

// f32 rounded to the nearest bf16 value, as an f32.
inline float roundBF16(float f) { return bf16ToF32(f32ToBF16(f)); }

inline void widenBF16(const uint16_t* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = bf16ToF32(in[i]);
}
inline void narrowBF16(const float* in, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = f32ToBF16(in[i]);
}

}  // namespace gsl
