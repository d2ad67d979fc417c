// bf16 GEMM by vdpbf16ps (see BF16Gemm.h), blocked as the JIT's f32 kernel
// (GemmKernel.cpp) and BLIS are.
//
// vdpbf16ps pairs its operands: lane j of the result gains a[2j] b[2j] +
// a[2j+1] b[2j+1]. So both operands are packed by k-pairs:
//   - B into panels of NR = 32 columns per K block of kc: each k-pair of
//     a panel is 64 bf16, (B[2q][j], B[2q+1][j]) for its 32 columns j (two
//     zmm vectors);
//   - A into slivers of MR = 12 rows per K block: each k-pair of a sliver
//     is MR 32-bit words (A[i][2q], A[i][2q+1]), one broadcast each.
// Packing reads any strides (transposed operands cost nothing more than
// row-major ones) and pads the edges with zeros: the micro-kernel always
// computes a whole MR x NR tile (or MR x 16 for a panel of at most 16
// columns), and a zero k-pair half adds nothing.
//
// K runs in blocks of at most kc = 512 (a kc x NR panel of B, 32 KiB,
// stays in L1 while the slivers of A stream past it) and M in blocks of
// mc = 384 rows (A's mc x kc block, 384 KiB, in L2). The micro-kernel
// keeps its MR x NR tile of C in 2 MR = 24 f32 zmm accumulators over a K
// block (vdpbf16ps has a latency of about 6 cycles and Zen 5 issues two
// a cycle, so at least 12 must be independent); between K blocks the tile
// waits in an f32 scratch, and only the last K block rounds it to bf16,
// once, nearest even (the bit arithmetic of support/BF16.h's f32ToBF16).
// bf16Gemm below orders the loops for one M block (the skinny products of
// a batch's tokens) or several.
#include "backend/jit/BF16Gemm.h"

// GCC 12 reports a spurious -Wmaybe-uninitialized inside its own AVX-512
// intrinsics (the undefined vector a maskz load starts from).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
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

constexpr int MR = 12;
constexpr int NR = 32;
constexpr int64_t kcMax = 512;  // even: only the last K block may hold an odd k
constexpr int64_t mcMax = 384;  // a multiple of MR

// A per-thread buffer, 64-byte aligned (B's panel loads then never split a
// cache line), grown as needed and kept: no allocation per call once warm.
template <class T>
struct Grown {
  T* p = nullptr;
  size_t n = 0;
  T* get(size_t need) {
    if (need > n) {
      std::free(p);
      n = std::max(need, n + n / 2);
      p = static_cast<T*>(std::aligned_alloc(64, (n * sizeof(T) + 63) / 64 * 64));
      if (!p) throw std::bad_alloc();
    }
    return p;
  }
  ~Grown() { std::free(p); }
};

struct Buffers {
  Grown<uint16_t> b;  // B's panels, every K block
  Grown<uint32_t> a;  // one M block's slivers of one K block
  Grown<float> c;     // one M block's tiles between K blocks
};
Buffers& buffers() {
  thread_local Buffers bufs;
  return bufs;
}

// Columns [j0, j0 + cols) (cols <= NR) of B's rows [k0, k0 + kn) as a
// panel of (kn + 1) / 2 k-pairs, zero-padded to NR columns and an even kn.
GSL_BF16_TARGET void packBPanel(const uint16_t* B, int64_t rsB, int64_t csB, int64_t k0, int64_t kn, int64_t j0,
                                int64_t cols, uint16_t* out) {
  const int64_t kp = (kn + 1) / 2;
  if (csB == 1) {  // rows contiguous: two rows' vectors interleaved by vpermt2w
    alignas(64) static const uint16_t lo[32] = {0, 32, 1, 33, 2,  34, 3,  35, 4,  36, 5,  37, 6,  38, 7,  39,
                                                8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
    alignas(64) static const uint16_t hi[32] = {16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22, 54, 23, 55,
                                                24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63};
    const __m512i ilo = _mm512_load_si512(lo), ihi = _mm512_load_si512(hi);
    const __mmask32 m = cols >= NR ? ~(__mmask32)0 : (__mmask32)((1u << cols) - 1);
    for (int64_t q = 0; q < kp; ++q) {
      const uint16_t* r0 = B + (k0 + 2 * q) * rsB + j0;
      const __m512i x = _mm512_maskz_loadu_epi16(m, r0);
      const __m512i y = 2 * q + 1 < kn ? _mm512_maskz_loadu_epi16(m, r0 + rsB) : _mm512_setzero_si512();
      _mm512_store_si512(out + q * 2 * NR, _mm512_permutex2var_epi16(x, ilo, y));
      _mm512_store_si512(out + q * 2 * NR + NR, _mm512_permutex2var_epi16(x, ihi, y));
    }
    return;
  }
  // Any other layout by 32-bit words; with rsB == 1 (B transposed: A·Bᵀ)
  // each column's k run is contiguous, so a column is read at a time.
  auto* o = reinterpret_cast<uint32_t*>(out);
  for (int64_t j = 0; j < NR; ++j) {
    if (j >= cols) {
      for (int64_t q = 0; q < kp; ++q) o[q * NR + j] = 0;
      continue;
    }
    const uint16_t* col = B + (j0 + j) * csB + k0 * rsB;
    for (int64_t q = 0; q < kp; ++q) {
      const uint32_t l = col[2 * q * rsB], h = 2 * q + 1 < kn ? col[(2 * q + 1) * rsB] : 0;
      o[q * NR + j] = l | h << 16;
    }
  }
}

// Rows [i0, i0 + rows) of A's columns [k0, k0 + kn) as slivers of MR rows,
// each (kn + 1) / 2 k-pairs of MR words (row r's pair at q MR + r), zero-
// padded to whole slivers and an even kn.
void packASlivers(const uint16_t* A, int64_t rsA, int64_t csA, int64_t i0, int64_t rows, int64_t k0, int64_t kn,
                  uint32_t* out) {
  const int64_t kp = (kn + 1) / 2, slivers = (rows + MR - 1) / MR;
  for (int64_t s = 0; s < slivers; ++s) {
    uint32_t* o = out + s * kp * MR;
    const int64_t live = std::min<int64_t>(MR, rows - s * MR);
    if (csA == 1) {  // a row's pair is one word: row at a time
      for (int64_t r = 0; r < MR; ++r) {
        if (r >= live) {
          for (int64_t q = 0; q < kp; ++q) o[q * MR + r] = 0;
          continue;
        }
        const uint16_t* row = A + (i0 + s * MR + r) * rsA + k0;
        for (int64_t q = 0; q < kn / 2; ++q) std::memcpy(&o[q * MR + r], row + 2 * q, 4);
        if (kn % 2) o[(kp - 1) * MR + r] = row[kn - 1];
      }
      continue;
    }
    // Otherwise (rsA == 1: A transposed, each k's rows contiguous) by k-pair.
    for (int64_t q = 0; q < kp; ++q) {
      const uint16_t* k0p = A + (i0 + s * MR) * rsA + (k0 + 2 * q) * csA;
      const bool pair = 2 * q + 1 < kn;
      for (int64_t r = 0; r < MR; ++r) {
        if (r >= live) {
          o[q * MR + r] = 0;
          continue;
        }
        const uint32_t l = k0p[r * rsA], h = pair ? k0p[r * rsA + csA] : 0;
        o[q * MR + r] = l | h << 16;
      }
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

// The MR x NR tile of C over one K block of kp k-pairs: starts from zero
// (`first`) or from the f32 `tile` the previous K block left, and ends in
// `tile` or (`last`) rounded into C's rows x cols corner. Row r's k-pair q
// is the word at a + r ra + q qa (packed: ra = 2, qa = 2 MR; A read in
// place: its row stride and 2); `tail` adds one more k whose pair has no
// second half (an odd K read in place: the element after it is not A's).
// V = 1 computes only the tile's first 16 columns (a panel of at most 16:
// N = 16, the head's and attention's narrow products, would otherwise be
// half waste).
template <int V>
GSL_BF16_TARGET void micro(int64_t kp, const uint16_t* a, int64_t ra, int64_t qa, bool tail, const uint16_t* Bp,
                           float* tile, bool first, bool last, uint16_t* C, int64_t rsC, int64_t csC, int64_t rows,
                           int64_t cols) {
  __m512 acc[MR][V];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < V; ++v) acc[r][v] = first ? _mm512_setzero_ps() : _mm512_load_ps(tile + r * NR + v * 16);
  for (int64_t q = 0; q < kp; ++q) {
    __m512bh b[V];
    for (int v = 0; v < V; ++v) b[v] = (__m512bh)_mm512_load_si512(Bp + q * 2 * NR + v * NR);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      uint32_t pair;
      std::memcpy(&pair, a + r * ra + q * qa, 4);
      const __m512bh av = (__m512bh)_mm512_set1_epi32((int)pair);
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], av, b[v]);
    }
  }
  if (tail) {
    __m512bh b[V];
    for (int v = 0; v < V; ++v) b[v] = (__m512bh)_mm512_load_si512(Bp + kp * 2 * NR + v * NR);
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32((int)a[r * ra + kp * qa]);
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], av, b[v]);
    }
  }
  if (!last) {
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r)
      for (int v = 0; v < V; ++v) _mm512_store_ps(tile + r * NR + v * 16, acc[r][v]);
    return;
  }
  if (csC == 1) {
    const __mmask16 m0 = cols >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << cols) - 1);
    const __mmask16 m1 = cols >= 32 ? (__mmask16)0xffff : cols > 16 ? (__mmask16)((1u << (cols - 16)) - 1) : 0;
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      if (r >= rows) break;
      _mm256_mask_storeu_epi16(C + r * rsC, m0, roundToBF16(acc[r][0]));
      if (V > 1 && m1) _mm256_mask_storeu_epi16(C + r * rsC + 16, m1, roundToBF16(acc[r][V - 1]));
    }
    return;
  }
  // C with neither unit stride: element by element.
  alignas(64) uint16_t out[NR];
  for (int r = 0; r < rows; ++r) {
    for (int v = 0; v < V; ++v)
      _mm256_store_si256(reinterpret_cast<__m256i*>(out + 16 * v), roundToBF16(acc[r][v]));
    for (int64_t j = 0; j < cols; ++j) C[r * rsC + j * csC] = out[j];
  }
}

}  // namespace

void bf16Gemm(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t rsA, int64_t csA, const uint16_t* B,
              int64_t rsB, int64_t csB, uint16_t* C, int64_t rsC, int64_t csC) {
  if (M <= 0 || N <= 0) return;
  // A stride along a dim of size 1 is never used: make it the unit one.
  if (N == 1) csC = csB = 1;
  if (M == 1) rsC = 1;
  if (K == 1) csA = 1;
  if (K <= 0) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * rsC + j * csC] = 0;
    return;
  }
  // C's columns contiguous, its rows not: the transposed product
  // Cᵀ = Bᵀ Aᵀ writes vectors.
  if (csC != 1 && rsC == 1) return bf16Gemm(N, M, K, B, csB, rsB, A, csA, rsA, C, csC, rsC);
  // K blocks of equal size (even, at most kcMax; one block up to 1.5 kcMax).
  int64_t nb = K <= kcMax * 3 / 2 ? 1 : (K + kcMax - 1) / kcMax;
  const int64_t kc = ((K + nb - 1) / nb + 1) / 2 * 2, kcp = kc / 2;
  nb = (K + kc - 1) / kc;
  const int64_t panels = (N + NR - 1) / NR;
  const int64_t mc = std::min<int64_t>(mcMax, (M + MR - 1) / MR * MR);
  Buffers& buf = buffers();
  // A is read in place when it has few column panels to serve (N <= 64)
  // and rows of contiguous k-pairs: packing it would cost more than the
  // product (M K scalar copies against M K N / 32 vector instructions);
  // only a last, partial sliver is packed (its missing rows are not A's).
  const bool inPlace = csA == 1 && panels <= 2;
  // One sliver's kernel call over K block kb (its A packed at `packed`).
  auto run = [&](int64_t ic, int64_t rows, int64_t s, int64_t kb, const uint32_t* packed, const uint16_t* panel,
                 int64_t p, float* tile) {
    const int64_t k0 = kb * kc, kn = std::min(kc, K - k0), kp = (kn + 1) / 2;
    const int64_t live = std::min<int64_t>(MR, rows - s * MR), cols = std::min<int64_t>(NR, N - p * NR);
    const auto kernel = cols > 16 ? &micro<2> : &micro<1>;
    uint16_t* c = C + (ic + s * MR) * rsC + p * NR * csC;
    if (inPlace && live == MR)
      kernel(kn / 2, A + (ic + s * MR) * rsA + k0, rsA, 2, kn % 2, panel, tile, kb == 0, kb == nb - 1, c, rsC, csC,
             live, cols);
    else
      kernel(kp, reinterpret_cast<const uint16_t*>(packed), 2, 2 * MR, false, panel, tile, kb == 0, kb == nb - 1, c,
             rsC, csC, live, cols);
  };
  if (M <= mc) {
    // One M block (the skinny products of B S tokens): A is packed whole,
    // every K block, and each column panel runs all its K blocks in turn,
    // each K block's panel of B packed just before use (L1/L2-resident, B
    // read once). The tiles between K blocks are then one panel's (mc x
    // NR f32, in L1/L2), not the whole M x N result's.
    const int64_t slivers = (M + MR - 1) / MR;
    uint16_t* Bp = buf.b.get((size_t)(kcp * 2 * NR));
    uint32_t* Ap = buf.a.get((size_t)(nb * slivers * MR * kcp));
    float* tiles = nb > 1 ? buf.c.get((size_t)(slivers * MR * NR)) : nullptr;
    for (int64_t kb = 0; kb < nb; ++kb) {
      const int64_t k0 = kb * kc, kn = std::min(kc, K - k0);
      if (!inPlace) packASlivers(A, rsA, csA, 0, M, k0, kn, Ap + kb * slivers * MR * kcp);
      else if (M % MR) packASlivers(A, rsA, csA, M / MR * MR, M % MR, k0, kn, Ap + kb * slivers * MR * kcp);
    }
    for (int64_t p = 0; p < panels; ++p)
      for (int64_t kb = 0; kb < nb; ++kb) {
        const int64_t k0 = kb * kc, kn = std::min(kc, K - k0), kp = (kn + 1) / 2;
        packBPanel(B, rsB, csB, k0, kn, p * NR, std::min<int64_t>(NR, N - p * NR), Bp);
        const uint32_t* a = Ap + kb * slivers * MR * kcp;
        for (int64_t s = 0; s < slivers; ++s)
          run(0, M, s, kb, inPlace ? a : a + s * kp * MR, Bp, p, tiles ? tiles + s * MR * NR : nullptr);
      }
    return;
  }
  // More M blocks: all of B is packed up front, and each M block runs its
  // K blocks in turn, A's block packed per K block (mc x kc, in L2), each
  // column panel against every sliver of it (the panel in L1); the tiles
  // between K blocks are the M block's (mc x N f32).
  uint16_t* Bp = buf.b.get((size_t)(nb * panels * kcp * 2 * NR));
  uint32_t* Ap = buf.a.get((size_t)(mc * kcp));
  float* tiles = nb > 1 ? buf.c.get((size_t)(mc * panels * NR)) : nullptr;
  for (int64_t kb = 0; kb < nb; ++kb) {
    const int64_t k0 = kb * kc, kn = std::min(kc, K - k0);
    for (int64_t p = 0; p < panels; ++p)
      packBPanel(B, rsB, csB, k0, kn, p * NR, std::min<int64_t>(NR, N - p * NR), Bp + (kb * panels + p) * kcp * 2 * NR);
  }
  for (int64_t ic = 0; ic < M; ic += mc) {
    const int64_t rows = std::min(mc, M - ic), slivers = (rows + MR - 1) / MR;
    for (int64_t kb = 0; kb < nb; ++kb) {
      const int64_t k0 = kb * kc, kn = std::min(kc, K - k0), kp = (kn + 1) / 2;
      if (!inPlace) packASlivers(A, rsA, csA, ic, rows, k0, kn, Ap);
      else if (rows % MR) packASlivers(A, rsA, csA, ic + rows / MR * MR, rows % MR, k0, kn, Ap);
      for (int64_t p = 0; p < panels; ++p)
        for (int64_t s = 0; s < slivers; ++s)
          run(ic, rows, s, kb, inPlace ? Ap : Ap + s * kp * MR, Bp + (kb * panels + p) * kcp * 2 * NR, p,
              tiles ? tiles + (s * panels + p) * MR * NR : nullptr);
    }
  }
}

void bf16GemmDot(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda, const uint16_t* B,
                 int64_t ldb, uint16_t* C, int64_t ldc) {
  GSL_ASSERT(cpuHasAvx512Bf16(), "internal error: bf16GemmDot on a CPU without AVX512_BF16");
  bf16Gemm(M, N, K, A, lda, 1, B, ldb, 1, C, ldc, 1);
}

}  // namespace gsl::backend::jit

extern "C" void gsl_rt_bf16_gemm(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t rsA, int64_t csA,
                                 const uint16_t* B, int64_t rsB, int64_t csB, uint16_t* C, int64_t rsC,
                                 int64_t csC) {
  gsl::backend::jit::bf16Gemm(M, N, K, A, rsA, csA, B, rsB, csB, C, rsC, csC);
}
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
