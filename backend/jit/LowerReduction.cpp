// How are the ops that combine elements along axes emitted? Reductions
// (sum, mean, max, min, argmax), softmax and log_softmax, layer_norm,
// cumsum, and einsums that are not a GEMM, as loop nests (OpLowering's
// reduction part, Lowering.h).
#include <llvm/IR/Constants.h>
#include <llvm/IR/Intrinsics.h>

#include <cmath>
#include <limits>
#include <map>

#include "backend/jit/Lowering.h"
#include "support/Diagnostics.h"

namespace gsl::backend::jit {

using ir::DType;
using ir::OpKind;
using ir::Shape;

// Accumulates over `space` into acc[accSt . i]: acc = combine(acc, value)
// with value(offsets of `st`, acc offset). When the innermost dim is
// reduced (accSt 0) the accumulator is carried in a register across it.
void OpLowering::accumulate(const Shape& space, const std::vector<Strides>& st, const Strides& accSt,
                            llvm::Value* acc, llvm::Type* accTy, const ValueFn& value, const CombineFn& combine) {
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
llvm::Value* OpLowering::addReassoc(llvm::Value* a, llvm::Value* b) {
  llvm::Value* s = b_.CreateFAdd(a, b);
  if (auto* in = llvm::dyn_cast<llvm::Instruction>(s)) in->setHasAllowReassoc(true);
  return s;
}

// The interpreter's NaN-sticky max/min, s = (x > s || isnan(x)) ? x : s,
// is llvm.maximum/minimum (NaN if either is NaN) up to the sign of a zero
// result; the intrinsics vectorise as reductions.
llvm::Value* OpLowering::stickyMax(bool isMax, llvm::Value* s, llvm::Value* x) {
  if (x->getType()->isFloatingPointTy())
    return b_.CreateBinaryIntrinsic(isMax ? llvm::Intrinsic::maximum : llvm::Intrinsic::minimum, s, x);
  return b_.CreateBinaryIntrinsic(isMax ? llvm::Intrinsic::smax : llvm::Intrinsic::smin, s, x);
}

void OpLowering::emitReduce(const ir::Op& op) {
  IRValue in = op.operands[0], r = op.result;
  // bf16 reduces its widened values in a double accumulator (sum, mean,
  // max and min alike), rounded to f32 and then to bf16 at the end, as
  // the reference kernel's f32 reduction of the widened operand.
  const bool bf16 = in->type.dtype == DType::BF16;
  const bool f = in->type.dtype == DType::F32 || bf16;
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
  if (f && (sum || bf16)) {
    acc = tempPtr(0);
    accTy = f64_;
    init = f64c(sum ? 0.0 : op.kind == OpKind::Max ? -INFINITY : INFINITY);
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
        return f && (sum || bf16) ? b_.CreateFPExt(x, f64_) : x;
      },
      [&](llvm::Value* a, llvm::Value* x) -> llvm::Value* {
        if (sum) return f ? addReassoc(a, x) : b_.CreateAdd(a, x);
        if (bf16) {  // the interpreter's s = (x > s || isnan(x)) ? x : s, signed zeros included
          llvm::Value* better = op.kind == OpKind::Max ? b_.CreateFCmpOGT(x, a) : b_.CreateFCmpOLT(x, a);
          return b_.CreateSelect(b_.CreateOr(better, math_.isNan(x)), x, a);
        }
        return stickyMax(op.kind == OpKind::Max, a, x);
      });
  if (f && (sum || bf16)) {
    const double count = (double)in->type.numElements() / (double)groups;
    loop(groups, [&](llvm::Value* g) {
      llvm::Value* v = load(f64_, acc, g);
      if (op.kind == OpKind::Mean) v = b_.CreateFDiv(v, f64c(count));
      v = b_.CreateFPTrunc(v, f32_);
      store(bf16 ? narrowBF16(v) : v, out, g);
    });
  }
}

// Lanes along `axis`: nested loops over the other dims, body(base offset,
// lane stride, lane index in row-major order of the other dims).
void OpLowering::lanes(const Shape& shape, int64_t axis,
                       const std::function<void(llvm::Value* base, int64_t stride, llvm::Value* lane)>& body) {
  int64_t outer = 1, inner = 1, n = shape[axis];
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  nest({outer, inner}, [&](const std::vector<llvm::Value*>& ivs) {
    body(offset(ivs, {n * inner, 1}), inner, offset(ivs, {inner, 1}));
  });
}

llvm::Value* OpLowering::laneOffset(llvm::Value* base, int64_t stride, llvm::Value* j) {
  return b_.CreateAdd(base, stride == 1 ? j : b_.CreateMul(j, i64c(stride), "", true, true), "", true, true);
}

void OpLowering::emitArgMax(const ir::Op& op) {
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
                                            b_.CreateAnd(math_.isNan(v), b_.CreateFCmpORD(a[0], a[0])))
                              : b_.CreateICmpSGT(v, a[0]);
        return std::vector<llvm::Value*>{b_.CreateSelect(take, v, a[0]),
                                         b_.CreateSelect(take, b_.CreateTrunc(j, i32_), a[1])};
      });
    store(best[1], out, lane);
  });
}

// An element of `in` as f32 (bf16 widened exactly), and an f32 stored as
// `result`'s dtype (bf16 rounded once): the normalisations compute bf16 in
// f32 as the reference kernel does.
llvm::Value* OpLowering::loadAsF32(IRValue in, llvm::Value* p, llvm::Value* off) {
  return in->type.dtype == DType::BF16 ? widenBF16(loadIn(i16_, p, off)) : loadIn(f32_, p, off);
}
void OpLowering::storeFromF32(IRValue result, llvm::Value* v, llvm::Value* p, llvm::Value* off) {
  store(result->type.dtype == DType::BF16 ? narrowBF16(v) : v, p, off);
}

void OpLowering::emitSoftmax(const ir::Op& op) {
  IRValue in = op.operands[0];
  const bool log = op.kind == OpKind::LogSoftmax;
  // bf16 cannot hold the exponentials between the passes: they are
  // computed again in the last one.
  const bool keepExp = !log && op.result->type.dtype == DType::F32;
  llvm::Value *x = ptr(in), *out = ptr(op.result);
  const int64_t axis = op.attrs.getInt("axis"), n = in->type.shape[axis];
  lanes(in->type.shape, axis, [&](llvm::Value* base, int64_t stride, llvm::Value*) {
    auto at = [&](llvm::Value* j) { return laneOffset(base, stride, j); };
    llvm::Value* mx = loopAcc(n, {f32c(-INFINITY)}, [&](llvm::Value* j, const std::vector<llvm::Value*>& a) {
      llvm::Value* v = loadAsF32(in, x, at(j));
      return std::vector<llvm::Value*>{b_.CreateSelect(b_.CreateFCmpOLT(a[0], v), v, a[0])};  // std::max
    })[0];
    llvm::Value* sum = loopAcc(n, {f64c(0.0)}, [&](llvm::Value* j, const std::vector<llvm::Value*>& a) {
      llvm::Value* e = math_.exp(b_.CreateFSub(loadAsF32(in, x, at(j)), mx));
      if (keepExp) store(e, out, at(j));
      return std::vector<llvm::Value*>{addReassoc(a[0], b_.CreateFPExt(e, f64_))};
    })[0];
    if (log) {
      llvm::Value* ls = b_.CreateUnaryIntrinsic(llvm::Intrinsic::log, sum);
      llvm::Value* m64 = b_.CreateFPExt(mx, f64_);
      loop(n, [&](llvm::Value* j) {
        llvm::Value* z = b_.CreateFSub(b_.CreateFPExt(loadAsF32(in, x, at(j)), f64_), m64);
        storeFromF32(op.result, b_.CreateFPTrunc(b_.CreateFSub(z, ls), f32_), out, at(j));
      });
    } else {
      loop(n, [&](llvm::Value* j) {
        llvm::Value* e = keepExp ? load(f32_, out, at(j)) : math_.exp(b_.CreateFSub(loadAsF32(in, x, at(j)), mx));
        storeFromF32(op.result, b_.CreateFPTrunc(b_.CreateFDiv(b_.CreateFPExt(e, f64_), sum), f32_), out, at(j));
      });
    }
  });
}

// (x - mean) / sqrt(var + eps) over the groups left by reducing `axis`,
// mean and (biased) variance in double, two passes as Kernels.cpp.
void OpLowering::emitLayerNorm(const ir::Op& op) {
  IRValue in = op.operands[0];
  Shape space = in->type.shape, kept = space;
  for (int64_t a : op.attrs.getInts("axis")) kept[a] = 1;
  const int64_t groups = numel(kept);
  const double count = (double)in->type.numElements() / (double)groups;
  Strides xSt = rowMajorStrides(space), accSt = bcastStrides(kept, space);
  collapse(space, {&xSt, &accSt});
  llvm::Value *x = ptr(in), *out = ptr(op.result);
  llvm::Value *mean = tempPtr(0), *var = tempPtr((size_t)groups * 8);
  fill(mean, groups, f64c(0.0));
  fill(var, groups, f64c(0.0));
  auto xAt = [&](llvm::Value* off) { return b_.CreateFPExt(loadAsF32(in, x, off), f64_); };
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
    storeFromF32(op.result, b_.CreateFPTrunc(b_.CreateFDiv(d, load(f64_, var, o[1])), f32_), out, o[0]);
  });
}

void OpLowering::emitCumSum(const ir::Op& op) {
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

// An einsum that is not a GEMM, as loop nests in the order of the
// reference kernel (Kernels.cpp's einsumGeneric): output labels outside,
// summed labels (sorted) inside, accumulating the operands' product in f32
// in that order.
void OpLowering::emitEinsumLoops(const ir::Op& op) {
  const ir::EinsumSpec& es = op.attrs.getEinsum("spec");
  std::map<char, int64_t> size;
  for (size_t i = 0; i < op.operands.size(); ++i)
    for (size_t d = 0; d < es.inputs[i].size(); ++d) size[es.inputs[i][d]] = op.operands[i]->type.shape[d];
  std::string summed;
  for (auto& [ch, n] : size)
    if (es.output.find(ch) == std::string::npos) summed += ch;
  auto stridesOver = [&](const std::string& loopLabels, size_t operand) {
    Strides own = rowMajorStrides(op.operands[operand]->type.shape), st(loopLabels.size(), 0);
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
  map(outShape, {rowMajorStrides(outShape)}, [&](const std::vector<llvm::Value*>& oivs, const std::vector<llvm::Value*>& o) {
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

}  // namespace gsl::backend::jit
