// bf16 GEMM for the JIT: C = A B on bf16 operands with f32 accumulation and
// the result rounded to bf16 once, by AVX512_BF16's `vdpbf16ps` (two
// bf16 multiply-adds per f32 lane and instruction, twice an f32 FMA's).
//
// The JIT lowers a bf16 matmul to a call of gsl_rt_bf16_matmul, and a bf16
// einsum of a GEMM's form (Contraction.h) to calls of gsl_rt_bf16_gemm
// with its plan's strides (Runtime.cpp registers both), when
// JitOptions::bf16Dot resolved to true, which the engine decides at JIT
// time from the host CPU's features (so it is part of the compile-cache
// key). Without the extension a contraction takes the portable path:
// operands widened to f32, the f32 GEMM kernel, one rounding.
//
// AMX (AMX_BF16's tile multiply) is not used: no CPU this was developed or
// measured on has it (AMD EPYC, Zen 5: AVX512_BF16 only), so such a kernel
// could not be tested; docs/mixed-precision.md.
#pragma once
#include <cstdint>

namespace gsl::backend::jit {

// Whether this CPU executes vdpbf16ps (cpuid, checked once).
bool cpuHasAvx512Bf16();

// C[i rsC + j csC] = sum_k A[i rsA + k csA] B[k rsB + j csB] for an
// M x N result of bf16 (uint16_t bits) operands, accumulated in f32 and
// rounded to bf16 once (nearest even); any strides (packing absorbs
// transposed operands). Needs cpuHasAvx512Bf16().
void bf16Gemm(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t rsA, int64_t csA, const uint16_t* B,
              int64_t rsB, int64_t csB, uint16_t* C, int64_t rsC, int64_t csC);

// C[M, N] (row-major, ldc) = A[M, K] (row-major, lda) * B[K, N] (row-major,
// ldb), all bf16 (uint16_t bits), accumulated in f32 and rounded to nearest
// even. Needs cpuHasAvx512Bf16().
void bf16GemmDot(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda, const uint16_t* B,
                 int64_t ldb, uint16_t* C, int64_t ldc);

}  // namespace gsl::backend::jit

extern "C" {
// The JIT's call for a bf16 matmul op (its index in the function being
// run): numpy matmul semantics (rank-1 operands, broadcast batch dims) on
// bf16 buffers, each batch element one bf16GemmDot. 0 on success, as
// gsl_rt_eval_op.
int32_t gsl_rt_bf16_matmul(void* ctx, int64_t op, const void* a, const void* b, void* out);
// The JIT's call for one GEMM of a bf16 einsum (one batch index of its
// plan): bf16Gemm.
void gsl_rt_bf16_gemm(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t rsA, int64_t csA,
                      const uint16_t* B, int64_t rsB, int64_t csB, uint16_t* C, int64_t rsC, int64_t csC);
}
