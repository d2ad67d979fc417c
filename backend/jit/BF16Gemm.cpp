// bf16 GEMM by vdpbf16ps (see BF16Gemm.h).
//
// B is packed once per GEMM into panels of NR = 32 columns, each k-pair of a
// panel 64 bf16: (B[2q][j], B[2q+1][j]) for the panel's 32 columns j, the
// order vdpbf16ps pairs its operands in (lane j: a[2j] b[2j] + a[2j+1]
// b[2j+1]). A needs no packing: the pair (A[i][2q], A[i][2q+1]) is one
// 32-bit word of row i, broadcast to all 16 lanes. The micro-kernel keeps
// an MR x NR = 8 x 32 block of C in 16 f32 zmm accumulators over the whole
// K, then rounds it to bf16 (nearest even, the same bit arithmetic as
// support/BF16.h's f32ToBF16) and stores it, masked at the right edge.
#include "backend/jit/BF16Gemm.h"

#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/jit/Runtime.h"
#include "support/Diagnostics.h"

#define GSL_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

namespace gsl::backend::jit {

// cpuid leaf 7 sub-leaf 1, EAX bit 5 (AVX512_BF16), with AVX-512F (leaf 7
// sub-leaf 0, EBX bit 16) and the OS saving the zmm state (XCR0 bits 1, 2
// and 5..7), read directly so that the check does not depend on which
// feature names the compiler's __builtin_cpu_supports knows.
bool cpuHasAvx512Bf16() {
  static const bool has = [] {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(b & (1u << 16))) return false;
    const unsigned maxSub = a;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false;  // OSXSAVE
    unsigned lo, hi;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & 0xe6u) != 0xe6u) return false;
    if (maxSub < 1 || !__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
    return (a & (1u << 5)) != 0;
  }();
  return has;
}

namespace {

constexpr int MR = 8;
constexpr int NR = 32;

void packB(const uint16_t* B, int64_t ldb, int64_t K, int64_t N, uint16_t* out) {
  const int64_t Kp = (K + 1) / 2, panels = (N + NR - 1) / NR;
  for (int64_t p = 0; p < panels; ++p)
    for (int64_t q = 0; q < Kp; ++q) {
      uint16_t* o = out + (p * Kp + q) * NR * 2;
      const int64_t k0 = 2 * q, k1 = 2 * q + 1;
      for (int64_t j = 0; j < NR; ++j) {
        const int64_t col = p * NR + j;
        o[2 * j] = col < N ? B[k0 * ldb + col] : 0;
        o[2 * j + 1] = col < N && k1 < K ? B[k1 * ldb + col] : 0;
      }
    }
}

// 16 f32 lanes -> 16 bf16 (round to nearest even; NaN kept, quiet bit set).
GSL_BF16_TARGET inline __m256i roundToBF16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40)));
  return _mm512_cvtepi32_epi16(r);
}

template <int R>
GSL_BF16_TARGET void micro(const uint16_t* A, int64_t lda, int64_t K, const uint16_t* Bp, uint16_t* C,
                           int64_t ldc, int64_t ncols) {
  __m512 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  const int64_t Kh = K / 2;
  for (int64_t q = 0; q < Kh; ++q) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(Bp + q * NR * 2);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(Bp + q * NR * 2 + NR);
    for (int r = 0; r < R; ++r) {
      uint32_t pair;
      std::memcpy(&pair, A + r * lda + 2 * q, 4);
      const __m512bh a = (__m512bh)_mm512_set1_epi32((int)pair);
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], a, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], a, b1);
    }
  }
  if (K % 2) {  // the last k alone: its pair's second half is zero (B's is too)
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(Bp + Kh * NR * 2);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(Bp + Kh * NR * 2 + NR);
    for (int r = 0; r < R; ++r) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32((int)A[r * lda + K - 1]);
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], a, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], a, b1);
    }
  }
  const __mmask16 m0 = ncols >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << ncols) - 1);
  const __mmask16 m1 = ncols >= 32 ? (__mmask16)0xffff : ncols > 16 ? (__mmask16)((1u << (ncols - 16)) - 1) : 0;
  for (int r = 0; r < R; ++r) {
    _mm256_mask_storeu_epi16(C + r * ldc, m0, roundToBF16(acc[r][0]));
    if (m1) _mm256_mask_storeu_epi16(C + r * ldc + 16, m1, roundToBF16(acc[r][1]));
  }
}

using Micro = void (*)(const uint16_t*, int64_t, int64_t, const uint16_t*, uint16_t*, int64_t, int64_t);
constexpr Micro kMicro[MR + 1] = {nullptr,  &micro<1>, &micro<2>, &micro<3>, &micro<4>,
                                  &micro<5>, &micro<6>, &micro<7>, &micro<8>};

}  // namespace

void bf16GemmDot(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda, const uint16_t* B,
                 int64_t ldb, uint16_t* C, int64_t ldc) {
  GSL_ASSERT(cpuHasAvx512Bf16(), "internal error: bf16GemmDot on a CPU without AVX512_BF16");
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    for (int64_t i = 0; i < M; ++i) std::memset(C + i * ldc, 0, (size_t)N * 2);
    return;
  }
  const int64_t Kp = (K + 1) / 2, panels = (N + NR - 1) / NR;
  thread_local std::vector<uint16_t> packed;
  packed.resize((size_t)(panels * Kp * NR * 2));
  packB(B, ldb, K, N, packed.data());
  for (int64_t p = 0; p < panels; ++p) {
    const uint16_t* Bp = packed.data() + p * Kp * NR * 2;
    const int64_t ncols = std::min<int64_t>(NR, N - p * NR);
    for (int64_t i = 0; i < M; i += MR) {
      const int64_t rows = std::min<int64_t>(MR, M - i);
      kMicro[rows](A + i * lda, lda, K, Bp, C + i * ldc + p * NR, ldc, ncols);
    }
  }
}

}  // namespace gsl::backend::jit

extern "C" int32_t gsl_rt_bf16_matmul(void* ctx, int64_t op, const void* a, const void* b, void* out) {
  auto& c = *static_cast<gsl::backend::jit::CallContext*>(ctx);
  try {
    GSL_ASSERT(c.fn && op >= 0 && (size_t)op < c.fn->ops.size(), "jit runtime: bad op index");
    const gsl::ir::Op& o = *c.fn->ops[(size_t)op];
    GSL_ASSERT(o.kind == gsl::ir::OpKind::MatMul && o.operands.size() == 2,
               "internal error: gsl_rt_bf16_matmul on a non-matmul op");
    gsl::ir::Shape sa = o.operands[0]->type.shape, sb = o.operands[1]->type.shape;
    if (sa.size() == 1) sa.insert(sa.begin(), 1);
    if (sb.size() == 1) sb.push_back(1);
    const int64_t M = sa[sa.size() - 2], K = sa.back(), N = sb.back();
    const gsl::ir::Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
    const auto* A = static_cast<const uint16_t*>(a);
    const auto* B = static_cast<const uint16_t*>(b);
    auto* C = static_cast<uint16_t*>(out);
    if (bb.empty()) {  // b is one matrix: A's batch rows are one tall GEMM
      int64_t rows = M;
      for (int64_t d : ba) rows *= d;
      gsl::backend::jit::bf16GemmDot(rows, N, K, A, K, B, N, C, N);
      return 0;
    }
    // Broadcast batch dims (numpy): an odometer over the result's batch.
    const size_t nb = std::max(ba.size(), bb.size());
    gsl::ir::Shape batch(nb), da(nb, 1), db(nb, 1);
    for (size_t i = 0; i < nb; ++i) {
      da[i] = i < nb - ba.size() ? 1 : ba[i - (nb - ba.size())];
      db[i] = i < nb - bb.size() ? 1 : bb[i - (nb - bb.size())];
      batch[i] = std::max(da[i], db[i]);
    }
    std::vector<int64_t> sta(nb), stb(nb), idx(nb, 0);
    int64_t accA = M * K, accB = K * N, total = 1;
    for (size_t i = nb; i-- > 0;) {
      sta[i] = da[i] == 1 ? 0 : accA;
      stb[i] = db[i] == 1 ? 0 : accB;
      accA *= da[i];
      accB *= db[i];
      total *= batch[i];
    }
    for (int64_t t = 0; t < total; ++t) {
      int64_t offA = 0, offB = 0;
      for (size_t i = 0; i < nb; ++i) {
        offA += idx[i] * sta[i];
        offB += idx[i] * stb[i];
      }
      gsl::backend::jit::bf16GemmDot(M, N, K, A + offA, K, B + offB, N, C + t * M * N, N);
      for (size_t i = nb; i-- > 0;) {
        if (++idx[i] < batch[i]) break;
        idx[i] = 0;
      }
    }
    return 0;
  } catch (...) {
    c.error = std::current_exception();
    return 1;
  }
}
