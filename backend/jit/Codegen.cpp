// IR -> LLVM IR for the JIT engine.
//
// One ir::Function becomes one LLVM function
//
//   i32 @gsl_fn_N(ptr %inputs, ptr %outputs, ptr %workspace, ptr %ctx)
//
// that runs the ops in order as straight-line code of loop nests built with
// IRBuilder. It returns 0, or 1 as soon as a runtime helper reported an
// error into the call context (which the engine rethrows).
//
// What is generated and what is called:
//   generated: every elementwise op (unary, binary, where, cast, compare,
//     broadcast) with NumPy broadcasting as stride-0 loads; reductions
//     (sum/mean/max/min/argmax); softmax, log_softmax, layer_norm, cumsum;
//     transpose, concat, slice, one_hot, take (with its bounds check);
//     constants; matmul and einsum: a vectorised GEMM kernel (batched over
//     any strides), or a loop nest for einsums that are not a GEMM.
//   aliased (no code, no buffer): reshape, slice of a contiguous block,
//     params (read in place from the param store).
//   called (extern "C", Runtime.cpp): param lookup, random_uniform
//     (Philox, backend/Random.h), collectives (backend::evalCollective),
//     take's error report, integer pow, Eigen for large GEMMs whose
//     layout the kernel cannot read (see the measurement below), and
//     backend::evalOp for any op this file does not know (ops added to the
//     op table later keep working, at interpreter speed).
//
// Fusion: an elementwise op whose result has a single use, by an
// elementwise op or a sum/mean/max/min of the same element count, is not
// materialised; its consumer evaluates it inline, so a chain of elementwise
// ops (and a reduction of it) is one loop nest with no intermediate buffers.
// Constants are always inlined into elementwise code as immediates.
//
// Buffers: function results are written straight into the output tensors;
// every other materialised value lives in the workspace at an offset chosen
// by a liveness-based allocator (a value's bytes are reused once its last
// reader ran), whose high-water mark is the function's peak bytes.
//
// Numerics follow backend/Kernels.cpp: f32 sums and means accumulate in
// double, max/min propagate NaN, casts saturate, i32 arithmetic wraps, and
// the same formulas for gelu and sigmoid. Transcendentals are LLVM
// intrinsics (llvm.exp/log/sqrt/pow.f32); tanh is built from llvm.exp.
#include "backend/jit/Codegen.h"

#include <llvm/IR/BasicBlock.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>

#include "support/Diagnostics.h"

namespace gsl::backend::jit {

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
// every matmul and most einsums, is generated. Only layouts with neither
// call Eigen (which packs any strides) when larger than 32^3
// multiply-adds; smaller ones are generated dot-product loops.
// GSL_JIT_GEMM=eigen|loops forces one side, for such measurements.
const CodegenOptions& defaultCodegenOptions() {
  static const CodegenOptions opts = [] {
    CodegenOptions o;
    if (const char* e = std::getenv("GSL_JIT_GEMM")) {
      if (std::strcmp(e, "eigen") == 0) o.gemm = CodegenOptions::GemmCode::Eigen;
      if (std::strcmp(e, "loops") == 0) o.gemm = CodegenOptions::GemmCode::Loops;
    }
    if (const char* e = std::getenv("GSL_JIT_FALLBACK")) {
      std::string list = e, name;
      for (size_t i = 0; i <= list.size(); ++i) {
        if (i < list.size() && list[i] != ',') {
          name += list[i];
          continue;
        }
        if (const ir::OpInfo* info = ir::lookupMnemonic(name)) o.fallbackOps.push_back(info->kind);
        name.clear();
      }
    }
    return o;
  }();
  return opts;
}

namespace {

using ir::DType;
using ir::OpClass;
using ir::OpKind;
using ir::Shape;
using Strides = std::vector<int64_t>;
using IRValue = const ir::Value*;

// ================================================================ shape helpers

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Strides rowMajor(const Shape& s) {
  Strides st(s.size());
  int64_t acc = 1;
  for (int d = (int)s.size() - 1; d >= 0; --d) {
    st[d] = acc;
    acc *= s[d];
  }
  return st;
}

// Strides of a tensor of shape `in` read broadcast (NumPy, right-aligned)
// over `out`: 0 where `in` has size 1 or no dim.
Strides bcastStrides(const Shape& in, const Shape& out) {
  GSL_ASSERT(in.size() <= out.size(), "jit: broadcast operand rank exceeds result rank");
  Strides st(out.size(), 0), own = rowMajor(in);
  size_t lead = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) {
    GSL_ASSERT(in[i] == out[lead + i] || in[i] == 1, "jit: incompatible broadcast");
    st[lead + i] = in[i] == 1 ? 0 : own[i];
  }
  return st;
}

// Simplifies an iteration space read through several stride vectors: drops
// size-1 dims and merges adjacent dims that are contiguous in every vector
// (stride[d] == stride[d+1] * size[d+1]), so an elementwise op over
// same-shaped operands becomes one flat loop.
void collapse(Shape& s, std::vector<Strides*> st) {
  Shape ns;
  std::vector<Strides> nst(st.size());
  for (size_t d = 0; d < s.size(); ++d) {
    if (s[d] == 1) continue;
    if (!ns.empty()) {
      bool ok = true;
      for (size_t k = 0; k < st.size(); ++k) ok &= nst[k].back() == (*st[k])[d] * s[d];
      if (ok) {
        ns.back() *= s[d];
        for (size_t k = 0; k < st.size(); ++k) nst[k].back() = (*st[k])[d];
        continue;
      }
    }
    ns.push_back(s[d]);
    for (size_t k = 0; k < st.size(); ++k) nst[k].push_back((*st[k])[d]);
  }
  s = ns;
  for (size_t k = 0; k < st.size(); ++k) *st[k] = nst[k];
}

bool isElementwise(OpKind k) {
  OpClass c = ir::opInfo(k).cls;
  return c == OpClass::Unary || c == OpClass::Binary || c == OpClass::Ternary || k == OpKind::Broadcast;
}

bool isPlainReduction(OpKind k) {
  return k == OpKind::Sum || k == OpKind::Mean || k == OpKind::Max || k == OpKind::Min;
}

// Ops that read every operand element by element through an expression
// tree, so a fused producer can be evaluated inline.
bool readsThroughTrees(OpKind k) { return isElementwise(k) || isPlainReduction(k); }

// Ops that must run even when their result is unused: they can fail (take)
// or communicate with other ranks (collectives).
bool mustRun(const ir::Op& op) {
  return op.kind == OpKind::Take || op.info().cls == OpClass::Collective;
}

// The constant op's value converted to its element type, as Kernels.cpp.
double constantValue(const ir::Op& op) {
  const ir::Attr* v = op.attrs.get("value");
  GSL_ASSERT(v, "jit: constant without a value");
  double d = 0;
  if (auto* b = std::get_if<bool>(v)) d = *b ? 1 : 0;
  else d = op.attrs.getFloat("value");
  return d;
}

int32_t constantWord(const ir::Op& op, DType dt) {
  double d = constantValue(op);
  if (dt == DType::Bool) return d != 0 ? 1 : 0;
  if (std::isnan(d)) return 0;
  if (d >= 2147483647.0) return std::numeric_limits<int32_t>::max();
  if (d <= -2147483648.0) return std::numeric_limits<int32_t>::min();
  return (int32_t)d;
}

// ================================================================ workspace allocator

// Offsets in one arena; freed blocks are reused (best fit) and coalesced.
class Arena {
 public:
  static constexpr size_t kAlign = 64;
  size_t alloc(size_t n) {
    n = (n + kAlign - 1) / kAlign * kAlign;
    if (n == 0) n = kAlign;
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (it->second >= n && (best == free_.end() || it->second < best->second)) best = it;
    if (best != free_.end()) {
      size_t off = best->first, size = best->second;
      free_.erase(best);
      if (size > n) free_[off + n] = size - n;
      return off;
    }
    size_t off = top_;
    // Extend a free block that ends at the top instead of leaving it behind.
    if (!free_.empty()) {
      auto last = std::prev(free_.end());
      if (last->first + last->second == top_) {
        off = last->first;
        free_.erase(last);
      }
    }
    top_ = off + n;
    peak_ = std::max(peak_, top_);
    return off;
  }
  void release(size_t off, size_t n) {
    n = (n + kAlign - 1) / kAlign * kAlign;
    if (n == 0) n = kAlign;
    auto it = free_.emplace(off, n).first;
    auto next = std::next(it);
    if (next != free_.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free_.erase(next);
    }
    if (it != free_.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        free_.erase(it);
        it = prev;
      }
    }
    if (it->first + it->second == top_) {
      top_ = it->first;
      free_.erase(it);
    }
  }
  size_t peak() const { return peak_; }

 private:
  std::map<size_t, size_t> free_;  // offset -> size
  size_t top_ = 0, peak_ = 0;
};

// ================================================================ contractions

// A contraction as a (batched) GEMM: for every index of `batch`,
// C[i, j] = sum_k A[i, k] B[k, j] with the given element strides (an empty
// M, N or K group has size 1). Operands that cannot be addressed that way
// are first copied into the op's temp space; a result that cannot is
// computed into temp space and copied out.
struct Gemm {
  int64_t M = 1, N = 1, K = 1;
  int64_t rsA = 0, csA = 0, rsB = 0, csB = 0, rsC = 0, csC = 0;
  Shape batch;
  Strides bA, bB, bC;
  // Copies: iteration `shape`, strides of the source and of the (row-major)
  // destination. tempX is the byte offset in the op's temp space.
  struct Copy {
    bool on = false;
    Shape shape;
    Strides src, dst;
    size_t temp = 0;
  };
  Copy copyA, copyB, copyC;  // copyC: temp -> result
  size_t tempBytes = 0;
  // The code (chooseGemmCode): the generated kernel (on A and B exchanged
  // and the strides transposed when `swap`: C^T = B^T A^T), Eigen, or
  // dot-product loops. The kernel runs K in blocks of kc and, when `pack`,
  // copies each kc x nr panel of B to temp space at packTemp.
  enum class Code { Kernel, Eigen, Dots } code = Code::Dots;
  bool swap = false;
  int64_t kc = 0;
  bool pack = false;
  size_t packTemp = 0;
  // And, when `packA`, each K block of A to temp space at packATemp, as
  // row blocks of kc x mr (the kernel's broadcasts then read one
  // contiguous stream instead of mr rows that may share cache sets).
  bool packA = false;
  size_t packATemp = 0;
};

// Register blocking of the generated GEMM kernel for `vw` f32 lanes: an
// mr x nr block of C (2 mr vector registers: 16 of AVX-512's 32, 12 of
// AVX2's 16).
int kernelRows(int vw) { return vw >= 16 ? 8 : 6; }
int64_t kernelCols(int vw) { return 2 * (int64_t)vw; }

void chooseGemmCode(Gemm& g, const CodegenOptions& o) {
  using GC = CodegenOptions::GemmCode;
  const bool rows = g.N > 1 && g.csB == 1 && g.csC == 1;
  const bool cols = g.M > 1 && g.rsA == 1 && g.rsC == 1;
  const bool big = g.M * g.N * g.K > o.dotLoopMacs;
  if (o.gemm == GC::Eigen || (!rows && !cols && big && o.gemm == GC::Auto)) {
    g.code = Gemm::Code::Eigen;
    return;
  }
  if (!rows && !cols) {
    g.code = Gemm::Code::Dots;
    return;
  }
  g.code = Gemm::Code::Kernel;
  if (!rows) {
    g.swap = true;
    Gemm t = g;
    g.M = t.N, g.N = t.M;
    g.rsA = t.csB, g.csA = t.rsB, g.rsB = t.csA, g.csB = t.rsA, g.rsC = t.csC, g.csC = t.rsC;
  }
  g.kc = g.K <= 384 ? std::max<int64_t>(g.K, 1) : 256;
  // Packing pays when many row blocks reuse a panel (and removes the cache
  // conflicts of power-of-two row strides).
  g.pack = g.M >= 4 * kernelRows(o.vectorWidth) && g.K >= 16;
  if (g.pack) {
    g.packTemp = g.tempBytes;
    g.tempBytes += (size_t)(g.kc * kernelCols(o.vectorWidth)) * 4;
  }
  // Packing A costs M kc scalar copies per K block against M kc N / nr
  // vector FMAs: worth it when there are a few column panels.
  const int mr = kernelRows(o.vectorWidth);
  g.packA = g.pack && g.N >= 2 * kernelCols(o.vectorWidth);
  if (g.packA) {
    g.packATemp = g.tempBytes;
    g.tempBytes += (size_t)((g.M + mr - 1) / mr * mr * g.kc) * 4;
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
std::optional<Gemm> planEinsumGemm(const ir::EinsumSpec& es, const Shape& sa, const Shape& sb, const Shape& so) {
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
  auto strides = [&](const std::string& l, const Shape& s) {
    LabelStrides t;
    Strides st = rowMajor(s);
    for (size_t d = 0; d < l.size(); ++d)
      if (s[d] != 1) t[l[d]] = st[d];
    return t;
  };
  LabelStrides A = strides(la, sa), B = strides(lb, sb), C = strides(lo, so);
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
    Strides dense = rowMajor(shape);
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
  if (!groupStride(C, ms, size) || !groupStride(C, ns, size)) relayout(C, batch + ms + ns, g.copyC, true);
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
  g.bC = rowMajor(batch);
  for (auto& s : g.bA) s *= g.M * g.K;
  for (auto& s : g.bB) s *= g.K * g.N;
  for (auto& s : g.bC) s *= g.M * g.N;
  collapse(g.batch, {&g.bA, &g.bB, &g.bC});
  return g;
}

// ================================================================ the plan

// Where a value's elements live.
struct Storage {
  enum Kind {
    None,       // not materialised (fused into its consumer, an inlined constant, or dead)
    Input,      // inputs[index]
    Output,     // outputs[index]
    Workspace,  // workspace + offset
    Alias,      // the elements of `base`, from element `elemOffset` on (reshape, slice)
    Param,      // the param store's buffer, returned by gsl_rt_param
  } kind = None;
  int index = -1;
  size_t offset = 0;
  IRValue base = nullptr;
  int64_t elemOffset = 0;
};

struct Plan {
  std::vector<bool> live;       // per op: its code runs
  std::vector<bool> fallback;   // per op: run by the reference kernel (gsl_rt_eval_op)
  std::vector<bool> fused;      // per op: evaluated inline by its single consumer
  std::unordered_map<IRValue, Storage> storage;
  std::vector<size_t> temp;     // per op: byte offset of its temp space
  std::vector<std::optional<Gemm>> gemm;  // per op: contraction plan
  std::vector<ResultSource> results;
  size_t peak = 0;
};

size_t bytesOf(IRValue v) { return (size_t)v->type.numElements() * 4; }

// The temp bytes an op needs during its own execution.
size_t tempBytes(const ir::Op& op, const Plan& p, size_t i) {
  const ir::TensorType& in = op.operands.empty() ? op.result->type : op.operands[0]->type;
  if (p.fallback[i]) return 0;
  switch (op.kind) {
    case OpKind::Sum: case OpKind::Mean:
      return in.dtype == DType::F32 ? (size_t)op.result->type.numElements() * 8 : 0;
    case OpKind::LayerNorm: {
      Shape kept = in.shape;
      for (int64_t a : op.attrs.getInts("axis")) kept[a] = 1;
      return (size_t)numel(kept) * 16;
    }
    case OpKind::MatMul: case OpKind::Einsum: return p.gemm[i] ? p.gemm[i]->tempBytes : 0;
    default: return 0;
  }
}

Plan makePlan(const ir::Function& f, const CodegenOptions& opts) {
  Plan p;
  const size_t n = f.ops.size();
  std::unordered_map<IRValue, int> resultIndex;  // first result slot of a value
  for (size_t j = 0; j < f.results.size(); ++j) resultIndex.emplace(f.results[j], (int)j);

  // Liveness of ops: backwards from results and ops that must run.
  p.live.assign(n, false);
  std::unordered_map<IRValue, bool> needed;
  for (IRValue v : f.results) needed[v] = true;
  for (size_t i = n; i-- > 0;) {
    const ir::Op& op = *f.ops[i];
    if (needed.count(op.result) || mustRun(op)) {
      p.live[i] = true;
      for (IRValue v : op.operands) needed[v] = true;
    }
  }

  p.fallback.assign(n, false);
  for (size_t i = 0; i < n; ++i)
    p.fallback[i] = std::find(opts.fallbackOps.begin(), opts.fallbackOps.end(), f.ops[i]->kind) != opts.fallbackOps.end();
  // Elementwise code that is generated (and so may be fused), and ops that
  // read their operands through generated expression trees.
  auto elementwise = [&](size_t i) { return !p.fallback[i] && isElementwise(f.ops[i]->kind); };
  auto readsTrees = [&](size_t i) { return !p.fallback[i] && readsThroughTrees(f.ops[i]->kind); };

  // Uses by live ops (with multiplicity) and the (last) consumer.
  std::unordered_map<IRValue, int> uses;
  std::unordered_map<IRValue, size_t> consumer;
  for (size_t i = 0; i < n; ++i) {
    if (!p.live[i]) continue;
    for (IRValue v : f.ops[i]->operands) {
      uses[v]++;
      consumer[v] = i;
    }
  }

  // Fusion: a single-use elementwise result read through a tree by an op of
  // the same element count (a reduction reads its operand's own shape).
  p.fused.assign(n, false);
  for (size_t i = 0; i < n; ++i) {
    const ir::Op& op = *f.ops[i];
    IRValue v = op.result;
    if (!p.live[i] || !elementwise(i) || resultIndex.count(v) || uses[v] != 1) continue;
    const ir::Op& c = *f.ops[consumer[v]];
    if (!readsTrees(consumer[v])) continue;
    if (isElementwise(c.kind) && v->type.numElements() != c.result->type.numElements()) continue;
    p.fused[i] = true;
  }

  // Constants read by an op that does not inline them need a buffer.
  std::unordered_map<IRValue, bool> constNeedsBuffer;
  for (size_t i = 0; i < n; ++i) {
    if (!p.live[i] || p.fused[i]) continue;
    const ir::Op& op = *f.ops[i];
    if (readsTrees(i)) continue;
    for (IRValue v : op.operands)
      if (v->def && v->def->kind == OpKind::Constant) constNeedsBuffer[v] = true;
  }

  // Storage kinds.
  for (IRValue a : f.args) p.storage[a] = {Storage::Input, a->argIndex};
  p.results.resize(f.results.size());
  for (size_t j = 0; j < f.results.size(); ++j) {
    IRValue v = f.results[j];
    if (resultIndex[v] != (int)j) p.results[j] = {ResultSource::Repeat, resultIndex[v]};
    else if (v->argIndex >= 0) p.results[j] = {ResultSource::Arg, v->argIndex};
    else p.results[j] = {ResultSource::Computed, (int)j};
  }
  p.gemm.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const ir::Op& op = *f.ops[i];
    IRValue v = op.result;
    Storage& s = p.storage[v];
    if (!p.live[i] || p.fused[i]) continue;
    if (op.kind == OpKind::MatMul && !p.fallback[i])
      p.gemm[i] = planMatMul(op.operands[0]->type.shape, op.operands[1]->type.shape, v->type.shape);
    if (op.kind == OpKind::Einsum && op.operands.size() == 2 && !p.fallback[i]) {
      ir::EinsumSpec es;
      std::string err = ir::parseEinsum(op.attrs.getString("spec"), 2, es);
      GSL_ASSERT(err.empty(), "jit: einsum: " + err);
      p.gemm[i] = planEinsumGemm(es, op.operands[0]->type.shape, op.operands[1]->type.shape, v->type.shape);
    }
    if (p.gemm[i]) chooseGemmCode(*p.gemm[i], opts);
    if (resultIndex.count(v) && v->argIndex < 0) {
      s = {Storage::Output, resultIndex[v]};
      continue;
    }
    if (p.fallback[i]) {
      s.kind = Storage::Workspace;
      continue;
    }
    switch (op.kind) {
      case OpKind::Param: s.kind = Storage::Param; break;
      case OpKind::Reshape: s = {Storage::Alias, -1, 0, op.operands[0], 0}; break;
      case OpKind::Slice: {
        const Shape& sh = op.operands[0]->type.shape;
        int64_t ax = op.attrs.getInt("axis"), outer = 1, inner = 1;
        for (int64_t d = 0; d < ax; ++d) outer *= sh[d];
        for (size_t d = ax + 1; d < sh.size(); ++d) inner *= sh[d];
        if (outer == 1) s = {Storage::Alias, -1, 0, op.operands[0], op.attrs.getInt("start") * inner};
        else s.kind = Storage::Workspace;
        break;
      }
      case OpKind::Constant: s.kind = constNeedsBuffer.count(v) ? Storage::Workspace : Storage::None; break;
      default: s.kind = Storage::Workspace;
    }
  }

  // Last reader of each buffer: a value read inside a fused tree is read by
  // the tree's root; reading an alias reads its base.
  std::vector<size_t> root(n);
  for (size_t i = n; i-- > 0;) root[i] = p.fused[i] ? root[consumer[f.ops[i]->result]] : i;
  auto owner = [&](IRValue v) {
    while (p.storage[v].kind == Storage::Alias) v = p.storage[v].base;
    return v;
  };
  std::unordered_map<IRValue, size_t> lastUse;
  for (size_t i = 0; i < n; ++i) {
    if (!p.live[i]) continue;
    IRValue r = owner(f.ops[i]->result);
    if (!lastUse.count(r)) lastUse[r] = root[i];
    for (IRValue v : f.ops[i]->operands) {
      IRValue o = owner(v);
      lastUse[o] = std::max(lastUse.count(o) ? lastUse[o] : 0, root[i]);
    }
  }

  // Offsets: at each op allocate its result and temp space, then free the
  // temp space and every buffer whose last reader this op was.
  Arena arena;
  std::map<size_t, std::vector<IRValue>> freeAt;
  p.temp.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    if (!p.live[i] || p.fused[i]) continue;
    const ir::Op& op = *f.ops[i];
    Storage& s = p.storage[op.result];
    if (s.kind == Storage::Workspace) {
      s.offset = arena.alloc(bytesOf(op.result));
      freeAt[lastUse[op.result]].push_back(op.result);
    }
    if (size_t t = tempBytes(op, p, i)) {
      p.temp[i] = arena.alloc(t);
      arena.release(p.temp[i], t);
    }
    for (IRValue v : freeAt[i]) arena.release(p.storage[v].offset, bytesOf(v));
    freeAt.erase(i);
  }
  p.peak = arena.peak();
  return p;
}

// ================================================================ code generation

class Lowering {
 public:
  Lowering(const ir::Function& f, llvm::Module& m, const CodegenOptions& opts)
      : f_(f), m_(m), c_(m.getContext()), b_(c_), opts_(opts) {
    f32_ = b_.getFloatTy();
    f64_ = b_.getDoubleTy();
    i32_ = b_.getInt32Ty();
    i64_ = b_.getInt64Ty();
    i1_ = b_.getInt1Ty();
    ptr_ = b_.getPtrTy();
  }

  Plan& plan() { return plan_; }

  void run(const std::string& symbol) {
    plan_ = makePlan(f_, opts_);
    for (size_t i = 0; i < f_.ops.size(); ++i) defIndex_[f_.ops[i]->result] = i;
    auto* fty = llvm::FunctionType::get(i32_, {ptr_, ptr_, ptr_, ptr_}, false);
    fn_ = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, symbol, m_);
    fn_->addFnAttr(llvm::Attribute::NoUnwind);
    inputs_ = fn_->getArg(0);
    outputs_ = fn_->getArg(1);
    workspace_ = fn_->getArg(2);
    ctx_ = fn_->getArg(3);
    inputs_->setName("inputs");
    outputs_->setName("outputs");
    workspace_->setName("workspace");
    ctx_->setName("ctx");
    for (int a = 0; a < 4; ++a) fn_->addParamAttr(a, llvm::Attribute::NoCapture);

    entry_ = llvm::BasicBlock::Create(c_, "entry", fn_);
    error_ = llvm::BasicBlock::Create(c_, "error", fn_);
    b_.SetInsertPoint(error_);
    b_.CreateRet(b_.getInt32(1));
    b_.SetInsertPoint(entry_);

    for (IRValue a : f_.args) bindStorage(a);
    for (size_t i = 0; i < f_.ops.size(); ++i) {
      if (!plan_.live[i] || plan_.fused[i]) continue;
      opIndex_ = (int64_t)i;
      newScope();
      emitOp(*f_.ops[i]);
    }
    b_.CreateRet(b_.getInt32(0));
    std::string err;
    llvm::raw_string_ostream os(err);
    GSL_ASSERT(!llvm::verifyFunction(*fn_, &os), "jit: generated invalid LLVM IR for @" + f_.name + ": " + err);
  }

 private:
  const ir::Function& f_;
  llvm::Module& m_;
  llvm::LLVMContext& c_;
  llvm::IRBuilder<> b_;
  const CodegenOptions& opts_;
  Plan plan_;
  llvm::Function* fn_ = nullptr;
  llvm::Value *inputs_ = nullptr, *outputs_ = nullptr, *workspace_ = nullptr, *ctx_ = nullptr;
  llvm::BasicBlock *entry_ = nullptr, *error_ = nullptr;
  llvm::Type *f32_, *f64_, *i32_, *i64_, *i1_, *ptr_;
  int64_t opIndex_ = 0;
  std::unordered_map<IRValue, llvm::Value*> ptrs_;  // base pointer of every materialised value
  std::unordered_map<IRValue, size_t> defIndex_;    // op index of every op result
  llvm::MDNode* domain_ = nullptr;                   // alias scopes (see loadIn)
  llvm::MDNode* scope_ = nullptr;

  // -------------------------------------------------------------- basics

  llvm::Type* elemType(DType d) { return d == DType::F32 ? f32_ : i32_; }
  llvm::Value* i64c(int64_t v) { return b_.getInt64(v); }
  llvm::Value* f32c(float v) { return llvm::ConstantFP::get(f32_, v); }
  llvm::Value* f64c(double v) { return llvm::ConstantFP::get(f64_, v); }

  // Base pointer of a materialised value (computed at the top level of the
  // function, so it dominates every later use).
  llvm::Value* ptr(IRValue v) {
    auto it = ptrs_.find(v);
    GSL_ASSERT(it != ptrs_.end(), "jit: value %" + std::to_string(v->id) + " has no buffer");
    return it->second;
  }

  void bindStorage(IRValue v) {
    const Storage& s = plan_.storage.at(v);
    switch (s.kind) {
      case Storage::Input:
        ptrs_[v] = b_.CreateLoad(ptr_, b_.CreateConstInBoundsGEP1_64(ptr_, inputs_, s.index), "in");
        break;
      case Storage::Output:
        ptrs_[v] = b_.CreateLoad(ptr_, b_.CreateConstInBoundsGEP1_64(ptr_, outputs_, s.index), "out");
        break;
      case Storage::Workspace:
        ptrs_[v] = b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), workspace_, s.offset, "buf");
        break;
      case Storage::Alias:
        ptrs_[v] = s.elemOffset ? b_.CreateConstInBoundsGEP1_64(i32_, ptr(s.base), s.elemOffset, "view")
                                : ptr(s.base);
        break;
      case Storage::Param: case Storage::None: break;  // bound by the param op / none
    }
  }

  llvm::Value* tempPtr(size_t offset) {
    return b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), workspace_, plan_.temp[opIndex_] + offset, "tmp");
  }

  llvm::Value* gep(llvm::Type* t, llvm::Value* base, llvm::Value* off) {
    return b_.CreateInBoundsGEP(t, base, off);
  }
  // Loads of the op's own buffers (its result, temp space).
  llvm::Value* load(llvm::Type* t, llvm::Value* base, llvm::Value* off) {
    return b_.CreateAlignedLoad(t, gep(t, base, off), llvm::Align(4));
  }
  // Loads of an operand: the buffer planner never places a value being
  // written where a value being read lives, so operand loads do not alias
  // the stores of the current scope (alias-scope metadata; this is what
  // lets LLVM vectorise and keep accumulators in registers).
  llvm::Value* loadIn(llvm::Type* t, llvm::Value* base, llvm::Value* off) {
    auto* l = b_.CreateAlignedLoad(t, gep(t, base, off), llvm::Align(4));
    l->setMetadata(llvm::LLVMContext::MD_noalias, scope_);
    return l;
  }
  void store(llvm::Value* v, llvm::Value* base, llvm::Value* off) {
    auto* s = b_.CreateAlignedStore(v, gep(v->getType(), base, off), llvm::Align(4));
    s->setMetadata(llvm::LLVMContext::MD_alias_scope, scope_);
  }
  // A new scope: stores from here on are in it. Starts every op, and every
  // phase of an op that reads what an earlier phase wrote through loadIn.
  void newScope() {
    llvm::MDBuilder mdb(c_);
    if (!domain_) domain_ = mdb.createAnonymousAliasScopeDomain("gsl");
    scope_ = llvm::MDNode::get(c_, {mdb.createAnonymousAliasScope(domain_, "op")});
  }

  llvm::FunctionCallee helper(const char* name, llvm::Type* ret, llvm::ArrayRef<llvm::Type*> args) {
    auto fc = m_.getOrInsertFunction(name, llvm::FunctionType::get(ret, args, false));
    if (auto* fn = llvm::dyn_cast<llvm::Function>(fc.getCallee())) fn->addFnAttr(llvm::Attribute::NoUnwind);
    return fc;
  }

  // Branches to the error exit when `status` (i32) is nonzero.
  void checkStatus(llvm::Value* status) {
    auto* ok = llvm::BasicBlock::Create(c_, "ok", fn_);
    b_.CreateCondBr(b_.CreateICmpNE(status, b_.getInt32(0)), error_, ok);
    b_.SetInsertPoint(ok);
  }

  // -------------------------------------------------------------- loops

  // for (iv = 0; iv < n; ++iv) body(iv), n a constant. The builder is left
  // after the loop.
  void loop(int64_t n, const std::function<void(llvm::Value*)>& body) {
    loopAcc(n, {}, [&](llvm::Value* iv, const std::vector<llvm::Value*>&) {
      body(iv);
      return std::vector<llvm::Value*>{};
    });
  }

  // A loop carrying values: accs = body(iv, accs) from `init`; returns the
  // final values (`init` when n is 0).
  using AccBody = std::function<std::vector<llvm::Value*>(llvm::Value*, const std::vector<llvm::Value*>&)>;
  std::vector<llvm::Value*> loopAcc(int64_t n, std::vector<llvm::Value*> init, const AccBody& body) {
    if (n <= 0) return init;
    if (n == 1) return body(i64c(0), init);
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    auto* head = llvm::BasicBlock::Create(c_, "loop", fn_);
    auto* exit = llvm::BasicBlock::Create(c_, "loop.end", fn_);
    b_.CreateBr(head);
    b_.SetInsertPoint(head);
    llvm::PHINode* iv = b_.CreatePHI(i64_, 2, "i");
    iv->addIncoming(i64c(0), pre);
    std::vector<llvm::PHINode*> phis;
    std::vector<llvm::Value*> cur;
    for (llvm::Value* v : init) {
      llvm::PHINode* phi = b_.CreatePHI(v->getType(), 2, "acc");
      phi->addIncoming(v, pre);
      phis.push_back(phi);
      cur.push_back(phi);
    }
    std::vector<llvm::Value*> next = body(iv, cur);
    llvm::Value* inc = b_.CreateAdd(iv, i64c(1), "i.next", /*HasNUW=*/true, /*HasNSW=*/true);
    llvm::BasicBlock* latch = b_.GetInsertBlock();
    iv->addIncoming(inc, latch);
    for (size_t k = 0; k < phis.size(); ++k) phis[k]->addIncoming(next[k], latch);
    b_.CreateCondBr(b_.CreateICmpSLT(inc, i64c(n)), head, exit);
    b_.SetInsertPoint(exit);
    return next;
  }

  // Nested loops over `shape` (outer first); body(ivs).
  void nest(const Shape& shape, const std::function<void(const std::vector<llvm::Value*>&)>& body) {
    std::vector<llvm::Value*> ivs;
    std::function<void(size_t)> rec = [&](size_t d) {
      if (d == shape.size()) {
        body(ivs);
        return;
      }
      loop(shape[d], [&](llvm::Value* iv) {
        ivs.push_back(iv);
        rec(d + 1);
        ivs.pop_back();
      });
    };
    rec(0);
  }

  // sum_d ivs[d] * st[d] (+ base), as i64.
  llvm::Value* offset(const std::vector<llvm::Value*>& ivs, const Strides& st, int64_t base = 0) {
    llvm::Value* off = nullptr;
    for (size_t d = 0; d < ivs.size() && d < st.size(); ++d) {
      if (st[d] == 0) continue;
      llvm::Value* t = st[d] == 1 ? ivs[d] : b_.CreateMul(ivs[d], i64c(st[d]), "", true, true);
      off = off ? b_.CreateAdd(off, t, "", true, true) : t;
    }
    if (!off) return i64c(base);
    return base ? b_.CreateAdd(off, i64c(base), "", true, true) : off;
  }

  // Loops over `shape` computing one offset per stride vector; body(ivs, offsets).
  using MapBody = std::function<void(const std::vector<llvm::Value*>&, const std::vector<llvm::Value*>&)>;
  void map(const Shape& shape, const std::vector<Strides>& st, const MapBody& body) {
    nest(shape, [&](const std::vector<llvm::Value*>& ivs) {
      std::vector<llvm::Value*> offs;
      for (const Strides& s : st) offs.push_back(offset(ivs, s));
      body(ivs, offs);
    });
  }

  // Copies 4-byte words: dst[dstSt . i] = src[srcSt . i] over `shape`.
  void copyWords(llvm::Value* dst, llvm::Value* src, Shape shape, Strides dstSt, Strides srcSt) {
    collapse(shape, {&dstSt, &srcSt});
    if (shape.size() == 1 && dstSt[0] == 1 && srcSt[0] == 1) {
      b_.CreateMemCpy(dst, llvm::Align(4), src, llvm::Align(4), (uint64_t)shape[0] * 4);
      return;
    }
    tileTranspose(shape, dstSt, srcSt);
    map(shape, {dstSt, srcSt}, [&](const std::vector<llvm::Value*>&, const std::vector<llvm::Value*>& o) {
      store(loadIn(i32_, src, o[1]), dst, o[0]);
    });
  }

  // A copy whose innermost destination dim reads the source with a stride
  // while another dim reads it contiguously (a transpose) walks one of the
  // two with a large stride. When both sizes are multiples of 16, the
  // iteration space is reordered into 16 x 16 tiles (one cache line each
  // way): [other dims, a / 16, last / 16, 16 of a, 16 of last].
  static void tileTranspose(Shape& shape, Strides& dst, Strides& src) {
    constexpr int64_t T = 16;
    const size_t last = shape.size() - 1;
    if (shape.size() < 2 || src[last] == 1) return;
    size_t a = last;
    for (size_t d = 0; d < last; ++d)
      if (src[d] == 1) a = d;
    if (a == last || shape[a] % T || shape[last] % T) return;
    Shape ns;
    Strides nd, nsrc;
    auto push = [&](int64_t n, int64_t sd, int64_t ss) {
      ns.push_back(n);
      nd.push_back(sd);
      nsrc.push_back(ss);
    };
    for (size_t d = 0; d < last; ++d)
      if (d != a) push(shape[d], dst[d], src[d]);
    push(shape[a] / T, dst[a] * T, src[a] * T);
    push(shape[last] / T, dst[last] * T, src[last] * T);
    push(T, dst[a], src[a]);
    push(T, dst[last], src[last]);
    shape = ns, dst = nd, src = nsrc;
  }

  void fill(llvm::Value* dst, int64_t n, llvm::Value* v) {
    loop(n, [&](llvm::Value* i) { store(v, dst, i); });
  }

  // -------------------------------------------------------------- expression trees

  // Materialised values read by the inline evaluation of `op` (fused
  // operands expanded, constants skipped), in first-seen order.
  void treeLeaves(const ir::Op& op, std::vector<IRValue>& leaves) {
    for (IRValue v : op.operands) treeLeavesOf(v, leaves);
  }
  void treeLeavesOf(IRValue v, std::vector<IRValue>& leaves) {
    if (v->def && v->def->kind == OpKind::Constant) return;
    if (v->def && isFused(v)) {
      treeLeaves(*v->def, leaves);
      return;
    }
    if (std::find(leaves.begin(), leaves.end(), v) == leaves.end()) leaves.push_back(v);
  }
  bool isFused(IRValue v) {
    auto it = defIndex_.find(v);
    return it != defIndex_.end() && plan_.fused[it->second];
  }

  // Element offsets of the leaves at the current index.
  using LeafOffsets = std::unordered_map<IRValue, llvm::Value*>;

  llvm::Value* evalValue(IRValue v, const LeafOffsets& offs) {
    if (v->def && v->def->kind == OpKind::Constant) {
      if (v->type.dtype == DType::F32) return f32c((float)constantValue(*v->def));
      return b_.getInt32(constantWord(*v->def, v->type.dtype));
    }
    auto it = offs.find(v);
    if (it != offs.end()) return loadIn(elemType(v->type.dtype), ptr(v), it->second);
    GSL_ASSERT(v->def && isFused(v), "jit: tree operand is neither a leaf nor fused");
    return evalOp(*v->def, offs);
  }

  llvm::Value* evalOp(const ir::Op& op, const LeafOffsets& offs) {
    std::vector<llvm::Value*> in;
    for (IRValue v : op.operands) in.push_back(evalValue(v, offs));
    const DType dt = op.operands[0]->type.dtype;
    switch (ir::opInfo(op.kind).cls) {
      case OpClass::Unary: return unary(op, dt, in[0]);
      case OpClass::Binary: return binary(op.kind, dt, in[0], in[1]);
      case OpClass::Ternary: return b_.CreateSelect(b_.CreateICmpNE(in[0], b_.getInt32(0)), in[1], in[2]);
      default: break;
    }
    if (op.kind == OpKind::Broadcast) return in[0];  // the leaves' strides broadcast
    GSL_ASSERT(false, std::string("jit: not an elementwise op: ") + op.info().mnemonic);
    return nullptr;
  }

  llvm::Value* boolWord(llvm::Value* cond) { return b_.CreateZExt(cond, i32_); }
  // exp(x) in straight-line arithmetic, so loops that use it vectorise
  // (llvm.exp.f32 becomes a scalar expf call per element): Cephes' range
  // reduction x = n ln2 + r, |r| <= ln2/2, a degree-6 polynomial for e^r
  // (relative error about 2e-7), and 2^n built from exponent bits in two
  // factors so results down to the denormals are right. Beyond the f32
  // range: +inf above 88.7228, 0 below -103.98; NaN stays NaN.
  llvm::Value* pow2i(llvm::Value* k) {  // 2^k for i32 k in [-126, 127]
    return b_.CreateBitCast(b_.CreateShl(b_.CreateAdd(k, b_.getInt32(127)), 23), f32_);
  }
  llvm::Value* exp(llvm::Value* x) {
    llvm::Value* xc = b_.CreateBinaryIntrinsic(llvm::Intrinsic::minnum, x, f32c(89.0f));
    xc = b_.CreateBinaryIntrinsic(llvm::Intrinsic::maxnum, xc, f32c(-104.0f));
    llvm::Value* fx = b_.CreateUnaryIntrinsic(
        llvm::Intrinsic::floor, b_.CreateFAdd(b_.CreateFMul(xc, f32c(1.44269504088896341f)), f32c(0.5f)));
    llvm::Value* r = b_.CreateFSub(xc, b_.CreateFMul(fx, f32c(0.693359375f)));
    r = b_.CreateFSub(r, b_.CreateFMul(fx, f32c(-2.12194440e-4f)));
    llvm::Value* p = f32c(1.9875691500e-4f);
    for (float c : {1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f})
      p = b_.CreateFAdd(b_.CreateFMul(p, r), f32c(c));
    llvm::Value* y = b_.CreateFAdd(b_.CreateFAdd(b_.CreateFMul(b_.CreateFMul(p, r), r), r), f32c(1.0f));
    llvm::Value* n = b_.CreateFPToSI(fx, i32_);
    llvm::Value* n1 = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax,
                                               b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, n, b_.getInt32(127)),
                                               b_.getInt32(-126));
    llvm::Value* res = b_.CreateFMul(b_.CreateFMul(y, pow2i(n1)), pow2i(b_.CreateSub(n, n1)));
    res = b_.CreateSelect(b_.CreateFCmpOGT(x, f32c(88.72283935546875f)),
                          llvm::ConstantFP::getInfinity(f32_), res);
    res = b_.CreateSelect(b_.CreateFCmpOLT(x, f32c(-103.97208404541015625f)), f32c(0.0f), res);
    return b_.CreateSelect(isNan(x), x, res);
  }
  llvm::Value* isNan(llvm::Value* x) { return b_.CreateFCmpUNO(x, x); }

  // tanh from llvm.exp: sign(x) (1 - e) / (1 + e), e = exp(-2|x|); below
  // |x| = 1/8 (where 1 - e cancels) its Taylor series to x^9.
  llvm::Value* tanh(llvm::Value* x) {
    llvm::Value* ax = b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
    llvm::Value* e = exp(b_.CreateFMul(ax, f32c(-2.0f)));
    llvm::Value* t = b_.CreateFDiv(b_.CreateFSub(f32c(1.0f), e), b_.CreateFAdd(f32c(1.0f), e));
    t = b_.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, t, x);
    llvm::Value* x2 = b_.CreateFMul(x, x);
    llvm::Value* p = f32c(62.0f / 2835.0f);
    for (float c : {-17.0f / 315.0f, 2.0f / 15.0f, -1.0f / 3.0f, 1.0f}) p = b_.CreateFAdd(b_.CreateFMul(p, x2), f32c(c));
    p = b_.CreateFMul(x, p);
    return b_.CreateSelect(b_.CreateFCmpOLT(ax, f32c(0.125f)), p, t);
  }

  llvm::Value* unary(const ir::Op& op, DType dt, llvm::Value* x) {
    const bool f = dt == DType::F32;
    switch (op.kind) {
      case OpKind::Copy: return x;
      case OpKind::Neg: return f ? b_.CreateFNeg(x) : b_.CreateSub(b_.getInt32(0), x);
      case OpKind::Abs:
        return f ? b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x)
                 : b_.CreateSelect(b_.CreateICmpSLT(x, b_.getInt32(0)), b_.CreateSub(b_.getInt32(0), x), x);
      case OpKind::Relu:  // v > 0 || isnan(v) ? v : 0
        return f ? b_.CreateSelect(b_.CreateFCmpUGT(x, f32c(0.0f)), x, f32c(0.0f))
                 : b_.CreateSelect(b_.CreateICmpSGT(x, b_.getInt32(0)), x, b_.getInt32(0));
      case OpKind::Exp: return exp(x);
      case OpKind::Log: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::log, x);
      case OpKind::Sqrt: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x);
      case OpKind::Rsqrt: return b_.CreateFDiv(f32c(1.0f), b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x));
      case OpKind::Tanh: return tanh(x);
      case OpKind::Gelu: {  // 0.5 x (1 + tanh(c (x + 0.044715 x^3))), c = sqrt(2 / pi)
        const float c = std::sqrt(2.0f / (float)M_PI);
        llvm::Value* cube = b_.CreateFMul(b_.CreateFMul(b_.CreateFMul(f32c(0.044715f), x), x), x);
        llvm::Value* t = tanh(b_.CreateFMul(f32c(c), b_.CreateFAdd(x, cube)));
        return b_.CreateFMul(b_.CreateFMul(f32c(0.5f), x), b_.CreateFAdd(f32c(1.0f), t));
      }
      case OpKind::Sigmoid: {  // x >= 0 ? 1 / (1 + e^-x) : e^x / (1 + e^x), one exp(-|x|)
        llvm::Value* e = exp(b_.CreateFNeg(b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x)));
        llvm::Value* d = b_.CreateFAdd(f32c(1.0f), e);
        return b_.CreateSelect(b_.CreateFCmpOGE(x, f32c(0.0f)), b_.CreateFDiv(f32c(1.0f), d), b_.CreateFDiv(e, d));
      }
      case OpKind::Not: return boolWord(b_.CreateICmpEQ(x, b_.getInt32(0)));
      case OpKind::Cast: {
        DType to = op.attrs.getDType("dtype");
        if (to == dt) return x;
        if (dt == DType::F32) {
          if (to == DType::Bool) return boolWord(b_.CreateFCmpUNE(x, f32c(0.0f)));
          // Truncation toward zero, saturating, NaN -> 0 (as castF32ToI32).
          return b_.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {i32_, f32_}, {x});
        }
        if (to == DType::F32) return b_.CreateSIToFP(x, f32_);
        return to == DType::Bool ? boolWord(b_.CreateICmpNE(x, b_.getInt32(0))) : x;
      }
      default: break;
    }
    GSL_ASSERT(false, std::string("jit: not a unary op: ") + op.info().mnemonic);
    return nullptr;
  }

  llvm::Value* binary(OpKind k, DType dt, llvm::Value* a, llvm::Value* b) {
    llvm::Value* zero = b_.getInt32(0);
    switch (k) {
      case OpKind::And: return boolWord(b_.CreateAnd(b_.CreateICmpNE(a, zero), b_.CreateICmpNE(b, zero)));
      case OpKind::Or: return boolWord(b_.CreateOr(b_.CreateICmpNE(a, zero), b_.CreateICmpNE(b, zero)));
      default: break;
    }
    if (dt == DType::F32) {
      switch (k) {
        case OpKind::Add: return b_.CreateFAdd(a, b);
        case OpKind::Sub: return b_.CreateFSub(a, b);
        case OpKind::Mul: return b_.CreateFMul(a, b);
        case OpKind::Div: return b_.CreateFDiv(a, b);
        case OpKind::Pow: return b_.CreateBinaryIntrinsic(llvm::Intrinsic::pow, a, b);
        case OpKind::Mod: {  // floor-mod: fmod, then the sign of the divisor
          llvm::Value* r = b_.CreateFRem(a, b);
          llvm::Value* fix = b_.CreateICmpNE(b_.CreateFCmpOLT(r, f32c(0.0f)), b_.CreateFCmpOLT(b, f32c(0.0f)));
          llvm::Value* adj = b_.CreateSelect(fix, b_.CreateFAdd(r, b), r);
          llvm::Value* signedZero = b_.CreateBinaryIntrinsic(llvm::Intrinsic::copysign, f32c(0.0f), b);
          return b_.CreateSelect(b_.CreateFCmpOEQ(r, f32c(0.0f)), signedZero, adj);
        }
        case OpKind::Maximum: case OpKind::Minimum: {  // NaN if either is NaN, else std::max/min
          llvm::Value* pick = k == OpKind::Maximum ? b_.CreateSelect(b_.CreateFCmpOLT(a, b), b, a)
                                                   : b_.CreateSelect(b_.CreateFCmpOLT(b, a), b, a);
          llvm::Value* nan = b_.CreateFCmpUNO(a, b);
          return b_.CreateSelect(nan, f32c(std::numeric_limits<float>::quiet_NaN()), pick);
        }
        case OpKind::Eq: return boolWord(b_.CreateFCmpOEQ(a, b));
        case OpKind::Ne: return boolWord(b_.CreateFCmpUNE(a, b));
        case OpKind::Lt: return boolWord(b_.CreateFCmpOLT(a, b));
        case OpKind::Le: return boolWord(b_.CreateFCmpOLE(a, b));
        case OpKind::Gt: return boolWord(b_.CreateFCmpOGT(a, b));
        case OpKind::Ge: return boolWord(b_.CreateFCmpOGE(a, b));
        default: break;
      }
    } else {
      switch (k) {
        case OpKind::Add: return b_.CreateAdd(a, b);  // wrapping
        case OpKind::Sub: return b_.CreateSub(a, b);
        case OpKind::Mul: return b_.CreateMul(a, b);
        case OpKind::Pow: return b_.CreateCall(helper("gsl_rt_pow_i32", i32_, {i32_, i32_}), {a, b});
        case OpKind::Mod: {  // floor-mod; 0 for b == 0 and b == -1 (never traps)
          llvm::Value* trivial = b_.CreateOr(b_.CreateICmpEQ(b, zero), b_.CreateICmpEQ(b, b_.getInt32(-1)));
          llvm::Value* d = b_.CreateSelect(trivial, b_.getInt32(1), b);
          llvm::Value* r = b_.CreateSRem(a, d);
          llvm::Value* fix = b_.CreateAnd(b_.CreateICmpNE(r, zero),
                                          b_.CreateICmpNE(b_.CreateICmpSLT(r, zero), b_.CreateICmpSLT(d, zero)));
          r = b_.CreateSelect(fix, b_.CreateAdd(r, d), r);
          return b_.CreateSelect(trivial, zero, r);
        }
        case OpKind::Maximum: return b_.CreateSelect(b_.CreateICmpSLT(a, b), b, a);
        case OpKind::Minimum: return b_.CreateSelect(b_.CreateICmpSLT(b, a), b, a);
        case OpKind::Eq: return boolWord(b_.CreateICmpEQ(a, b));
        case OpKind::Ne: return boolWord(b_.CreateICmpNE(a, b));
        case OpKind::Lt: return boolWord(b_.CreateICmpSLT(a, b));
        case OpKind::Le: return boolWord(b_.CreateICmpSLE(a, b));
        case OpKind::Gt: return boolWord(b_.CreateICmpSGT(a, b));
        case OpKind::Ge: return boolWord(b_.CreateICmpSGE(a, b));
        default: break;
      }
    }
    GSL_ASSERT(false, std::string("jit: ") + ir::opName(k) + " is not defined on " + ir::dtypeName(dt));
    return nullptr;
  }

  // -------------------------------------------------------------- ops

  void emitOp(const ir::Op& op) {
    IRValue r = op.result;
    bindStorage(r);
    const Storage& s = plan_.storage.at(r);
    if (plan_.fallback[opIndex_]) return emitFallback(op);
    switch (op.kind) {
      case OpKind::Param: return emitParam(op, s);
      case OpKind::Constant:
        if (s.kind != Storage::None)
          fill(ptr(r), r->type.numElements(),
               r->type.dtype == DType::F32 ? f32c((float)constantValue(op))
                                           : b_.getInt32(constantWord(op, r->type.dtype)));
        return;
      case OpKind::Reshape:
        if (s.kind != Storage::Alias) copyWords(ptr(r), ptr(op.operands[0]), {r->type.numElements()}, {1}, {1});
        return;
      case OpKind::Slice:
        if (s.kind != Storage::Alias) emitSlice(op);
        return;
      case OpKind::Sum: case OpKind::Mean: case OpKind::Max: case OpKind::Min: return emitReduce(op);
      case OpKind::ArgMax: return emitArgMax(op);
      case OpKind::Softmax: case OpKind::LogSoftmax: return emitSoftmax(op);
      case OpKind::LayerNorm: return emitLayerNorm(op);
      case OpKind::CumSum: return emitCumSum(op);
      case OpKind::Transpose: return emitTranspose(op);
      case OpKind::Concat: return emitConcat(op);
      case OpKind::OneHot: return emitOneHot(op);
      case OpKind::Take: return emitTake(op);
      case OpKind::RandomUniform: return emitRandom(op);
      case OpKind::MatMul: return emitGemm(op, *plan_.gemm[opIndex_]);
      case OpKind::Einsum:
        if (plan_.gemm[opIndex_]) return emitGemm(op, *plan_.gemm[opIndex_]);
        return emitEinsumLoops(op);
      default: break;
    }
    if (op.info().cls == OpClass::Collective) return emitCollective(op);
    if (isElementwise(op.kind)) return emitElementwise(op);
    emitFallback(op);
  }

  // An op without generated code (one added to the op table after this
  // generator): the reference kernel, through gsl_rt_eval_op.
  void emitFallback(const ir::Op& op) {
    llvm::Value* ins = entryAlloca(op.operands.size());
    for (size_t i = 0; i < op.operands.size(); ++i)
      b_.CreateStore(ptr(op.operands[i]), b_.CreateConstInBoundsGEP1_64(ptr_, ins, i));
    llvm::Value* st = b_.CreateCall(helper("gsl_rt_eval_op", i32_, {ptr_, i64_, ptr_, ptr_}),
                                    {ctx_, i64c(opIndex_), ins, ptr(op.result)});
    checkStatus(st);
  }

  // An array of n pointers in the entry block's stack frame.
  llvm::Value* entryAlloca(size_t n) {
    llvm::IRBuilder<> eb(entry_, entry_->begin());
    return eb.CreateAlloca(ptr_, b_.getInt64(std::max<size_t>(n, 1)));
  }

  void emitParam(const ir::Op& op, const Storage& s) {
    llvm::Value* p = b_.CreateCall(helper("gsl_rt_param", ptr_, {ptr_, i64_}), {ctx_, i64c(opIndex_)});
    auto* ok = llvm::BasicBlock::Create(c_, "param.ok", fn_);
    b_.CreateCondBr(b_.CreateIsNull(p), error_, ok);
    b_.SetInsertPoint(ok);
    if (s.kind == Storage::Param) ptrs_[op.result] = p;
    else b_.CreateMemCpy(ptr(op.result), llvm::Align(4), p, llvm::Align(4), bytesOf(op.result));
  }

  // An elementwise op and the fused ops under it: one loop nest over the
  // result, leaves read with broadcast strides.
  void emitElementwise(const ir::Op& op) {
    IRValue r = op.result;
    Shape space = r->type.shape;
    std::vector<IRValue> leaves;
    treeLeaves(op, leaves);
    std::vector<Strides> st;
    for (IRValue v : leaves) st.push_back(bcastStrides(v->type.shape, space));
    st.push_back(rowMajor(space));
    std::vector<Strides*> sp;
    for (auto& s : st) sp.push_back(&s);
    collapse(space, sp);
    llvm::Value* out = ptr(r);
    map(space, st, [&](const std::vector<llvm::Value*>&, const std::vector<llvm::Value*>& offs) {
      LeafOffsets lo;
      for (size_t k = 0; k < leaves.size(); ++k) lo[leaves[k]] = offs[k];
      store(evalOp(op, lo), out, offs.back());
    });
  }

  // Accumulates over `space` into acc[accSt . i]: acc = combine(acc, value)
  // with value(offsets of `st`, acc offset). When the innermost dim is
  // reduced (accSt 0) the accumulator is carried in a register across it.
  using ValueFn = std::function<llvm::Value*(const std::vector<llvm::Value*>&, llvm::Value*)>;
  using CombineFn = std::function<llvm::Value*(llvm::Value*, llvm::Value*)>;
  void accumulate(const Shape& space, const std::vector<Strides>& st, const Strides& accSt, llvm::Value* acc,
                  llvm::Type* accTy, const ValueFn& value, const CombineFn& combine) {
    if (!space.empty() && accSt.back() == 0) {
      Shape outer(space.begin(), space.end() - 1);
      nest(outer, [&](const std::vector<llvm::Value*>& ivs) {
        llvm::Value* accOff = offset(ivs, accSt);
        llvm::Value* a0 = load(accTy, acc, accOff);
        auto res = loopAcc(space.back(), {a0}, [&](llvm::Value* iv, const std::vector<llvm::Value*>& a) {
          std::vector<llvm::Value*> all = ivs;
          all.push_back(iv);
          std::vector<llvm::Value*> offs;
          for (const Strides& s : st) offs.push_back(offset(all, s));
          return std::vector<llvm::Value*>{combine(a[0], value(offs, accOff))};
        });
        store(res[0], acc, accOff);
      });
      return;
    }
    std::vector<Strides> all = st;
    all.push_back(accSt);
    map(space, all, [&](const std::vector<llvm::Value*>&, const std::vector<llvm::Value*>& offs) {
      llvm::Value* accOff = offs.back();
      std::vector<llvm::Value*> o(offs.begin(), offs.end() - 1);
      store(combine(load(accTy, acc, accOff), value(o, accOff)), acc, accOff);
    });
  }

  // Reassociable double addition (sum accumulators: lets the vectoriser
  // keep partial sums; in double the order does not matter at f32 output).
  llvm::Value* addReassoc(llvm::Value* a, llvm::Value* b) {
    llvm::Value* s = b_.CreateFAdd(a, b);
    if (auto* in = llvm::dyn_cast<llvm::Instruction>(s)) in->setHasAllowReassoc(true);
    return s;
  }

  // The interpreter's NaN-sticky max/min, s = (x > s || isnan(x)) ? x : s,
  // is llvm.maximum/minimum (NaN if either is NaN) up to the sign of a zero
  // result; the intrinsics vectorise as reductions.
  llvm::Value* stickyMax(bool isMax, llvm::Value* s, llvm::Value* x) {
    if (x->getType()->isFloatingPointTy())
      return b_.CreateBinaryIntrinsic(isMax ? llvm::Intrinsic::maximum : llvm::Intrinsic::minimum, s, x);
    return b_.CreateBinaryIntrinsic(isMax ? llvm::Intrinsic::smax : llvm::Intrinsic::smin, s, x);
  }

  void emitReduce(const ir::Op& op) {
    IRValue in = op.operands[0], r = op.result;
    const bool f = in->type.dtype == DType::F32;
    const bool sum = op.kind == OpKind::Sum || op.kind == OpKind::Mean;
    Shape space = in->type.shape, kept = space;
    for (int64_t a : op.attrs.getInts("axis")) kept[a] = 1;
    std::vector<IRValue> leaves;
    treeLeavesOf(in, leaves);
    std::vector<Strides> st;
    for (IRValue v : leaves) st.push_back(bcastStrides(v->type.shape, space));
    Strides accSt = bcastStrides(kept, space);
    std::vector<Strides*> sp;
    for (auto& s : st) sp.push_back(&s);
    sp.push_back(&accSt);
    collapse(space, sp);

    const int64_t groups = r->type.numElements();
    // f32 sums accumulate in a double buffer; everything else in the result.
    llvm::Value* out = ptr(r);
    llvm::Value* acc = out;
    llvm::Type* accTy = elemType(r->type.dtype);
    llvm::Value* init = nullptr;
    if (f && sum) {
      acc = tempPtr(0);
      accTy = f64_;
      init = f64c(0.0);
    } else if (f) {
      init = f32c(op.kind == OpKind::Max ? -INFINITY : INFINITY);
    } else {
      init = b_.getInt32(op.kind == OpKind::Sum   ? 0
                         : op.kind == OpKind::Max ? std::numeric_limits<int32_t>::min()
                                                  : std::numeric_limits<int32_t>::max());
    }
    fill(acc, groups, init);
    accumulate(
        space, st, accSt, acc, accTy,
        [&](const std::vector<llvm::Value*>& offs, llvm::Value*) {
          LeafOffsets lo;
          for (size_t k = 0; k < leaves.size(); ++k) lo[leaves[k]] = offs[k];
          llvm::Value* x = evalValue(in, lo);
          return f && sum ? b_.CreateFPExt(x, f64_) : x;
        },
        [&](llvm::Value* a, llvm::Value* x) -> llvm::Value* {
          if (sum) return f ? addReassoc(a, x) : b_.CreateAdd(a, x);
          return stickyMax(op.kind == OpKind::Max, a, x);
        });
    if (f && sum) {
      const double count = (double)in->type.numElements() / (double)groups;
      loop(groups, [&](llvm::Value* g) {
        llvm::Value* v = load(f64_, acc, g);
        if (op.kind == OpKind::Mean) v = b_.CreateFDiv(v, f64c(count));
        store(b_.CreateFPTrunc(v, f32_), out, g);
      });
    }
  }

  // Lanes along `axis`: nested loops over the other dims, body(base offset,
  // lane stride, lane index in row-major order of the other dims).
  void lanes(const Shape& shape, int64_t axis,
             const std::function<void(llvm::Value* base, int64_t stride, llvm::Value* lane)>& body) {
    int64_t outer = 1, inner = 1, n = shape[axis];
    for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
    for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
    nest({outer, inner}, [&](const std::vector<llvm::Value*>& ivs) {
      body(offset(ivs, {n * inner, 1}), inner, offset(ivs, {inner, 1}));
    });
  }

  llvm::Value* laneOffset(llvm::Value* base, int64_t stride, llvm::Value* j) {
    return b_.CreateAdd(base, stride == 1 ? j : b_.CreateMul(j, i64c(stride), "", true, true), "", true, true);
  }

  void emitArgMax(const ir::Op& op) {
    IRValue in = op.operands[0];
    const bool f = in->type.dtype == DType::F32;
    llvm::Type* t = elemType(in->type.dtype);
    llvm::Value *x = ptr(in), *out = ptr(op.result);
    const int64_t axis = op.attrs.getInt("axis"), n = in->type.shape[axis];
    lanes(in->type.shape, axis, [&](llvm::Value* base, int64_t stride, llvm::Value* lane) {
      std::vector<llvm::Value*> best = {loadIn(t, x, base), b_.getInt32(0)};
      if (n > 1)
        best = loopAcc(n - 1, best, [&](llvm::Value* iv, const std::vector<llvm::Value*>& a) {
          llvm::Value* j = b_.CreateAdd(iv, i64c(1));
          llvm::Value* v = loadIn(t, x, laneOffset(base, stride, j));
          // First maximum; the first NaN wins and stays (as NumPy).
          llvm::Value* take = f ? b_.CreateOr(b_.CreateFCmpOGT(v, a[0]),
                                              b_.CreateAnd(isNan(v), b_.CreateFCmpORD(a[0], a[0])))
                                : b_.CreateICmpSGT(v, a[0]);
          return std::vector<llvm::Value*>{b_.CreateSelect(take, v, a[0]),
                                           b_.CreateSelect(take, b_.CreateTrunc(j, i32_), a[1])};
        });
      store(best[1], out, lane);
    });
  }

  void emitSoftmax(const ir::Op& op) {
    IRValue in = op.operands[0];
    const bool log = op.kind == OpKind::LogSoftmax;
    llvm::Value *x = ptr(in), *out = ptr(op.result);
    const int64_t axis = op.attrs.getInt("axis"), n = in->type.shape[axis];
    lanes(in->type.shape, axis, [&](llvm::Value* base, int64_t stride, llvm::Value*) {
      auto at = [&](llvm::Value* j) { return laneOffset(base, stride, j); };
      llvm::Value* mx = loopAcc(n, {f32c(-INFINITY)}, [&](llvm::Value* j, const std::vector<llvm::Value*>& a) {
        llvm::Value* v = loadIn(f32_, x, at(j));
        return std::vector<llvm::Value*>{b_.CreateSelect(b_.CreateFCmpOLT(a[0], v), v, a[0])};  // std::max
      })[0];
      llvm::Value* sum = loopAcc(n, {f64c(0.0)}, [&](llvm::Value* j, const std::vector<llvm::Value*>& a) {
        llvm::Value* e = exp(b_.CreateFSub(loadIn(f32_, x, at(j)), mx));
        if (!log) store(e, out, at(j));
        return std::vector<llvm::Value*>{addReassoc(a[0], b_.CreateFPExt(e, f64_))};
      })[0];
      if (log) {
        llvm::Value* ls = b_.CreateUnaryIntrinsic(llvm::Intrinsic::log, sum);
        llvm::Value* m64 = b_.CreateFPExt(mx, f64_);
        loop(n, [&](llvm::Value* j) {
          llvm::Value* z = b_.CreateFSub(b_.CreateFPExt(loadIn(f32_, x, at(j)), f64_), m64);
          store(b_.CreateFPTrunc(b_.CreateFSub(z, ls), f32_), out, at(j));
        });
      } else {
        loop(n, [&](llvm::Value* j) {
          llvm::Value* e = b_.CreateFPExt(load(f32_, out, at(j)), f64_);
          store(b_.CreateFPTrunc(b_.CreateFDiv(e, sum), f32_), out, at(j));
        });
      }
    });
  }

  // (x - mean) / sqrt(var + eps) over the groups left by reducing `axis`,
  // mean and (biased) variance in double, two passes as Kernels.cpp.
  void emitLayerNorm(const ir::Op& op) {
    IRValue in = op.operands[0];
    Shape space = in->type.shape, kept = space;
    for (int64_t a : op.attrs.getInts("axis")) kept[a] = 1;
    const int64_t groups = numel(kept);
    const double count = (double)in->type.numElements() / (double)groups;
    Strides xSt = rowMajor(space), accSt = bcastStrides(kept, space);
    collapse(space, {&xSt, &accSt});
    llvm::Value *x = ptr(in), *out = ptr(op.result);
    llvm::Value *mean = tempPtr(0), *var = tempPtr((size_t)groups * 8);
    fill(mean, groups, f64c(0.0));
    fill(var, groups, f64c(0.0));
    auto xAt = [&](llvm::Value* off) { return b_.CreateFPExt(loadIn(f32_, x, off), f64_); };
    auto add = [&](llvm::Value* a, llvm::Value* v) { return addReassoc(a, v); };
    accumulate(space, {xSt}, accSt, mean, f64_,
               [&](const std::vector<llvm::Value*>& o, llvm::Value*) { return xAt(o[0]); }, add);
    loop(groups, [&](llvm::Value* g) { store(b_.CreateFDiv(load(f64_, mean, g), f64c(count)), mean, g); });
    accumulate(space, {xSt}, accSt, var, f64_,
               [&](const std::vector<llvm::Value*>& o, llvm::Value* g) {
                 llvm::Value* d = b_.CreateFSub(xAt(o[0]), load(f64_, mean, g));
                 return b_.CreateFMul(d, d);
               },
               add);
    const double eps = op.attrs.getFloat("eps");
    loop(groups, [&](llvm::Value* g) {
      llvm::Value* v = b_.CreateFAdd(b_.CreateFDiv(load(f64_, var, g), f64c(count)), f64c(eps));
      store(b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, v), var, g);
    });
    map(space, {xSt, accSt}, [&](const std::vector<llvm::Value*>&, const std::vector<llvm::Value*>& o) {
      llvm::Value* d = b_.CreateFSub(xAt(o[0]), load(f64_, mean, o[1]));
      store(b_.CreateFPTrunc(b_.CreateFDiv(d, load(f64_, var, o[1])), f32_), out, o[0]);
    });
  }

  void emitCumSum(const ir::Op& op) {
    IRValue in = op.operands[0];
    const bool f = in->type.dtype == DType::F32;
    const bool exclusive = op.attrs.has("exclusive") && op.attrs.getBool("exclusive");
    llvm::Value *x = ptr(in), *out = ptr(op.result);
    const int64_t axis = op.attrs.getInt("axis"), n = in->type.shape[axis];
    lanes(in->type.shape, axis, [&](llvm::Value* base, int64_t stride, llvm::Value*) {
      loopAcc(n, {f ? f64c(0.0) : (llvm::Value*)b_.getInt32(0)},
              [&](llvm::Value* j, const std::vector<llvm::Value*>& a) {
                llvm::Value* off = laneOffset(base, stride, j);
                llvm::Value* v = f ? b_.CreateFPExt(loadIn(f32_, x, off), f64_) : loadIn(i32_, x, off);
                llvm::Value* next = f ? b_.CreateFAdd(a[0], v) : b_.CreateAdd(a[0], v);
                llvm::Value* shown = exclusive ? a[0] : next;
                store(f ? b_.CreateFPTrunc(shown, f32_) : shown, out, off);
                return std::vector<llvm::Value*>{next};
              });
    });
  }

  void emitSlice(const ir::Op& op) {
    IRValue in = op.operands[0];
    const Shape& sh = in->type.shape;
    int64_t ax = op.attrs.getInt("axis"), outer = 1, inner = 1;
    for (int64_t d = 0; d < ax; ++d) outer *= sh[d];
    for (size_t d = ax + 1; d < sh.size(); ++d) inner *= sh[d];
    const int64_t inRow = sh[ax] * inner, outRow = op.result->type.shape[ax] * inner;
    llvm::Value* src = b_.CreateConstInBoundsGEP1_64(i32_, ptr(in), op.attrs.getInt("start") * inner);
    copyWords(ptr(op.result), src, {outer, outRow}, {outRow, 1}, {inRow, 1});
  }

  void emitTranspose(const ir::Op& op) {
    IRValue in = op.operands[0];
    Strides inSt = rowMajor(in->type.shape), st;
    for (int64_t p : op.attrs.getInts("perm")) st.push_back(inSt[p]);
    copyWords(ptr(op.result), ptr(in), op.result->type.shape, rowMajor(op.result->type.shape), st);
  }

  void emitConcat(const ir::Op& op) {
    const Shape& rs = op.result->type.shape;
    const int64_t axis = op.attrs.getInt("axis");
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= rs[d];
    for (size_t d = axis + 1; d < rs.size(); ++d) inner *= rs[d];
    const int64_t outRow = rs[axis] * inner;
    int64_t at = 0;
    for (IRValue v : op.operands) {
      const int64_t row = v->type.shape[axis] * inner;
      llvm::Value* dst = b_.CreateConstInBoundsGEP1_64(i32_, ptr(op.result), at);
      copyWords(dst, ptr(v), {outer, row}, {outRow, 1}, {row, 1});
      at += row;
    }
  }

  void emitOneHot(const ir::Op& op) {
    IRValue idx = op.operands[0];
    const int64_t n = op.attrs.getInt("n"), m = idx->type.numElements();
    llvm::Value *ix = ptr(idx), *out = ptr(op.result);
    map({m, n}, {{1, 0}, {n, 1}}, [&](const std::vector<llvm::Value*>& ivs, const std::vector<llvm::Value*>& o) {
      llvm::Value* i = b_.CreateSExt(loadIn(i32_, ix, o[0]), i64_);
      store(b_.CreateSelect(b_.CreateICmpEQ(i, ivs.size() > 1 ? ivs[1] : i64c(0)), f32c(1.0f), f32c(0.0f)), out,
            o[1]);
    });
  }

  // Row gather with a bounds check; an index out of range reports through
  // gsl_rt_take_error and leaves the function.
  void emitTake(const ir::Op& op) {
    IRValue table = op.operands[0], idx = op.operands[1];
    const int64_t rows = table->type.shape[0];
    const int64_t row = table->type.numElements() / rows;
    llvm::Value *src = ptr(table), *ix = ptr(idx), *out = ptr(op.result);
    auto err = helper("gsl_rt_take_error", i32_, {ptr_, i64_, i64_, i64_});
    loop(idx->type.numElements(), [&](llvm::Value* i) {
      llvm::Value* k = b_.CreateSExt(loadIn(i32_, ix, i), i64_);
      auto* bad = llvm::BasicBlock::Create(c_, "take.bad", fn_);
      auto* ok = llvm::BasicBlock::Create(c_, "take.ok", fn_);
      b_.CreateCondBr(b_.CreateICmpUGE(k, i64c(rows)), bad, ok);  // unsigned: also k < 0
      b_.SetInsertPoint(bad);
      b_.CreateCall(err, {ctx_, i64c(opIndex_), k, i64c(rows)});
      b_.CreateBr(error_);
      b_.SetInsertPoint(ok);
      llvm::Value* from = gep(i32_, src, b_.CreateMul(k, i64c(row), "", true, true));
      llvm::Value* to = gep(i32_, out, b_.CreateMul(i, i64c(row), "", true, true));
      if (row >= 16) {
        b_.CreateMemCpy(to, llvm::Align(4), from, llvm::Align(4), (uint64_t)row * 4);
      } else {
        for (int64_t e = 0; e < row; ++e) store(loadIn(i32_, from, i64c(e)), to, i64c(e));
      }
    });
  }

  void emitRandom(const ir::Op& op) {
    llvm::Value* seed = loadIn(i32_, ptr(op.operands[0]), i64c(0));
    b_.CreateCall(helper("gsl_rt_random_uniform", b_.getVoidTy(), {ptr_, i32_, ptr_, i64_}),
                  {ctx_, seed, ptr(op.result), i64c(op.result->type.numElements())});
  }

  void emitCollective(const ir::Op& op) {
    llvm::Value* st = b_.CreateCall(helper("gsl_rt_collective", i32_, {ptr_, i64_, ptr_, ptr_}),
                                    {ctx_, i64c(opIndex_), ptr(op.operands[0]), ptr(op.result)});
    checkStatus(st);
  }

  // -------------------------------------------------------------- contractions

  void emitGemm(const ir::Op& op, const Gemm& g) {
    llvm::Value *a = ptr(op.operands[0]), *b = ptr(op.operands[1]), *c = ptr(op.result);
    if (g.K == 0) return fill(c, op.result->type.numElements(), f32c(0.0f));  // an empty sum
    if (g.copyA.on) {
      llvm::Value* t = tempPtr(g.copyA.temp);
      copyWords(t, a, g.copyA.shape, g.copyA.dst, g.copyA.src);
      a = t;
    }
    if (g.copyB.on) {
      llvm::Value* t = tempPtr(g.copyB.temp);
      copyWords(t, b, g.copyB.shape, g.copyB.dst, g.copyB.src);
      b = t;
    }
    if (g.copyA.on || g.copyB.on) newScope();  // the GEMM reads the copies
    llvm::Value* out = g.copyC.on ? tempPtr(g.copyC.temp) : c;
    map(g.batch, {g.bA, g.bB, g.bC}, [&](const std::vector<llvm::Value*>&, const std::vector<llvm::Value*>& o) {
      llvm::Value *pa = gep(f32_, a, o[0]), *pb = gep(f32_, b, o[1]), *pc = gep(f32_, out, o[2]);
      if (g.swap) std::swap(pa, pb);
      if (g.code == Gemm::Code::Kernel) gemmKernel(g, pa, pb, pc);
      else if (g.code == Gemm::Code::Dots) gemmDots(g, pa, pb, pc);
      else
        b_.CreateCall(helper("gsl_rt_sgemm", b_.getVoidTy(),
                             {i64_, i64_, i64_, ptr_, i64_, i64_, ptr_, i64_, i64_, ptr_, i64_, i64_}),
                      {i64c(g.M), i64c(g.N), i64c(g.K), pa, i64c(g.rsA), i64c(g.csA), pb, i64c(g.rsB),
                       i64c(g.csB), pc, i64c(g.rsC), i64c(g.csC)});
    });
    if (g.copyC.on) {
      newScope();
      copyWords(c, out, g.copyC.shape, g.copyC.dst, g.copyC.src);
    }
  }

  // A GEMM as dot products (layouts the kernel cannot address, small).
  void gemmDots(const Gemm& g, llvm::Value* a, llvm::Value* b, llvm::Value* c) {
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
  // edges use masked loads and stores. Sizes and strides are constants.
  // Requires g.csB == 1 and g.csC == 1.
  void gemmKernel(const Gemm& g, llvm::Value* a, llvm::Value* b, llvm::Value* c) {
    const int vw = opts_.vectorWidth, mr = kernelRows(vw);
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
          if (packA) {  // block i0 / mr of the packed K block: [kc][mr]
            llvm::Value* off = b_.CreateAdd(b_.CreateMul(i0, i64c(kc)), b_.CreateAdd(b_.CreateMul(kk, i64c(mr)), i64c(r)));
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
    // K blocks outside (C is revisited once per block of kc), then column
    // panels (a kc x nr panel of B, 32 KiB with AVX-512, stays in L1 for
    // every row block), row blocks inside. Each C element still sums its k
    // in order.
    llvm::Value* pack = g.pack ? tempPtr(g.packTemp) : nullptr;
    auto rowBlocks = [&](llvm::Value* j0, int64_t cols, llvm::Value* k0, int64_t kn) {
      if (pack) {
        packPanel(pack, b, g.rsB, j0, cols, k0, kn);
        bp = pack, bRs = nr, bj0 = i64c(0);
      }
      if (g.M / mr)
        loop(g.M / mr, [&](llvm::Value* ib) { block(b_.CreateMul(ib, i64c(mr)), mr, j0, cols, k0, kn); });
      if (g.M % mr) block(i64c(g.M / mr * mr), g.M % mr, j0, cols, k0, kn);
    };
    auto panels = [&](llvm::Value* k0, int64_t kn) {
      if (packA) packRows(packA, a, g, k0, kn);
      if (g.N / nr) loop(g.N / nr, [&](llvm::Value* jb) { rowBlocks(b_.CreateMul(jb, i64c(nr)), nr, k0, kn); });
      if (g.N % nr) rowBlocks(i64c(g.N / nr * nr), g.N % nr, k0, kn);
    };
    if (g.K / kc) loop(g.K / kc, [&](llvm::Value* kb) { panels(b_.CreateMul(kb, i64c(kc)), kc); });
    if (g.K % kc) panels(i64c(g.K / kc * kc), g.K % kc);
  }

  // A's K block [k0, k0 + kn) as row blocks: P[(i / mr) kc mr + kk mr +
  // i % mr] = A[i, k0 + kk] (alias scope as packPanel).
  void packRows(llvm::Value* p, llvm::Value* a, const Gemm& g, llvm::Value* k0, int64_t kn) {
    const int64_t mr = kernelRows(opts_.vectorWidth), kc = g.kc;
    llvm::MDBuilder mdb(c_);
    llvm::MDNode* packScope = llvm::MDNode::get(c_, {mdb.createAnonymousAliasScope(domain_, "packA")});
    auto rowsOf = [&](llvm::Value* i0, int64_t rows) {
      loop(kn, [&](llvm::Value* kk) {
        llvm::Value* col = b_.CreateMul(b_.CreateAdd(k0, kk), i64c(g.csA));
        llvm::Value* dst = b_.CreateAdd(b_.CreateMul(i0, i64c(kc)), b_.CreateMul(kk, i64c(mr)));
        for (int64_t r = 0; r < rows; ++r) {
          llvm::Value* src = b_.CreateAdd(b_.CreateMul(b_.CreateAdd(i0, i64c(r)), i64c(g.rsA)), col);
          auto* l = b_.CreateAlignedLoad(f32_, gep(f32_, a, src), llvm::Align(4));
          l->setMetadata(llvm::LLVMContext::MD_noalias, packScope);
          auto* st = b_.CreateAlignedStore(l, gep(f32_, p, b_.CreateAdd(dst, i64c(r))), llvm::Align(4));
          st->setMetadata(llvm::LLVMContext::MD_alias_scope, packScope);
        }
      });
    };
    if (g.M / mr) loop(g.M / mr, [&](llvm::Value* ib) { rowsOf(b_.CreateMul(ib, i64c(mr)), mr); });
    if (g.M % mr) rowsOf(i64c(g.M / mr * mr), g.M % mr);
  }

  // P[kk * nr + j] = B[(k0 + kk) * rsB + j0 + j] for kk < kn, j < cols (B
  // rows contiguous). The stores get their own alias scope: the kernel's
  // loads of P are declared not to alias C's stores, but may alias these.
  void packPanel(llvm::Value* p, llvm::Value* b, int64_t rsB, llvm::Value* j0, int64_t cols, llvm::Value* k0,
                 int64_t kn) {
    const int vw = opts_.vectorWidth;
    const int64_t nr = kernelCols(vw);
    auto* vt = llvm::FixedVectorType::get(f32_, vw);
    llvm::MDBuilder mdb(c_);
    llvm::MDNode* packScope = llvm::MDNode::get(c_, {mdb.createAnonymousAliasScope(domain_, "pack")});
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

  // Any einsum as a loop nest over the label space (Kernels.cpp's
  // einsumGeneric): output labels outside, summed labels (sorted) inside,
  // accumulating the operands' product in f32 in that order.
  void emitEinsumLoops(const ir::Op& op) {
    ir::EinsumSpec es;
    std::string err = ir::parseEinsum(op.attrs.getString("spec"), op.operands.size(), es);
    GSL_ASSERT(err.empty(), "jit: einsum: " + err);
    std::map<char, int64_t> size;
    for (size_t i = 0; i < op.operands.size(); ++i)
      for (size_t d = 0; d < es.inputs[i].size(); ++d) size[es.inputs[i][d]] = op.operands[i]->type.shape[d];
    std::string summed;
    for (auto& [ch, n] : size)
      if (es.output.find(ch) == std::string::npos) summed += ch;
    auto stridesOver = [&](const std::string& loopLabels, size_t operand) {
      Strides own = rowMajor(op.operands[operand]->type.shape), st(loopLabels.size(), 0);
      for (size_t d = 0; d < es.inputs[operand].size(); ++d) {
        size_t p = loopLabels.find(es.inputs[operand][d]);
        if (p != std::string::npos) st[p] += own[d];
      }
      return st;
    };
    Shape outShape, sumShape;
    for (char ch : es.output) outShape.push_back(size[ch]);
    for (char ch : summed) sumShape.push_back(size[ch]);
    std::vector<llvm::Value*> in;
    for (IRValue v : op.operands) in.push_back(ptr(v));
    llvm::Value* out = ptr(op.result);
    map(outShape, {rowMajor(outShape)}, [&](const std::vector<llvm::Value*>& oivs, const std::vector<llvm::Value*>& o) {
      // Each operand's offset = its part over the output labels + its part
      // over the summed labels.
      std::vector<llvm::Value*> base;
      for (size_t i = 0; i < in.size(); ++i) base.push_back(offset(oivs, stridesOver(es.output, i)));
      llvm::Value* acc = f32c(0.0f);
      std::vector<llvm::Value*> sivs;
      std::function<llvm::Value*(size_t, llvm::Value*)> rec = [&](size_t d, llvm::Value* a) -> llvm::Value* {
        if (d == sumShape.size()) {
          llvm::Value* p = nullptr;
          for (size_t i = 0; i < in.size(); ++i) {
            llvm::Value* off = b_.CreateAdd(base[i], offset(sivs, stridesOver(summed, i)));
            llvm::Value* x = loadIn(f32_, in[i], off);
            p = p ? b_.CreateFMul(p, x) : x;
          }
          return b_.CreateFAdd(a, p);
        }
        return loopAcc(sumShape[d], {a}, [&](llvm::Value* iv, const std::vector<llvm::Value*>& av) {
          sivs.push_back(iv);
          llvm::Value* r = rec(d + 1, av[0]);
          sivs.pop_back();
          return std::vector<llvm::Value*>{r};
        })[0];
      };
      store(rec(0, acc), out, o[0]);
    });
  }
};

}  // namespace

Lowered lowerFunction(const ir::Function& f, const std::string& symbol, const CodegenOptions& opts) {
  Lowered out;
  out.context = std::make_unique<llvm::LLVMContext>();
  out.module = std::make_unique<llvm::Module>("gsl." + f.name, *out.context);
  Lowering l(f, *out.module, opts);
  l.run(symbol);
  out.symbol = symbol;
  out.peakBytes = l.plan().peak;
  out.results = l.plan().results;
  return out;
}

size_t planPeakBytes(const ir::Function& f, const CodegenOptions& opts) { return makePlan(f, opts).peak; }

}  // namespace gsl::backend::jit
