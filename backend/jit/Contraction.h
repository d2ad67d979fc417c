// Contractions (matmul, two-operand einsum) as batched GEMMs: the layout
// each operand is read with, the copies that make it addressable, and the
// choice of code (the generated kernel, dot-product loops or Eigen). No
// LLVM here: GemmKernel emits what this plans.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "backend/jit/JitOptions.h"
#include "backend/jit/Strides.h"
#include "ir/Op.h"

namespace gsl::backend::jit {

// A contraction as a (batched) GEMM: for every index of `batch`,
// C[i, j] = sum_k A[i, k] B[k, j] with the given element strides (an empty
// M, N or K group has size 1). Operands that cannot be addressed that way
// are first copied into the op's temp space; a result that cannot is
// computed into temp space and copied out.
struct Gemm {
  int64_t M = 1, N = 1, K = 1;
  int64_t rsA = 0, csA = 0, rsB = 0, csB = 0, rsC = 0, csC = 0;
  ir::Shape batch;
  Strides bA, bB, bC;
  // Copies: iteration `shape`, strides of the source and of the (row-major)
  // destination. tempX is the byte offset in the op's temp space.
  struct Copy {
    bool on = false;
    ir::Shape shape;
    Strides src, dst;
    size_t temp = 0;
  };
  Copy copyA, copyB, copyC;  // copyC: temp -> result
  // bf16 operands and result (planGemm). With Code::BF16Dot (JitOptions::
  // bf16Dot: the CPU has AVX512_BF16) each GEMM is a call of BF16Gemm.h's
  // vdpbf16ps kernel on the bf16 elements with these strides, its copies
  // (relayouts only) move bf16 elements. Otherwise every copy is on and
  // converts: A and B widened to f32 once, the f32 GEMM into temp space, C
  // rounded to bf16 once. Both are the reference kernel's semantics: f32
  // accumulation, one rounding.
  bool bf16 = false;
  size_t tempBytes = 0;
  // The code (chooseGemmCode): the generated kernel (on A and B exchanged
  // and the strides transposed when `swap`: C^T = B^T A^T), Eigen, or
  // dot-product loops, or (bf16 only) BF16Gemm.h's kernel. The kernel runs
  // K in blocks of kc and, when `pack`, copies each kc x nr panel of B to
  // temp space at packTemp.
  enum class Code { Kernel, Eigen, Dots, BF16Dot } code = Code::Dots;
  bool swap = false;
  int64_t kc = 0;
  bool pack = false;
  size_t packTemp = 0;
  // And, when `packA`, each K block of A to temp space at packATemp, as
  // row blocks of kc x mr (the kernel's broadcasts then read one
  // contiguous stream instead of mr rows that may share cache sets).
  bool packA = false;
  size_t packATemp = 0;
  // When mc > 0 (both packed, large M): L2/L3 blocking. Per K block, all
  // of B's kc x N block is packed (column panels of kc x nr, at packTemp),
  // then A in blocks of mc rows (mc x kc, at packATemp), each run against
  // every column panel.
  int64_t mc = 0;
  // When nc > 0 instead (both packed, large M and N): the BLIS order. Per
  // K block, all of A is packed (row blocks of kc x mr, at packATemp; in
  // L3), then B in blocks of nc columns (column panels of kc x nr, at
  // packTemp; together in L2); each row block of A (in L1) runs against
  // every column panel of the block, streamed from L2.
  int64_t nc = 0;
  // The kernel's rows (kernelRows, or kernelRowsStreamed with nc).
  int mr = 0;
};

// Register blocking of the generated GEMM kernel for `vw` f32 lanes: an
// mr x nr block of C (2 mr vector registers: 16 of AVX-512's 32, 12 of
// AVX2's 16).
inline int kernelRows(int vw) { return vw >= 16 ? 8 : 6; }
// With Gemm::nc, B's panels stream from L2: more rows per loaded B vector
// (24 of AVX-512's 32 registers; AVX2 keeps 6).
inline int kernelRowsStreamed(int vw) { return vw >= 16 ? 12 : 6; }
inline int64_t kernelCols(int vw) { return 2 * (int64_t)vw; }

// The GEMM plan of `op` with its code chosen for `opts` (vectorWidth
// resolved): matmul always, a two-operand einsum when its spec has the
// form of one (Kernels.cpp's einsumAsMatMul), nullopt otherwise.
// `operandStrides[i]`, when given and not empty: the element strides
// operand i is read with from its buffer (a transpose the buffer planner
// folded into this GEMM, BufferPlan::strided), instead of its row-major
// ones; a matmul takes them only with two 2-D operands (nullopt else).
std::optional<Gemm> planGemm(const ir::Op& op, const JitOptions& opts,
                             const std::vector<Strides>& operandStrides = {});

}  // namespace gsl::backend::jit
