// Counter-based random numbers (Philox4x32-10, Salmon et al. 2011).
//
// A value is a pure function of (key, stream, index): no generator state,
// so every element of a tensor can be produced independently, by any rank,
// in any order. Params are keyed by (global --seed, hash of the param name,
// global element index), so a param has the same values under every
// sharding and every -np.
#pragma once
#include <cstdint>
#include <string_view>

#include "backend/Tensor.h"
#include "ir/Module.h"

namespace gsl::backend {

// FNV-1a 64-bit hash of a name (stable across platforms and runs).
uint64_t hashName(std::string_view s);

// Philox4x32-10 with a 64-bit key and 128-bit counter (stream, index);
// writes the four 32-bit output words.
void philox(uint64_t key, uint64_t stream, uint64_t index, uint32_t out[4]);

// Uniform in [0, 1) with 24 random bits (exactly representable in f32).
float uniformAt(uint64_t key, uint64_t stream, uint64_t index);
// Standard normal by Box-Muller on the first two words of one counter.
float normalAt(uint64_t key, uint64_t stream, uint64_t index);

// Stream used by the `random_uniform(shape, seed)` op for a given seed operand.
uint64_t randomOpStream(int64_t seedOperand);

// Stream of the dropout mask of call site `site` at optimizer step `step`:
// hashName("dropout") xor (step << 32 | site) times an odd constant (a
// bijection, so every (step, site) pair has a stream of its own).
uint64_t dropoutStream(int64_t site, int64_t step);

// Materialises a param's initial value (zeros, ones, normal(std),
// uniform(lo, hi), glorot) for global seed `seed`. Glorot is uniform in
// [-l, l], l = sqrt(6 / (fan_in + fan_out)), fan_out = last dim, fan_in =
// product of the other dims (rank 1: fan_in = fan_out = the dim).
Tensor initParam(const ir::Param& p, uint64_t seed);

}  // namespace gsl::backend
