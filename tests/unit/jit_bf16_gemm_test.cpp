// The vdpbf16ps GEMM (backend/jit/BF16Gemm.h) called directly, against the
// f32 product of the same bf16 operands rounded to bf16 once, at the edges
// of its blocking: M, N, K of 1, odd K, K over one and several K blocks
// (kc <= 512, the tile kept in f32 between blocks), N off the 32-column
// panel and the 16-column kernel, M off the 12-row sliver and over one M
// block (384 rows: B packed up front instead of per panel), A read in
// place (N <= 64) or packed, transposed and strided operands and results.
// Integer-valued operands make every sum exact, so the bits must agree;
// random ones may differ by one bf16 step where the f32 sums of the two
// orders lie on either side of a rounding boundary. On a CPU without
// AVX512_BF16 these cases are skipped (the kernel would not run);
// jit_bf16_test.cpp checks the JIT's routing on either kind of CPU.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "backend/jit/BF16Gemm.h"
#include "support/BF16.h"

using namespace gsl;
using gsl::backend::jit::bf16Gemm;
using gsl::backend::jit::cpuHasAvx512Bf16;

namespace {

// An M x N product's operands and result in memory with the given strides
// (elements; every element of a buffer not addressed by them is NaN, so
// that a kernel reading past its operand or writing past its result shows).
struct Layout {
  int64_t rsA, csA, rsB, csB, rsC, csC;
};

Layout rowMajor(int64_t M, int64_t N, int64_t K) { return {K, 1, N, 1, N, 1}; }

void checkGemm(int64_t M, int64_t N, int64_t K, const Layout& l, bool integers, uint32_t seed = 1) {
  INFO("M " << M << " N " << N << " K " << K << " strides A " << l.rsA << "," << l.csA << " B " << l.rsB << ","
            << l.csB << " C " << l.rsC << "," << l.csC << (integers ? " (integers)" : ""));
  auto extent = [](int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
    return (rows - 1) * rs + (cols - 1) * cs + 1;
  };
  const uint16_t nan = f32ToBF16(NAN);
  std::vector<uint16_t> A((size_t)extent(M, K, l.rsA, l.csA), nan), B((size_t)extent(K, N, l.rsB, l.csB), nan),
      C((size_t)extent(M, N, l.rsC, l.csC), nan);
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> di(-4, 4);
  std::uniform_real_distribution<float> df(-2.0f, 2.0f);
  auto value = [&] { return f32ToBF16(integers ? (float)di(g) : df(g)); };
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k) A[(size_t)(i * l.rsA + k * l.csA)] = value();
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j) B[(size_t)(k * l.rsB + j * l.csB)] = value();
  const std::vector<uint16_t> untouched = C;
  bf16Gemm(M, N, K, A.data(), l.rsA, l.csA, B.data(), l.rsB, l.csB, C.data(), l.rsC, l.csC);
  int64_t bad = 0;
  std::vector<bool> addressed(C.size(), false);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float s = 0.0f, mag = 0.0f;  // the f32 product, rounded once; the sum of |terms|
      for (int64_t k = 0; k < K; ++k) {
        const float t = bf16ToF32(A[(size_t)(i * l.rsA + k * l.csA)]) * bf16ToF32(B[(size_t)(k * l.rsB + j * l.csB)]);
        s += t;
        mag += std::fabs(t);
      }
      const size_t at = (size_t)(i * l.rsC + j * l.csC);
      addressed[at] = true;
      const uint16_t want = f32ToBF16(s), got = C[at];
      const float w = bf16ToF32(want), h = bf16ToF32(got);
      // (Random values: one bf16 step, or f32's summation error where the
      // sum cancels.)
      const bool ok = got == want || (!integers && std::fabs(w - h) <= std::ldexp(std::max(std::fabs(w), std::fabs(h)), -7) +
                                                                          1e-5f * mag);
      if (!ok && bad++ < 5) {
        INFO("C[" << i << ", " << j << "]: kernel " << h << " vs f32 product " << w);
        CHECK(ok);
      }
    }
  CHECK_MESSAGE(bad == 0, bad << " of " << M * N << " elements differ");
  for (size_t e = 0; e < C.size(); ++e)
    if (!addressed[e] && C[e] != untouched[e]) {
      FAIL("the kernel wrote element " << e << ", outside the result");
      break;
    }
}

}  // namespace

TEST_CASE("bf16 GEMM kernel: edge shapes of its packing and blocking, row-major") {
  if (!cpuHasAvx512Bf16()) {
    MESSAGE("CPU without AVX512_BF16: the vdpbf16ps kernel is not run here");
    return;
  }
  const int64_t shapes[][3] = {
      {1, 1, 1},      {1, 37, 5},    {13, 1, 7},      {1, 1, 1025},   {12, 32, 2},    {12, 16, 3},
      {13, 33, 1025},  // K over 1.5 blocks and odd; N and M off the tile
      {25, 17, 768},   // K one block at its largest
      {7, 70, 1537},   // three K blocks, the last odd; A packed (N > 64), its last sliver partial
      {100, 64, 513},  // A read in place, a partial last sliver, odd K across blocks
      {400, 45, 300},  // two M blocks: B packed up front
      {397, 100, 9},   // two M blocks, A packed
      {64, 256, 256},
  };
  for (bool ints : {true, false})
    for (const auto& s : shapes) checkGemm(s[0], s[1], s[2], rowMajor(s[0], s[1], s[2]), ints);
}

TEST_CASE("bf16 GEMM kernel: transposed and strided operands and results") {
  if (!cpuHasAvx512Bf16()) {
    MESSAGE("CPU without AVX512_BF16: the vdpbf16ps kernel is not run here");
    return;
  }
  for (bool ints : {true, false})
    for (const auto& s : {std::array<int64_t, 3>{13, 45, 37}, {30, 20, 1025}, {400, 70, 33}, {1, 5, 9}}) {
      const int64_t M = s[0], N = s[1], K = s[2];
      checkGemm(M, N, K, {1, M, N, 1, N, 1}, ints);            // Aᵀ stored (rsA = 1)
      checkGemm(M, N, K, {K, 1, 1, K, N, 1}, ints);            // Bᵀ stored: A·Bᵀ
      checkGemm(M, N, K, {1, M, 1, K, N, 1}, ints);            // both
      checkGemm(M, N, K, {K, 1, N, 1, 1, M}, ints);            // Cᵀ stored: computed as Bᵀ Aᵀ
      checkGemm(M, N, K, {K + 3, 1, N + 5, 1, 2 * N + 1, 2}, ints);  // padded rows (NaN), C with no unit stride
      checkGemm(M, N, K, {2 * K, 2, 2 * N, 2, N, 1}, ints);    // every other element
    }
}

TEST_CASE("bf16 GEMM kernel: NaN and infinities propagate as in the f32 product; K = 0 gives zeros") {
  if (!cpuHasAvx512Bf16()) {
    MESSAGE("CPU without AVX512_BF16: the vdpbf16ps kernel is not run here");
    return;
  }
  const int64_t M = 14, N = 20, K = 9;
  std::vector<uint16_t> A((size_t)(M * K), f32ToBF16(1.0f)), B((size_t)(K * N), f32ToBF16(0.5f)),
      C((size_t)(M * N), 0x1234);
  A[3 * K + 4] = f32ToBF16(INFINITY);  // row 3: +inf
  A[5 * K + 8] = f32ToBF16(NAN);       // row 5: NaN (the last, unpaired k)
  A[7 * K + 0] = f32ToBF16(INFINITY);  // row 7: inf - inf = NaN
  A[7 * K + 1] = f32ToBF16(-INFINITY);
  bf16Gemm(M, N, K, A.data(), K, 1, B.data(), N, 1, C.data(), N, 1);
  for (int64_t j = 0; j < N; ++j) {
    CHECK(bf16ToF32(C[(size_t)(0 * N + j)]) == 4.5f);
    CHECK(bf16ToF32(C[(size_t)(3 * N + j)]) == INFINITY);
    CHECK(std::isnan(bf16ToF32(C[(size_t)(5 * N + j)])));
    CHECK(std::isnan(bf16ToF32(C[(size_t)(7 * N + j)])));
  }
  bf16Gemm(M, N, 0, A.data(), K, 1, B.data(), N, 1, C.data(), N, 1);
  for (uint16_t c : C) CHECK(c == 0);
}
