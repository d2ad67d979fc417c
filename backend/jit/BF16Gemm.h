// bf16 GEMM for the JIT: C = A B on bf16 operands with f32 accumulation and
// the result rounded to bf16 once, by AVX512_BF16's `vdpbf16ps` (two
// bf16 multiply-adds per f32 lane and instruction, twice an f32 FMA's).
//
// The JIT lowers a bf16 matmul to a call of gsl_rt_bf16_matmul (Runtime.cpp
// registers it) when JitOptions::bf16Dot resolved to true, which the engine
// decides at JIT time from the host CPU's features (so it is part of the
// compile-cache key). Without the extension the matmul runs through the
// reference kernel: operands widened to f32, the f32 product, one rounding.
#pragma once
#include <cstdint>

namespace gsl::backend::jit {

// Whether this CPU executes vdpbf16ps (cpuid, checked once).
bool cpuHasAvx512Bf16();

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
}
