// How is a GEMM emitted? The code GemmEmitter generates for a Gemm planned
// by Contraction.h: the operand copies and result copy-out the plan asks
// for, then per batch index either the register-blocked vector kernel
// (with its B-panel and A-block packing), dot-product loops, or a call of
// Eigen (gsl_rt_sgemm).
#pragma once
#include "backend/jit/Contraction.h"
#include "backend/jit/Emitter.h"

namespace gsl::backend::jit {

class GemmEmitter : public Emitter {
 protected:
  using Emitter::Emitter;

  // The contraction `op` (matmul or einsum) as planned by `g`, reading the
  // operands' buffers and writing the result's.
  void emitGemm(const ir::Op& op, const Gemm& g);

 private:
  // A GEMM as dot products (layouts the kernel cannot address, small).
  void gemmDots(const Gemm& g, llvm::Value* a, llvm::Value* b, llvm::Value* c);

  // The generated GEMM kernel, written with explicit vectors: an mr x nr
  // block of C (nr = 2 vector widths) stays in 2 mr vector registers while
  // k runs, each step one broadcast of A per row and two vector loads of B;
  // edges use masked loads and stores. Sizes and strides are constants.
  // Requires g.csC == 1, and g.csB == 1 unless B is packed.
  void gemmKernel(const Gemm& g, llvm::Value* a, llvm::Value* b, llvm::Value* c);

  // Rows [r0, r0 + rows) of A's K block [k0, k0 + kn) as row blocks (r0 a
  // multiple of mr): P[((i - r0) / mr) kc mr + kk mr + i % mr] =
  // A[i, k0 + kk] (alias scope as packPanel).
  void packRows(llvm::Value* p, llvm::Value* a, const Gemm& g, llvm::Value* r0, int64_t rows, llvm::Value* k0,
                int64_t kn);

  // P[kk * nr + j] = B[(k0 + kk) * rsB + (j0 + j) * csB] for kk < kn,
  // j < cols: vector copies of B's rows when csB == 1, else scalar copies
  // along k. The stores get their own alias scope: the kernel's loads of P
  // are declared not to alias C's stores, but may alias these.
  void packPanel(llvm::Value* p, llvm::Value* b, int64_t rsB, int64_t csB, llvm::Value* j0, int64_t cols,
                 llvm::Value* k0, int64_t kn);
};

}  // namespace gsl::backend::jit
