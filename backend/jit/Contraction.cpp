#include "backend/jit/Contraction.h"

#include <algorithm>
#include <map>
#include <string>

#include "support/Diagnostics.h"

namespace gsl::backend::jit {

namespace {

using ir::Shape;

// Choice of GEMM code, by measurement. Single thread, f32, AMD Zen 5 host
// (AVX-512; a shared 2-core VM, so best of 15 runs), through the engine
// (`C = A @ B` as one JIT-compiled function), GFLOP/s:
//
//   n x n x n, one product:      n =  64    128    256    512   1024
//     generated kernel (gemmKernel)    126    176    194    188    176
//     Eigen (gsl_rt_sgemm, direct)     107    128    135    131    122
//   64 products [64, n, n] @ [64, n, n]:
//                                n =   8     16     32     64
//     generated kernel                  31    100    137    138
//     Eigen, called per product          7     33     52     90
//
// The generated kernel (register-blocked 8 x 32 with AVX-512, B panels and
// A blocks packed for large products) wins at every size: all sizes and
// strides are compile-time constants, there is no call or dispatch, and
// Eigen's blocking on this host stays near 70% of the kernel's rate. So a
// GEMM whose B and C rows (or A and C columns) are contiguous, which is
// every matmul and most einsums, is generated; so is one whose C rows (or
// columns) are contiguous but B's (A's) are not, when it has at least one
// full row block: the kernel then reads B through packed panels whatever
// its strides (A·Bᵀ: attention scores and most einsum gradients). A C with
// neither contiguous rows nor columns is computed in temp space
// (planEinsumGemm). What is left, matrix-vector products with a strided
// matrix, calls Eigen (which packs any strides) when larger than 32^3
// multiply-adds and is generated dot-product loops when smaller.
// JitOptions::gemm forces one side, for such measurements.
void chooseGemmCode(Gemm& g, const JitOptions& o) {
  using GC = JitOptions::GemmCode;
  // The kernel writes C's rows as vectors (or, swapped, its columns); it
  // reads B's rows as vectors, or any layout of B through its packed
  // panels (A·Bᵀ: attention scores, and most einsum gradients).
  const bool rowsC = g.N > 1 && g.csC == 1, colsC = g.M > 1 && g.rsC == 1;
  const bool rows = rowsC && g.csB == 1;
  const bool cols = colsC && g.rsA == 1;
  const bool big = g.M * g.N * g.K > o.dotLoopMacs;
  // (Packing pays when the panel serves at least one row block.)
  const int mr = kernelRows(o.vectorWidth);
  const bool packedRows = rowsC && g.M >= mr, packedCols = colsC && g.N >= mr;
  const bool kernel = rows || cols || (big && (packedRows || packedCols));
  if (o.gemm == GC::Eigen || (!kernel && big && o.gemm == GC::Auto)) {
    g.code = Gemm::Code::Eigen;
    return;
  }
  if (!kernel) {
    g.code = Gemm::Code::Dots;
    return;
  }
  g.code = Gemm::Code::Kernel;
  if (!rows && !(packedRows && !cols)) {
    g.swap = true;
    Gemm t = g;
    g.M = t.N, g.N = t.M;
    g.rsA = t.csB, g.csA = t.rsB, g.rsB = t.csA, g.csB = t.rsA, g.rsC = t.csC, g.csC = t.rsC;
  }
  // K blocks of kc: a kc x nr panel of B (24 KiB with AVX2's nr = 16,
  // 48 KiB with AVX-512's nr = 32) stays in L1 or near it. 384 for both
  // widths by measurement (below).
  const int64_t kcMax = 384;
  g.kc = g.K <= kcMax * 3 / 2 ? std::max<int64_t>(g.K, 1) : kcMax;
  // Packing pays when many row blocks reuse a panel (and removes the cache
  // conflicts of power-of-two row strides).
  // B's panels are always packed when its rows are strided.
  g.pack = (g.M >= 4 * kernelRows(o.vectorWidth) && g.K >= 16) || g.csB != 1;
  // Packing A costs M kc scalar copies per K block against M kc N / nr
  // vector FMAs: worth it when there are a few column panels.
  const int64_t nr = kernelCols(o.vectorWidth);
  g.packA = g.pack && g.N >= 2 * nr;
  // L2/L3 blocking above mc rows: A's mc x kc block (576 KiB with AVX2)
  // stays in this host's 1 MiB L2. mc and kc by measurement, single
  // thread, against OpenBLAS 0.3.21 (cblas_sgemm, one thread) in the same
  // process, median over 9 to 11 alternating pairs of the thread CPU time
  // (AVX2 host, a shared VM at load average 7 to 9): at 2048^3
  // JIT/OpenBLAS 1.24 without L2 blocking (kc 256), 1.13 with mc 252 and
  // kc 256, 1.01 / 0.99 / 1.00 with kc 384 and mc 336 / 504 / 420; at
  // 1024^3 1.13 without, 1.00 with mc 384 and kc 384.
  // AVX-512 host (Xeon VM, 48 KiB L1d, 2 MiB L2; OPENBLAS_CORETYPE=SkylakeX,
  // 7 pairs at 2048^3, 11 at 1024^3, one or two runs each, +-0.05 noise),
  // with the kernel's prefetch of the next C tile: JIT/OpenBLAS at
  // 1024^3 / 2048^3 1.04 / 1.10 with kc 256 and mc 384, 1.02-1.04 /
  // 1.04-1.08 with kc 384 and mc 384; kc 256-512 with mc 192-1024 and
  // mr 12 or 14 rows no better.
  //
  // Above mc rows and nc columns the BLIS order (Gemm::nc) instead, 12
  // rows per kernel block: A's mr x kc sliver stays in L1 and B's kc x nc
  // block in L2. At 2048^3 on the AVX-512 host (OpenBLAS SkylakeX, 21
  // pairs a run, three or four runs each, +-0.04 noise): JIT/OpenBLAS
  // 1.06-1.10 with mc 384 as above; with the BLIS order and mr 8, nc
  // 256 / 384 / 512 / 768 / 1024: 1.06 / 0.98-1.07 / 0.99-1.09 / 1.08 /
  // 1.22; nc 384 with mr 12 / 14: 1.01-1.03 / 1.01-1.03; kc 512 and 768
  // with mr 12: 0.98-1.02 and 1.01-1.06.
  const int64_t mc = 384, nc = 384;
  g.mr = mr;
  if (g.packA && g.M > mc && g.N > nc) {
    g.nc = nc;
    g.mr = kernelRowsStreamed(o.vectorWidth);
  } else if (g.packA && g.M > mc) {
    g.mc = std::max<int64_t>(mc / mr, 1) * mr;  // whole row blocks
  }
  if (g.pack) {
    g.packTemp = g.tempBytes;
    const int64_t cols = g.nc ? g.nc : g.mc ? (g.N + nr - 1) / nr * nr : nr;
    g.tempBytes += (size_t)(g.kc * cols) * 4;
  }
  if (g.packA) {
    g.packATemp = g.tempBytes;
    g.tempBytes += (size_t)((g.mc ? g.mc : (g.M + g.mr - 1) / g.mr * g.mr) * g.kc) * 4;
  }
}

// A tensor seen through einsum labels: label -> element stride (labels of
// size 1 are left out: their index is always 0).
using LabelStrides = std::map<char, int64_t>;

// The stride of `group` read as one dim (its labels nested in this order),
// or nullopt if the labels are not contiguous that way. An empty group is
// one dim of size 1 (stride 0).
std::optional<int64_t> groupStride(const LabelStrides& t, const std::string& group,
                                   const std::map<char, int64_t>& size) {
  if (group.empty()) return 0;
  for (size_t i = 0; i + 1 < group.size(); ++i)
    if (t.at(group[i]) != t.at(group[i + 1]) * size.at(group[i + 1])) return std::nullopt;
  return t.at(group.back());
}

bool hasRepeatedLabel(const std::string& s) {
  for (size_t i = 0; i < s.size(); ++i)
    if (s.find(s[i], i + 1) != std::string::npos) return true;
  return false;
}

// Plans a two-operand einsum as a batched GEMM (the form of Kernels.cpp's
// einsumAsMatMul); nullopt when the spec has another form.
// `stA`, `stB`: the operands' element strides (row-major when empty).
std::optional<Gemm> planEinsumGemm(const ir::EinsumSpec& es, const Shape& sa, const Shape& sb, const Shape& so,
                                   const Strides& stA, const Strides& stB) {
  const std::string &la = es.inputs[0], &lb = es.inputs[1], &lo = es.output;
  if (hasRepeatedLabel(la) || hasRepeatedLabel(lb)) return std::nullopt;
  auto in = [](const std::string& s, char c) { return s.find(c) != std::string::npos; };
  for (char c : la)
    if (!in(lo, c) && !in(lb, c)) return std::nullopt;  // summed over in A only
  for (char c : lb)
    if (!in(lo, c) && !in(la, c)) return std::nullopt;
  std::map<char, int64_t> size;
  for (size_t d = 0; d < la.size(); ++d) size[la[d]] = sa[d];
  for (size_t d = 0; d < lb.size(); ++d) size[lb[d]] = sb[d];
  auto strides = [&](const std::string& l, const Shape& s, const Strides& given = {}) {
    LabelStrides t;
    Strides st = given.empty() ? rowMajorStrides(s) : given;
    for (size_t d = 0; d < l.size(); ++d)
      if (s[d] != 1) t[l[d]] = st[d];
    return t;
  };
  LabelStrides A = strides(la, sa, stA), B = strides(lb, sb, stB), C = strides(lo, so);
  // Groups (size-1 labels dropped): batch, M and N in output order, K in A's order.
  std::string batch, ms, ns, ks;
  for (char c : lo) {
    if (size[c] == 1) continue;
    if (in(la, c) && in(lb, c)) batch += c;
    else if (in(la, c)) ms += c;
    else ns += c;
  }
  for (char c : la)
    if (size[c] != 1 && !in(lo, c)) ks += c;
  auto prod = [&](const std::string& g) {
    int64_t p = 1;
    for (char c : g) p *= size[c];
    return p;
  };
  Gemm g;
  g.M = prod(ms);
  g.N = prod(ns);
  g.K = prod(ks);
  size_t temp = 0;
  // Lays `t` out row-major in label order `order` in temp space.
  auto relayout = [&](LabelStrides& t, const std::string& order, Gemm::Copy& cp, bool toResult) {
    cp.on = true;
    Shape shape;
    for (char c : order) shape.push_back(size[c]);
    Strides dense = rowMajorStrides(shape);
    cp.shape = shape;
    cp.src.clear();
    cp.dst.clear();
    LabelStrides nt;
    for (size_t i = 0; i < order.size(); ++i) nt[order[i]] = dense[i];
    for (char c : order) {
      // A copy into temp reads the tensor's layout and writes the dense
      // one; the result copy reads the dense temp and writes the tensor.
      cp.src.push_back(toResult ? nt[c] : t[c]);
      cp.dst.push_back(toResult ? t[c] : nt[c]);
    }
    cp.temp = temp;
    temp += (size_t)numel(shape) * 4;
    t = nt;
  };
  if (!groupStride(A, ms, size) || !groupStride(A, ks, size)) relayout(A, batch + ms + ks, g.copyA, false);
  if (!groupStride(B, ks, size) || !groupStride(B, ns, size)) relayout(B, batch + ks + ns, g.copyB, false);
  // C is also computed in temp space when neither its rows nor its columns
  // are contiguous (a batch label innermost): the kernel writes vectors.
  auto unit = [&](const std::string& grp) { return !grp.empty() && *groupStride(C, grp, size) == 1; };
  if (!groupStride(C, ms, size) || !groupStride(C, ns, size) ||
      (!(ms.empty() && ns.empty()) && !unit(ms) && !unit(ns)))
    relayout(C, batch + ms + ns, g.copyC, true);
  g.rsA = *groupStride(A, ms, size);
  g.csA = *groupStride(A, ks, size);
  g.rsB = *groupStride(B, ks, size);
  g.csB = *groupStride(B, ns, size);
  g.rsC = *groupStride(C, ms, size);
  g.csC = *groupStride(C, ns, size);
  for (char c : batch) {
    g.batch.push_back(size[c]);
    g.bA.push_back(A[c]);
    g.bB.push_back(B[c]);
    g.bC.push_back(C[c]);
  }
  g.tempBytes = temp;
  return g;
}

// NumPy matmul (1-D operands promoted, batch dims broadcast) as a GEMM.
Gemm planMatMul(const Shape& a, const Shape& b, const Shape& out) {
  Shape sa = a, sb = b;
  if (sa.size() == 1) sa.insert(sa.begin(), 1);
  if (sb.size() == 1) sb.push_back(1);
  Gemm g;
  g.M = sa[sa.size() - 2];
  g.K = sa.back();
  g.N = sb.back();
  g.rsA = g.K;
  g.csA = 1;
  g.rsB = g.N;
  g.csB = 1;
  g.rsC = g.N;
  g.csC = 1;
  Shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2), batch;
  GSL_ASSERT(ir::broadcastShapes(ba, bb, batch), "jit: matmul batch dims do not broadcast");
  GSL_ASSERT(numel(batch) * g.M * g.N == numel(out), "jit: matmul result type mismatch");
  g.batch = batch;
  g.bA = bcastStrides(ba, batch);
  g.bB = bcastStrides(bb, batch);
  g.bC = rowMajorStrides(batch);
  for (auto& s : g.bA) s *= g.M * g.K;
  for (auto& s : g.bB) s *= g.K * g.N;
  for (auto& s : g.bC) s *= g.M * g.N;
  collapse(g.batch, {&g.bA, &g.bB, &g.bC});
  return g;
}

// A bf16 contraction runs GSL's f32 GEMM on widened copies: an operand
// that is not relaid out anyway is copied as it lies (its strides stay
// valid), and the result is computed in f32 temp space and rounded once
// on the way out. The conversions are O(MK + KN + MN) against the
// GEMM's O(MNK).
void widenBF16Operands(Gemm& g, const ir::Op& op) {
  g.bf16 = true;
  auto asIs = [&](Gemm::Copy& cp, const ir::Value* v) {
    if (cp.on) return;
    cp.on = true;
    cp.shape = {v->type.numElements()};
    cp.src = cp.dst = {1};
    cp.temp = g.tempBytes;
    g.tempBytes += (size_t)v->type.numElements() * 4;
  };
  asIs(g.copyA, op.operands[0]);
  asIs(g.copyB, op.operands[1]);
  asIs(g.copyC, op.result);
}

}  // namespace

std::optional<Gemm> planGemm(const ir::Op& op, const JitOptions& opts, const std::vector<Strides>& operandStrides) {
  std::optional<Gemm> g;
  const ir::Value* v = op.result;
  auto given = [&](size_t i) { return i < operandStrides.size() ? operandStrides[i] : Strides{}; };
  if (op.kind == ir::OpKind::MatMul && op.operands.size() == 2) {
    const Strides sa = given(0), sb = given(1);
    const Shape &a = op.operands[0]->type.shape, &b = op.operands[1]->type.shape;
    if ((!sa.empty() || !sb.empty()) && (a.size() != 2 || b.size() != 2)) return std::nullopt;
    g = planMatMul(a, b, v->type.shape);
    if (!sa.empty()) g->rsA = sa[0], g->csA = sa[1];
    if (!sb.empty()) g->rsB = sb[0], g->csB = sb[1];
  }
  if (op.kind == ir::OpKind::Einsum && op.operands.size() == 2) {
    g = planEinsumGemm(op.attrs.getEinsum("spec"), op.operands[0]->type.shape, op.operands[1]->type.shape, v->type.shape,
                       given(0), given(1));
  }
  // vdpbf16ps on the bf16 elements: its packing reads any strides, so
  // there is nothing to choose (no swap, no packing of ours). Except for
  // GEMMs of fewer than 2^16 multiply-adds each (the batched 16 x 16 x 128
  // products of attention): there its per-call packing costs more than the
  // product, and the widened f32 kernel, generated for the constant sizes,
  // is faster (AMD EPYC with AVX512_BF16, bench_bf16_gemm, single thread,
  // GFLOP/s vdpbf16ps / portable: 128 x 16 x 16 x 128 scores 31-40 / 62-73,
  // context 56-85 / 87-99, its gradient 42-108 / 87-98).
  const int64_t dotMinMacs = int64_t(1) << 16;
  if (g && v->type.dtype == ir::DType::BF16 && opts.bf16Dot > 0 && g->M * g->N * g->K >= dotMinMacs) {
    g->bf16 = true;
    g->code = Gemm::Code::BF16Dot;
    return g;
  }
  if (g && v->type.dtype == ir::DType::BF16) widenBF16Operands(*g, op);
  if (g) chooseGemmCode(*g, opts);
  return g;
}

}  // namespace gsl::backend::jit
