#include "backend/jit/GemmKernel.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/MDBuilder.h>

#include <utility>

namespace gsl::backend::jit {

void GemmEmitter::emitGemm(const ir::Op& op, const Gemm& g) {
  llvm::Value *a = ptr(op.operands[0]), *b = ptr(op.operands[1]), *c = ptr(op.result);
  if (g.K == 0) {  // an empty sum
    if (g.bf16) return fill(c, op.result->type.numElements(), b_.getInt16(0));
    return fill(c, op.result->type.numElements(), f32c(0.0f));
  }
  // The copies into temp space (bf16: widening to f32, Contraction.h;
  // with vdpbf16ps relayouts of the bf16 elements).
  const bool dot = g.code == Gemm::Code::BF16Dot;
  auto copyIn = [&](const Gemm::Copy& cp, llvm::Value*& x) {
    llvm::Value* t = tempPtr(cp.temp);
    if (dot) copyWords(t, x, cp.shape, cp.dst, cp.src, i16_);
    else if (g.bf16) copyConvertBF16(true, t, x, cp.shape, cp.dst, cp.src);
    else copyWords(t, x, cp.shape, cp.dst, cp.src);
    x = t;
  };
  if (g.copyA.on) copyIn(g.copyA, a);
  if (g.copyB.on) copyIn(g.copyB, b);
  if (g.copyA.on || g.copyB.on) newScope();  // the GEMM reads the copies
  llvm::Value* out = g.copyC.on ? tempPtr(g.copyC.temp) : c;
  map(g.batch, {g.bA, g.bB, g.bC}, [&](const std::vector<llvm::Value*>&, const std::vector<llvm::Value*>& o) {
    llvm::Type* et = dot ? i16_ : f32_;
    llvm::Value *pa = gep(et, a, o[0]), *pb = gep(et, b, o[1]), *pc = gep(et, out, o[2]);
    if (g.swap) std::swap(pa, pb);
    if (dot)
      b_.CreateCall(helper("gsl_rt_bf16_gemm", b_.getVoidTy(),
                           {i64_, i64_, i64_, ptr_, i64_, i64_, ptr_, i64_, i64_, ptr_, i64_, i64_}),
                    {i64c(g.M), i64c(g.N), i64c(g.K), pa, i64c(g.rsA), i64c(g.csA), pb, i64c(g.rsB),
                     i64c(g.csB), pc, i64c(g.rsC), i64c(g.csC)});
    else if (g.code == Gemm::Code::Kernel) gemmKernel(g, pa, pb, pc);
    else if (g.code == Gemm::Code::Dots) gemmDots(g, pa, pb, pc);
    else
      b_.CreateCall(helper("gsl_rt_sgemm", b_.getVoidTy(),
                           {i64_, i64_, i64_, ptr_, i64_, i64_, ptr_, i64_, i64_, ptr_, i64_, i64_}),
                    {i64c(g.M), i64c(g.N), i64c(g.K), pa, i64c(g.rsA), i64c(g.csA), pb, i64c(g.rsB),
                     i64c(g.csB), pc, i64c(g.rsC), i64c(g.csC)});
  });
  if (g.copyC.on) {
    newScope();
    if (dot) copyWords(c, out, g.copyC.shape, g.copyC.dst, g.copyC.src, i16_);
    else if (g.bf16) copyConvertBF16(false, c, out, g.copyC.shape, g.copyC.dst, g.copyC.src);
    else copyWords(c, out, g.copyC.shape, g.copyC.dst, g.copyC.src);
  }
}

// A GEMM as dot products (layouts the kernel cannot address, small).
void GemmEmitter::gemmDots(const Gemm& g, llvm::Value* a, llvm::Value* b, llvm::Value* c) {
  nest({g.M, g.N}, [&](const std::vector<llvm::Value*>& ij) {
    llvm::Value* s = loopAcc(g.K, {f32c(0.0f)}, [&](llvm::Value* k, const std::vector<llvm::Value*>& acc) {
      llvm::Value* x = loadIn(f32_, a, offset({ij[0], k}, {g.rsA, g.csA}));
      llvm::Value* y = loadIn(f32_, b, offset({k, ij[1]}, {g.rsB, g.csB}));
      auto* sum = llvm::cast<llvm::Instruction>(b_.CreateFAdd(acc[0], b_.CreateFMul(x, y)));
      sum->setHasAllowReassoc(true);  // lets a dot product vectorise
      return std::vector<llvm::Value*>{sum};
    })[0];
    store(s, c, offset(ij, {g.rsC, g.csC}));
  });
}

// The generated GEMM kernel, written with explicit vectors: an mr x nr
// block of C (nr = 2 vector widths) stays in 2 mr vector registers while
// k runs, each step one broadcast of A per row and two vector loads of B;
// edges use masked loads and stores; each block prefetches the C tile of
// the next row block (in the BLIS order, Gemm::nc: of the next column
// panel). Sizes and strides are constants.
// Requires g.csC == 1, and g.csB == 1 unless B is packed.
void GemmEmitter::gemmKernel(const Gemm& g, llvm::Value* a, llvm::Value* b, llvm::Value* c) {
  const int vw = opts_.vectorWidth, mr = g.mr;
  const int64_t nr = kernelCols(vw);
  auto* vt = llvm::FixedVectorType::get(f32_, vw);
  llvm::Value* zero = llvm::Constant::getNullValue(vt);
  const int64_t kc = g.kc;
  llvm::Value* packA = g.packA ? tempPtr(g.packATemp) : nullptr;
  // B is read from `bp` (row stride bRs, first column bj0): B itself or
  // its packed panel.
  llvm::Value* bp = b;
  int64_t bRs = g.rsB;
  llvm::Value* bj0 = nullptr;
  // The first row of the packed A block.
  llvm::Value* aRow0 = i64c(0);
  // C[i0 : i0 + rows, j0 : j0 + cols] (rows <= mr, cols <= nr) += the
  // product over k in [k0, k0 + kn); the first K block starts from 0.
  auto block = [&](llvm::Value* i0, int64_t rows, llvm::Value* j0, int64_t cols, llvm::Value* k0, int64_t kn) {
    const int vecs = (int)((cols + vw - 1) / vw);
    const int64_t lastLanes = cols - (int64_t)(vecs - 1) * vw;
    llvm::Value* mask = nullptr;
    if (lastLanes < vw) {
      std::vector<llvm::Constant*> bits;
      for (int l = 0; l < vw; ++l) bits.push_back(b_.getInt1(l < lastLanes));
      mask = llvm::ConstantVector::get(bits);
    }
    auto vecPtr = [&](llvm::Value* base, llvm::Value* row, int64_t rowStride, llvm::Value* col0, int v) {
      llvm::Value* off =
          b_.CreateAdd(b_.CreateMul(row, i64c(rowStride)), b_.CreateAdd(col0, i64c((int64_t)v * vw)));
      return gep(f32_, base, off);
    };
    std::vector<llvm::Value*> init;
    llvm::Value* first = b_.CreateICmpEQ(k0, i64c(0));
    for (int64_t r = 0; r < rows; ++r)
      for (int v = 0; v < vecs; ++v) {
        if (kn == g.K) {
          init.push_back(zero);
          continue;
        }
        llvm::Value* p = vecPtr(c, b_.CreateAdd(i0, i64c(r)), g.rsC, j0, v);
        llvm::Value* old = v == vecs - 1 && mask ? b_.CreateMaskedLoad(vt, p, llvm::Align(4), mask, zero)
                                                 : (llvm::Value*)b_.CreateAlignedLoad(vt, p, llvm::Align(4));
        init.push_back(b_.CreateSelect(first, zero, old));
      }
    // Prefetch the C tile of the next row block (rows at C's row stride
    // defeat the hardware prefetcher): its loads at that block's start
    // would otherwise stall every accumulator on a cache miss.
    // In the BLIS order (Gemm::nc) the next tile is the next column
    // panel's, same rows.
    if (rows == mr && (g.nc > 0 || g.M > mr)) {
      llvm::Function* pf = llvm::Intrinsic::getDeclaration(&m_, llvm::Intrinsic::prefetch, {ptr_});
      for (int64_t r = 0; r < mr; ++r) {
        llvm::Value* row = g.nc > 0 ? b_.CreateAdd(i0, i64c(r))
                                    : b_.CreateBinaryIntrinsic(llvm::Intrinsic::umin, b_.CreateAdd(i0, i64c(mr + r)),
                                                               i64c(g.M - 1));
        for (int64_t col = 0; col < (g.nc > 0 ? nr : cols); col += 16) {
          llvm::Value* cc = g.nc > 0 ? b_.CreateBinaryIntrinsic(llvm::Intrinsic::umin, b_.CreateAdd(j0, i64c(nr + col)),
                                                                i64c(g.N - 1))
                                     : b_.CreateAdd(j0, i64c(col));
          llvm::Value* p = gep(f32_, c, b_.CreateAdd(b_.CreateMul(row, i64c(g.rsC)), cc));
          b_.CreateCall(pf, {p, b_.getInt32(1), b_.getInt32(3), b_.getInt32(1)});
        }
      }
    }
    std::vector<llvm::Value*> acc = loopAcc(kn, init, [&](llvm::Value* kk, const std::vector<llvm::Value*>& in) {
      llvm::Value* k = b_.CreateAdd(k0, kk);
      std::vector<llvm::Value*> bv;
      for (int v = 0; v < vecs; ++v) {
        llvm::Value* p = vecPtr(bp, bp == b ? k : kk, bRs, bj0 ? bj0 : j0, v);
        llvm::Instruction* l = nullptr;
        if (v == vecs - 1 && mask) l = b_.CreateMaskedLoad(vt, p, llvm::Align(4), mask, zero);
        else l = b_.CreateAlignedLoad(vt, p, llvm::Align(4));
        l->setMetadata(llvm::LLVMContext::MD_noalias, scope_);
        bv.push_back(l);
      }
      std::vector<llvm::Value*> out(in.size());
      for (int64_t r = 0; r < rows; ++r) {
        llvm::Value* x;
        if (packA) {  // block (i0 - aRow0) / mr of the packed K block: [kc][mr]
          llvm::Value* off = b_.CreateAdd(b_.CreateMul(b_.CreateSub(i0, aRow0), i64c(kc)),
                                          b_.CreateAdd(b_.CreateMul(kk, i64c(mr)), i64c(r)));
          x = loadIn(f32_, packA, off);
        } else {
          llvm::Value* row = b_.CreateAdd(i0, i64c(r));
          x = loadIn(f32_, a, b_.CreateAdd(b_.CreateMul(row, i64c(g.rsA)), b_.CreateMul(k, i64c(g.csA))));
        }
        llvm::Value* xs = b_.CreateVectorSplat(vw, x);
        for (int v = 0; v < vecs; ++v)
          out[r * vecs + v] = b_.CreateIntrinsic(llvm::Intrinsic::fmuladd, {vt}, {xs, bv[v], in[r * vecs + v]});
      }
      return out;
    });
    for (int64_t r = 0; r < rows; ++r)
      for (int v = 0; v < vecs; ++v) {
        llvm::Value* p = vecPtr(c, b_.CreateAdd(i0, i64c(r)), g.rsC, j0, v);
        llvm::Instruction* st = nullptr;
        if (v == vecs - 1 && mask) st = b_.CreateMaskedStore(acc[r * vecs + v], p, llvm::Align(4), mask);
        else st = b_.CreateAlignedStore(acc[r * vecs + v], p, llvm::Align(4));
        st->setMetadata(llvm::LLVMContext::MD_alias_scope, scope_);
      }
  };
  llvm::Value* pack = g.pack ? tempPtr(g.packTemp) : nullptr;
  // Row blocks [r0, r0 + rows) of C (r0 a multiple of mr) against the
  // column panel at j0.
  auto rowRange = [&](llvm::Value* r0, int64_t rows, llvm::Value* j0, int64_t cols, llvm::Value* k0, int64_t kn) {
    if (rows / mr)
      loop(rows / mr, [&](llvm::Value* ib) { block(b_.CreateAdd(r0, b_.CreateMul(ib, i64c(mr))), mr, j0, cols, k0, kn); });
    if (rows % mr) block(b_.CreateAdd(r0, i64c(rows / mr * mr)), rows % mr, j0, cols, k0, kn);
  };
  // The packed column panels (kc x nr each) of B's columns [jc, jc + cols):
  // body(panel index, first column, width), the last panel maybe narrower.
  auto panelPtr = [&](llvm::Value* jb) { return gep(f32_, pack, b_.CreateMul(jb, i64c(kc * nr))); };
  using PanelBody = std::function<void(llvm::Value*, llvm::Value*, int64_t)>;
  auto forPanels = [&](llvm::Value* jc, int64_t cols, const PanelBody& body) {
    const int64_t pn = cols / nr, last = cols % nr;
    if (pn) loop(pn, [&](llvm::Value* jb) { body(jb, b_.CreateAdd(jc, b_.CreateMul(jb, i64c(nr))), nr); });
    if (last) body(i64c(pn), b_.CreateAdd(jc, i64c(pn * nr)), last);
  };
  // K blocks of kc, the last one maybe shorter: kBlock(k0, kn).
  auto forKBlocks = [&](const std::function<void(llvm::Value*, int64_t)>& kBlock) {
    if (g.K / kc) loop(g.K / kc, [&](llvm::Value* kb) { kBlock(b_.CreateMul(kb, i64c(kc)), kc); });
    if (g.K % kc) kBlock(i64c(g.K / kc * kc), g.K % kc);
  };
  if (g.nc > 0) {
    // BLIS order (Gemm::nc): per K block, A's kc x M block packed as row
    // blocks; per block of nc columns, its kc x nr panels packed; then
    // every row block against every panel of the column block.
    auto colBlock = [&](llvm::Value* jc, int64_t cols, llvm::Value* k0, int64_t kn) {
      forPanels(jc, cols, [&](llvm::Value* jb, llvm::Value* j0, int64_t n) {
        packPanel(panelPtr(jb), b, g.rsB, g.csB, j0, n, k0, kn);
      });
      auto rowBlock = [&](llvm::Value* i0, int64_t rows) {
        forPanels(jc, cols, [&](llvm::Value* jb, llvm::Value* j0, int64_t n) {
          bp = panelPtr(jb), bRs = nr, bj0 = i64c(0);
          block(i0, rows, j0, n, k0, kn);
        });
      };
      if (g.M / mr) loop(g.M / mr, [&](llvm::Value* ib) { rowBlock(b_.CreateMul(ib, i64c(mr)), mr); });
      if (g.M % mr) rowBlock(i64c(g.M / mr * mr), g.M % mr);
    };
    forKBlocks([&](llvm::Value* k0, int64_t kn) {
      packRows(packA, a, g, i64c(0), g.M, k0, kn);
      aRow0 = i64c(0);
      if (g.N / g.nc) loop(g.N / g.nc, [&](llvm::Value* jcb) { colBlock(b_.CreateMul(jcb, i64c(g.nc)), g.nc, k0, kn); });
      if (g.N % g.nc) colBlock(i64c(g.N / g.nc * g.nc), g.N % g.nc, k0, kn);
    });
    return;
  }
  if (g.mc > 0) {
    // L2/L3 blocking (GotoBLAS / BLIS order): per K block, B's whole
    // kc x N block is packed as column panels (kc x nr each; together in
    // L3); then per block of mc rows, A's mc x kc block is packed (it stays
    // in L2), and every column panel (in L1) runs over those rows. Each C
    // element still sums its k in order.
    auto rowBlock = [&](llvm::Value* i0, int64_t rows, llvm::Value* k0, int64_t kn) {
      packRows(packA, a, g, i0, rows, k0, kn);
      aRow0 = i0;
      forPanels(i64c(0), g.N, [&](llvm::Value* jb, llvm::Value* j0, int64_t cols) {
        bp = panelPtr(jb), bRs = nr, bj0 = i64c(0);
        rowRange(i0, rows, j0, cols, k0, kn);
      });
    };
    forKBlocks([&](llvm::Value* k0, int64_t kn) {
      forPanels(i64c(0), g.N, [&](llvm::Value* jb, llvm::Value* j0, int64_t cols) {
        packPanel(panelPtr(jb), b, g.rsB, g.csB, j0, cols, k0, kn);
      });
      if (g.M / g.mc) loop(g.M / g.mc, [&](llvm::Value* ic) { rowBlock(b_.CreateMul(ic, i64c(g.mc)), g.mc, k0, kn); });
      if (g.M % g.mc) rowBlock(i64c(g.M / g.mc * g.mc), g.M % g.mc, k0, kn);
    });
    return;
  }
  // K blocks outside (C is revisited once per block of kc), then column
  // panels (a kc x nr panel of B, 48 KiB with AVX-512, stays in L1 for
  // every row block), row blocks inside. Each C element still sums its k
  // in order.
  auto rowBlocks = [&](llvm::Value* j0, int64_t cols, llvm::Value* k0, int64_t kn) {
    if (pack) {
      packPanel(pack, b, g.rsB, g.csB, j0, cols, k0, kn);
      bp = pack, bRs = nr, bj0 = i64c(0);
    }
    rowRange(i64c(0), g.M, j0, cols, k0, kn);
  };
  const int64_t panelsN = g.N / nr, lastCols = g.N % nr;
  forKBlocks([&](llvm::Value* k0, int64_t kn) {
    if (packA) packRows(packA, a, g, i64c(0), g.M, k0, kn);
    if (panelsN) loop(panelsN, [&](llvm::Value* jb) { rowBlocks(b_.CreateMul(jb, i64c(nr)), nr, k0, kn); });
    if (lastCols) rowBlocks(i64c(panelsN * nr), lastCols, k0, kn);
  });
}

// Rows [r0, r0 + rows) of A's K block [k0, k0 + kn) as row blocks (r0 a
// multiple of mr): P[((i - r0) / mr) kc mr + kk mr + i % mr] = A[i, k0 + kk]
// (alias scope as packPanel).
void GemmEmitter::packRows(llvm::Value* p, llvm::Value* a, const Gemm& g, llvm::Value* r0, int64_t rows,
                           llvm::Value* k0, int64_t kn) {
  const int64_t mr = g.mr, kc = g.kc;
  llvm::MDBuilder mdb(c_);
  llvm::MDNode* packScope = llvm::MDNode::get(c_, {mdb.createAnonymousAliasScope(domain_, "packA")});
  // Not vectorised along kk: its stores, mr apart, would be scatters.
  auto rowsOf = [&](llvm::Value* i0, int64_t n) {  // i0: relative to r0
    loop(kn, [&](llvm::Value* kk) {
      llvm::Value* col = b_.CreateMul(b_.CreateAdd(k0, kk), i64c(g.csA));
      llvm::Value* dst = b_.CreateAdd(b_.CreateMul(i0, i64c(kc)), b_.CreateMul(kk, i64c(mr)));
      for (int64_t r = 0; r < n; ++r) {
        llvm::Value* row = b_.CreateAdd(r0, b_.CreateAdd(i0, i64c(r)));
        llvm::Value* src = b_.CreateAdd(b_.CreateMul(row, i64c(g.rsA)), col);
        auto* l = b_.CreateAlignedLoad(f32_, gep(f32_, a, src), llvm::Align(4));
        l->setMetadata(llvm::LLVMContext::MD_noalias, packScope);
        auto* st = b_.CreateAlignedStore(l, gep(f32_, p, b_.CreateAdd(dst, i64c(r))), llvm::Align(4));
        st->setMetadata(llvm::LLVMContext::MD_alias_scope, packScope);
      }
    }, /*vectorize=*/false);
  };
  if (rows / mr) loop(rows / mr, [&](llvm::Value* ib) { rowsOf(b_.CreateMul(ib, i64c(mr)), mr); });
  if (rows % mr) rowsOf(i64c(rows / mr * mr), rows % mr);
}

// P[kk * nr + j] = B[(k0 + kk) * rsB + (j0 + j) * csB] for kk < kn,
// j < cols: vector copies of B's rows when csB == 1, else scalar copies
// along k. The stores get their own alias scope: the kernel's loads of P
// are declared not to alias C's stores, but may alias these.
void GemmEmitter::packPanel(llvm::Value* p, llvm::Value* b, int64_t rsB, int64_t csB, llvm::Value* j0,
                            int64_t cols, llvm::Value* k0, int64_t kn) {
  const int vw = opts_.vectorWidth;
  const int64_t nr = kernelCols(vw);
  auto* vt = llvm::FixedVectorType::get(f32_, vw);
  llvm::MDBuilder mdb(c_);
  llvm::MDNode* packScope = llvm::MDNode::get(c_, {mdb.createAnonymousAliasScope(domain_, "pack")});
  if (csB != 1) {  // not vectorised along kk: its stores, nr apart, would be scatters
    loop(cols, [&](llvm::Value* j) {
      llvm::Value* col = b_.CreateMul(b_.CreateAdd(j0, j), i64c(csB));
      loop(
          kn,
          [&](llvm::Value* kk) {
            llvm::Value* src = b_.CreateAdd(b_.CreateMul(b_.CreateAdd(k0, kk), i64c(rsB)), col);
            auto* l = b_.CreateAlignedLoad(f32_, gep(f32_, b, src), llvm::Align(4));
            l->setMetadata(llvm::LLVMContext::MD_noalias, packScope);
            auto* st =
                b_.CreateAlignedStore(l, gep(f32_, p, b_.CreateAdd(b_.CreateMul(kk, i64c(nr)), j)), llvm::Align(4));
            st->setMetadata(llvm::LLVMContext::MD_alias_scope, packScope);
          },
          /*vectorize=*/false);
    });
    return;
  }
  const int vecs = (int)((cols + vw - 1) / vw);
  const int64_t lastLanes = cols - (int64_t)(vecs - 1) * vw;
  llvm::Value* mask = nullptr;
  if (lastLanes < vw) {
    std::vector<llvm::Constant*> bits;
    for (int l = 0; l < vw; ++l) bits.push_back(b_.getInt1(l < lastLanes));
    mask = llvm::ConstantVector::get(bits);
  }
  loop(kn, [&](llvm::Value* kk) {
    llvm::Value* src = b_.CreateAdd(b_.CreateMul(b_.CreateAdd(k0, kk), i64c(rsB)), j0);
    llvm::Value* dst = b_.CreateMul(kk, i64c(nr));
    for (int v = 0; v < vecs; ++v) {
      llvm::Value* sp = gep(f32_, b, b_.CreateAdd(src, i64c((int64_t)v * vw)));
      llvm::Value* dp = gep(f32_, p, b_.CreateAdd(dst, i64c((int64_t)v * vw)));
      llvm::Instruction* l = nullptr;
      if (v == vecs - 1 && mask) l = b_.CreateMaskedLoad(vt, sp, llvm::Align(4), mask, llvm::Constant::getNullValue(vt));
      else l = b_.CreateAlignedLoad(vt, sp, llvm::Align(4));
      l->setMetadata(llvm::LLVMContext::MD_noalias, packScope);
      auto* st = b_.CreateAlignedStore(l, dp, llvm::Align(4));
      st->setMetadata(llvm::LLVMContext::MD_alias_scope, packScope);
    }
  });
}

}  // namespace gsl::backend::jit
