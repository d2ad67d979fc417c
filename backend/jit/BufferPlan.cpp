// The buffer planner: planBuffers runs the steps below in order, each
// filling its part of the BufferPlan.
#include "backend/jit/BufferPlan.h"

#include <algorithm>
#include <map>

#include "backend/jit/OpLowering.h"
#include "support/Diagnostics.h"

namespace gsl::backend::jit {

namespace {

using ir::DType;
using ir::OpClass;
using ir::OpKind;
using ir::Shape;

bool isPlainReduction(OpKind k) {
  return k == OpKind::Sum || k == OpKind::Mean || k == OpKind::Max || k == OpKind::Min;
}

// Ops that read every operand element by element through an expression
// tree, so a fused producer can be evaluated inline.
bool readsThroughTrees(OpKind k) { return isElementwise(k) || isPlainReduction(k); }

// Ops that must run even when their result is unused: they can fail (take)
// or communicate with other ranks (collectives).
bool mustRun(const ir::Op& op) {
  return op.kind == OpKind::Take || op.info().cls == OpClass::Collective || op.kind == OpKind::Loop;
}

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

// The first result slot of each value that is a function result.
using ResultIndex = std::unordered_map<IRValue, int>;

ResultIndex resultSlots(const ir::Function& f) {
  ResultIndex resultIndex;
  for (size_t j = 0; j < f.results.size(); ++j) resultIndex.emplace(f.results[j], (int)j);
  return resultIndex;
}

// Liveness of ops: backwards from results and ops that must run.
void markLive(const ir::Function& f, BufferPlan& p) {
  const size_t n = f.ops.size();
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
}

// The ops on bf16 that generated code computes in f32 on widened values,
// each bf16 result rounded once (OpLowering's evalBF16, emitReduce,
// emitSoftmax, emitLayerNorm): the elementwise ops and the plain
// reductions bit for bit as the reference kernel, softmax, log_softmax
// and layer_norm as the f32 path (within an f32 ulp of the reference
// before the rounding), and transpose (2-byte copies).
bool generatedBF16(OpKind k) {
  switch (k) {
    case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Div: case OpKind::Maximum:
    case OpKind::Minimum: case OpKind::Neg: case OpKind::Abs: case OpKind::Relu: case OpKind::Copy:
    case OpKind::Exp: case OpKind::Tanh: case OpKind::Gelu: case OpKind::Cast: case OpKind::Where:
    case OpKind::Broadcast: case OpKind::Sum: case OpKind::Mean: case OpKind::Max: case OpKind::Min:
    case OpKind::Transpose: case OpKind::Log: case OpKind::Sqrt: case OpKind::Rsqrt: case OpKind::Erf:
    case OpKind::GeluExact: case OpKind::Sigmoid: case OpKind::Pow: case OpKind::Eq: case OpKind::Ne:
    case OpKind::Lt: case OpKind::Le: case OpKind::Gt: case OpKind::Ge: case OpKind::Softmax:
    case OpKind::LogSoftmax: case OpKind::LayerNorm:
      return true;
    default: return false;
  }
}

// Whether generated code handles this op's dtypes. A bf16 contraction that
// plans as a GEMM is generated (the f32 kernel on widened copies, or calls
// of the vdpbf16ps kernel with opts.bf16Dot; Contraction.h), unless a bf16
// matmul runs vdpbf16ps (opts.bf16Dot: one call of gsl_rt_bf16_matmul,
// OpLowering's emitFallback); so are the ops generatedBF16 lists. Another
// op with bf16 operands or results (other than a collective, which moves
// raw elements) is evaluated by the reference kernel, which computes in
// f32 and rounds once.
// `gemm`: the op's contraction plan (planGemm), if it has one.
bool generatedForDType(const ir::Op& op, const JitOptions& opts, const std::optional<Gemm>& gemm) {
  if (op.info().cls == ir::OpClass::Collective || op.kind == OpKind::Loop) return true;
  bool bf16 = op.result && op.result->type.dtype == DType::BF16;
  for (IRValue v : op.operands) bf16 |= v->type.dtype == DType::BF16;
  if (bf16 && (op.kind == OpKind::Einsum || (op.kind == OpKind::MatMul && opts.bf16Dot <= 0)))
    return gemm.has_value();
  return !bf16 || generatedBF16(op.kind);
}

bool runsReferenceKernel(const ir::Op& op, const JitOptions& opts, const std::optional<Gemm>& gemm) {
  if (op.kind == OpKind::Loop) return false;  // no reference kernel: its body's ops follow the list
  return !hasLowering(op.kind) ||
         std::find(opts.fallbackOps.begin(), opts.fallbackOps.end(), op.kind) != opts.fallbackOps.end() ||
         !generatedForDType(op, opts, gemm);
}

// The contraction plan of every matmul and einsum that plans as a GEMM,
// made once: the fallback choice asks whether a bf16 one does, and the
// lowering emits the plans of those that run as generated code.
void planContractions(const ir::Function& f, const JitOptions& opts, BufferPlan& p) {
  const size_t n = f.ops.size();
  p.gemm.assign(n, std::nullopt);
  for (size_t i = 0; i < n; ++i) p.gemm[i] = planGemm(*f.ops[i], opts);
}

void markFallback(const ir::Function& f, const JitOptions& opts, BufferPlan& p) {
  const size_t n = f.ops.size();
  p.fallback.assign(n, false);
  for (size_t i = 0; i < n; ++i) p.fallback[i] = runsReferenceKernel(*f.ops[i], opts, p.gemm[i]);
}

// Elementwise code that is generated (and so may be fused), and ops that
// read their operands through generated expression trees.
bool generatedElementwise(const ir::Function& f, const BufferPlan& p, size_t i) {
  return !p.fallback[i] && isElementwise(f.ops[i]->kind);
}
bool generatedTreeReader(const ir::Function& f, const BufferPlan& p, size_t i) {
  return !p.fallback[i] && readsThroughTrees(f.ops[i]->kind);
}

// Uses by live ops (with multiplicity) and the (last) consumer.
struct Uses {
  std::unordered_map<IRValue, int> count;
  std::unordered_map<IRValue, size_t> consumer;
};

Uses countUses(const ir::Function& f, const BufferPlan& p) {
  Uses u;
  for (size_t i = 0; i < f.ops.size(); ++i) {
    if (!p.live[i]) continue;
    for (IRValue v : f.ops[i]->operands) {
      u.count[v]++;
      u.consumer[v] = i;
    }
  }
  return u;
}

// Fusion: a single-use elementwise result read through a tree by an op of
// the same element count (a reduction reads its operand's own shape).
void markFused(const ir::Function& f, const ResultIndex& resultIndex, const Uses& u, BufferPlan& p) {
  const size_t n = f.ops.size();
  p.fused.assign(n, false);
  for (size_t i = 0; i < n; ++i) {
    const ir::Op& op = *f.ops[i];
    IRValue v = op.result;
    if (!p.live[i] || !generatedElementwise(f, p, i) || resultIndex.count(v)) continue;
    auto uses = u.count.find(v);
    if (uses == u.count.end() || uses->second != 1) continue;
    const size_t consumer = u.consumer.at(v);
    const ir::Op& c = *f.ops[consumer];
    if (!generatedTreeReader(f, p, consumer)) continue;
    if (isElementwise(c.kind) && v->type.numElements() != c.result->type.numElements()) continue;
    p.fused[i] = true;
  }
}

// Side outputs (BufferPlan::sideOutput): an f32 elementwise result of the
// function with one reader, an elementwise op whose fused tree, up to its
// root, has the result's shape at every step (so the root's loop index is
// the result's), is stored by the root's loop. Adam's update is three
// results per param, m' = b1 m + (1 - b1) g, v' = b2 v + (1 - b2) g², and
// p' = p - lr m' / (sqrt(v') + eps), which reads both: as three loops it
// streams g twice and m' and v' back in (10 streams of the param's size);
// as one, p, g, m and v are read once and p', m', v' written once (7).
void markSideOutputs(const ir::Function& f, const ResultIndex& resultIndex, const Uses& u, BufferPlan& p) {
  const size_t n = f.ops.size();
  p.sideOutput.assign(n, false);
  std::unordered_map<const ir::Op*, size_t> index;
  for (size_t i = 0; i < n; ++i) index[f.ops[i].get()] = i;
  for (size_t i = 0; i < n; ++i) {
    const ir::Op& op = *f.ops[i];
    IRValue v = op.result;
    if (!p.live[i] || p.fused[i] || !generatedElementwise(f, p, i) || !resultIndex.count(v) || v->argIndex >= 0 ||
        v->type.dtype != DType::F32)
      continue;
    auto uses = u.count.find(v);
    if (uses == u.count.end() || uses->second != 1) continue;
    // Up the tree from the reader to its root, every op of v's shape.
    size_t c = u.consumer.at(v);
    bool ok = true;
    for (;;) {
      const ir::Op& cop = *f.ops[c];
      if (!generatedElementwise(f, p, c) || cop.result->type.shape != v->type.shape) {
        ok = false;
        break;
      }
      if (!p.fused[c]) break;
      c = u.consumer.at(cop.result);
    }
    if (ok) p.sideOutput[i] = true;
  }
}

// Only the live, unfused matmuls and einsums that run as generated code
// keep their contraction plans.
void keepGeneratedContractions(const ir::Function& f, BufferPlan& p) {
  for (size_t i = 0; i < f.ops.size(); ++i)
    if (!(p.live[i] && !p.fused[i] && !p.fallback[i])) p.gemm[i].reset();
}

// Where each result of the function comes from.
void planResults(const ir::Function& f, const ResultIndex& resultIndex, BufferPlan& p) {
  p.results.resize(f.results.size());
  for (size_t j = 0; j < f.results.size(); ++j) {
    IRValue v = f.results[j];
    if (resultIndex.at(v) != (int)j) p.results[j] = {ResultSource::Repeat, resultIndex.at(v)};
    else if (v->argIndex >= 0) p.results[j] = {ResultSource::Arg, v->argIndex};
    else p.results[j] = {ResultSource::Computed, (int)j};
  }
}

// Storage kinds of the arguments and of every op's result (None for ops
// that do not run or are fused). Constants read by an op that does not
// inline them need a buffer.
void assignStorage(const ir::Function& f, const ResultIndex& resultIndex, BufferPlan& p) {
  const size_t n = f.ops.size();
  std::unordered_map<IRValue, bool> constNeedsBuffer;
  for (size_t i = 0; i < n; ++i) {
    if (!p.live[i] || p.fused[i]) continue;
    const ir::Op& op = *f.ops[i];
    if (generatedTreeReader(f, p, i)) continue;
    for (IRValue v : op.operands)
      if (v->def && v->def->kind == OpKind::Constant) constNeedsBuffer[v] = true;
  }

  for (IRValue a : f.args) p.storage[a] = {Storage::Input, a->argIndex};
  for (size_t i = 0; i < n; ++i) {
    const ir::Op& op = *f.ops[i];
    if (op.kind == OpKind::Loop) {  // several results, each its own buffer (LowerLoop.cpp)
      for (IRValue r : op.results) {
        auto result = resultIndex.find(r);
        if (result != resultIndex.end()) p.storage[r] = {Storage::Output, result->second};
        else p.storage[r].kind = Storage::Workspace;
      }
      continue;
    }
    IRValue v = op.result;
    Storage& s = p.storage[v];
    if (!p.live[i] || p.fused[i]) continue;
    auto result = resultIndex.find(v);
    if (result != resultIndex.end() && v->argIndex < 0) {
      s = {Storage::Output, result->second};
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
      // Row i of x is contiguous: read in place, not copied (a loop over
      // layers reads each layer's weights this way, forward and backward).
      case OpKind::DynamicIndex:
        s = {Storage::Alias, -1, 0, op.operands[0], 0};
        s.dynamicRow = true;
        break;
      default: s.kind = Storage::Workspace;
    }
  }
}

// A transpose whose every reader is a generated f32 GEMM is not copied:
// the GEMMs read its operand's buffer with the permuted strides (planGemm's
// operandStrides; the kernel reads a transposed B through its packed
// panels and a transposed A by columns, Contraction.cpp). The backward
// pass of `x @ w` is `dy @ transpose(w)` and `transpose(x) @ dy`: without
// this, every weight and activation the backward pass multiplies by is
// copied first. Folded only when every reader's new plan is the generated
// kernel (a copy inside the GEMM would only move the transpose), and the
// operand is stored contiguously (not itself a folded transpose).
void foldTransposes(const ir::Function& f, const JitOptions& opts, const Uses& u, BufferPlan& p) {
  const size_t n = f.ops.size();
  std::unordered_map<IRValue, std::vector<size_t>> readers;
  for (size_t i = 0; i < n; ++i)
    if (p.live[i])
      for (IRValue v : f.ops[i]->operands) readers[v].push_back(i);
  auto stridesOf = [&](const ir::Op& c) {
    std::vector<Strides> st;
    for (IRValue v : c.operands) {
      auto it = p.strided.find(v);
      st.push_back(it == p.strided.end() ? Strides{} : it->second);
    }
    return st;
  };
  for (size_t i = 0; i < n; ++i) {
    const ir::Op& op = *f.ops[i];
    if (op.kind != OpKind::Transpose || !p.live[i] || p.fallback[i] || op.result->type.dtype != DType::F32) continue;
    IRValue in = op.operands[0];
    const Storage& s = p.storage.at(op.result);
    if (s.kind != Storage::Workspace || p.strided.count(in) || !u.count.count(op.result)) continue;
    const Storage::Kind k = p.storage.at(in).kind;
    if (k == Storage::None) continue;
    const Strides inSt = rowMajorStrides(in->type.shape);
    Strides st;
    for (int64_t d : op.attrs.getInts("perm")) st.push_back(inSt[(size_t)d]);
    p.strided[op.result] = st;
    std::vector<std::pair<size_t, Gemm>> plans;
    bool ok = true;
    for (size_t c : readers[op.result]) {
      const ir::Op& cop = *f.ops[c];
      std::optional<Gemm> g;
      if (p.gemm[c] && !p.gemm[c]->bf16) g = planGemm(cop, opts, stridesOf(cop));
      if (!g || g->code != Gemm::Code::Kernel) {
        ok = false;
        break;
      }
      plans.push_back({c, *g});
    }
    if (!ok) {
      p.strided.erase(op.result);
      continue;
    }
    for (auto& [c, g] : plans) p.gemm[c] = g;
    p.storage[op.result] = {Storage::Alias, -1, 0, in, 0};
  }
}

// Per op: the op whose code evaluates it (the root of its fused tree, or
// itself).
std::vector<size_t> treeRoots(const ir::Function& f, const Uses& u, const BufferPlan& p) {
  const size_t n = f.ops.size();
  std::vector<size_t> root(n);
  for (size_t i = n; i-- > 0;)
    root[i] = p.fused[i] || p.sideOutput[i] ? root[u.consumer.at(f.ops[i]->result)] : i;
  return root;
}

// The value whose buffer `v` lives in (an alias's base, transitively).
IRValue owner(const BufferPlan& p, IRValue v) {
  for (auto it = p.storage.find(v); it != p.storage.end() && it->second.kind == Storage::Alias;
       it = p.storage.find(v))
    v = it->second.base;
  return v;
}

// The op after which each buffer is read no more: a value read inside a
// fused tree is read by the tree's root; reading an alias reads its base.
std::unordered_map<IRValue, size_t> lastReaders(const ir::Function& f, const std::vector<size_t>& root,
                                                const BufferPlan& p) {
  const size_t n = f.ops.size();
  auto owner = [&](IRValue v) { return jit::owner(p, v); };
  std::unordered_map<IRValue, size_t> lastUse;
  for (size_t i = 0; i < n; ++i) {
    if (!p.live[i]) continue;
    for (IRValue res : f.ops[i]->results) {  // one, but a loop's several
      IRValue r = owner(res);
      if (!lastUse.count(r)) lastUse[r] = root[i];
    }
    for (IRValue v : f.ops[i]->operands) {
      IRValue o = owner(v);
      lastUse[o] = std::max(lastUse.count(o) ? lastUse[o] : 0, root[i]);
    }
  }
  return lastUse;
}

size_t bytesOf(IRValue v) { return (size_t)v->type.byteSize(); }

// The materialised values the code of op `r` reads element by element at
// the index it writes: the leaves of its fused tree (ops fused into it
// expanded; constants are immediates).
// With `sideOutputs`, those (BufferPlan::sideOutput) are leaves too.
void treeLeaves(const ir::Function& f, const std::vector<size_t>& root, const std::unordered_map<const ir::Op*, size_t>& index,
                size_t r, const ir::Op& op, std::vector<IRValue>& leaves, const std::vector<bool>* sideOutputs = nullptr) {
  for (IRValue v : op.operands) {
    if (v->def && v->def->kind == OpKind::Constant) continue;
    auto d = v->def ? index.find(v->def) : index.end();
    if (d != index.end() && d->second != r && root[d->second] == r && !(sideOutputs && (*sideOutputs)[d->second]))
      treeLeaves(f, root, index, r, *v->def, leaves, sideOutputs);
    else leaves.push_back(v);
  }
}

// Donors (ResultSource::donor): a computed result written by generated
// elementwise code may take the buffer of an argument or param of its own
// type that the code reads as a leaf (so at the index it writes, before it
// writes it) and that no later op reads. Each input is the donor of one
// result at most. Whether it is used is decided per call (Donation).
void planDonors(const ir::Function& f, const std::vector<size_t>& root,
                const std::unordered_map<IRValue, size_t>& lastUse, BufferPlan& p) {
  const size_t n = f.ops.size();
  std::unordered_map<const ir::Op*, size_t> index;
  for (size_t i = 0; i < n; ++i) index[f.ops[i].get()] = i;
  // Each candidate input: its values (an argument, or every param op of
  // one name) and the last op reading its buffer (-1: none).
  struct Input {
    DonorInput id;
    std::vector<IRValue> values;
    int64_t last = -1;
    bool taken = false;
  };
  std::vector<Input> inputs;
  std::unordered_map<IRValue, size_t> inputOf;
  std::unordered_map<std::string, size_t> paramInput;
  auto add = [&](IRValue v, DonorInput id, size_t k) {
    inputOf[v] = k;
    inputs[k].values.push_back(v);
    auto it = lastUse.find(v);
    if (it != lastUse.end()) inputs[k].last = std::max(inputs[k].last, (int64_t)it->second);
  };
  for (IRValue a : f.args) {
    inputs.push_back({{a->argIndex, ""}, {}, -1, false});
    add(a, inputs.back().id, inputs.size() - 1);
  }
  for (size_t i = 0; i < n; ++i) {
    const ir::Op& op = *f.ops[i];
    if (op.kind != OpKind::Param || !p.live[i]) continue;
    const std::string name = op.attrs.getString("name");
    auto [it, fresh] = paramInput.emplace(name, inputs.size());
    if (fresh) inputs.push_back({{-1, name}, {}, -1, false});
    add(op.result, inputs[it->second].id, it->second);
  }
  // An input that is itself a result is read by the caller afterwards.
  for (IRValue v : f.results) {
    auto it = inputOf.find(v);
    if (it != inputOf.end() && v->argIndex >= 0) inputs[it->second].taken = true;
  }
  for (size_t j = 0; j < f.results.size(); ++j) {
    IRValue v = f.results[j];
    if (p.results[j].kind != ResultSource::Computed || !v->def) continue;
    // (A side output is written by its root's loop.)
    const size_t r = root[index.at(v->def)];
    if (!p.live[r] || p.fallback[r] || !isElementwise(v->def->kind)) continue;
    std::vector<IRValue> leaves, all;
    // A result's candidates are the inputs its own tree reads (a side
    // output it reads is its own value, with its own candidates); the
    // check below is over everything the loop reads.
    treeLeaves(f, root, index, r, *v->def, leaves, &p.sideOutput);
    treeLeaves(f, root, index, r, *f.ops[r], all);
    for (IRValue leaf : leaves) {
      auto it = inputOf.find(leaf);
      if (it == inputOf.end()) continue;
      Input& in = inputs[it->second];
      if (in.taken || leaf->type != v->type || in.last > (int64_t)r) continue;
      // Read at r only as leaves (not through an alias, which may index
      // differently).
      bool direct = true;
      for (IRValue other : all)
        if (!inputOf.count(other) && inputOf.count(owner(p, other)) && inputOf.at(owner(p, other)) == it->second)
          direct = false;
      if (!direct) continue;
      in.taken = true;
      p.results[j].donor = in.id;
      break;
    }
  }
}

// The temp bytes an op needs during its own execution.
size_t tempBytes(const ir::Op& op, const BufferPlan& p, size_t i) {
  const ir::TensorType& in = op.operands.empty() ? op.result->type : op.operands[0]->type;
  if (p.fallback[i]) return 0;
  switch (op.kind) {
    case OpKind::Sum: case OpKind::Mean:  // a double accumulator per result element
      return in.dtype == DType::F32 || in.dtype == DType::BF16 ? (size_t)op.result->type.numElements() * 8 : 0;
    case OpKind::Max: case OpKind::Min:
      return in.dtype == DType::BF16 ? (size_t)op.result->type.numElements() * 8 : 0;
    case OpKind::LayerNorm: {
      Shape kept = in.shape;
      for (int64_t a : op.attrs.getInts("axis")) kept[a] = 1;
      return (size_t)numel(kept) * 16;
    }
    case OpKind::MatMul: case OpKind::Einsum: return p.gemm[i] ? p.gemm[i]->tempBytes : 0;
    default: return 0;
  }
}

// Offsets: at each op allocate its result and temp space, then free the
// temp space and every buffer whose last reader this op was.
void assignOffsets(const ir::Function& f, const std::unordered_map<IRValue, size_t>& lastUse, BufferPlan& p) {
  const size_t n = f.ops.size();
  Arena arena;
  std::map<size_t, std::vector<IRValue>> freeAt;
  p.temp.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    if (!p.live[i] || p.fused[i]) continue;
    const ir::Op& op = *f.ops[i];
    for (IRValue r : op.results) {  // one, but a loop's several
      Storage& s = p.storage[r];
      if (s.kind == Storage::Workspace) {
        s.offset = arena.alloc(bytesOf(r));
        freeAt[lastUse.at(r)].push_back(r);
      }
    }
    if (size_t t = tempBytes(op, p, i)) {
      p.temp[i] = arena.alloc(t);
      arena.release(p.temp[i], t);
    }
    for (IRValue v : freeAt[i]) arena.release(p.storage[v].offset, bytesOf(v));
    freeAt.erase(i);
  }
  p.peak = arena.peak();
}

}  // namespace

bool runsReferenceKernel(const ir::Op& op, const JitOptions& opts) {
  return runsReferenceKernel(op, opts, planGemm(op, opts));
}

bool isElementwise(OpKind k) {
  OpClass c = ir::opInfo(k).cls;
  return c == OpClass::Unary || c == OpClass::Binary || c == OpClass::Ternary || k == OpKind::Broadcast;
}

size_t bytesOf(IRValue v) { return (size_t)v->type.byteSize(); }

BufferPlan planBuffers(const ir::Function& f, const JitOptions& opts) {
  BufferPlan p;
  const ResultIndex resultIndex = resultSlots(f);
  markLive(f, p);
  planContractions(f, opts, p);
  markFallback(f, opts, p);
  const Uses uses = countUses(f, p);
  markFused(f, resultIndex, uses, p);
  markSideOutputs(f, resultIndex, uses, p);
  keepGeneratedContractions(f, p);
  planResults(f, resultIndex, p);
  assignStorage(f, resultIndex, p);
  foldTransposes(f, opts, uses, p);
  const std::vector<size_t> roots = treeRoots(f, uses, p);
  const std::unordered_map<IRValue, size_t> lastUse = lastReaders(f, roots, p);
  assignOffsets(f, lastUse, p);
  planDonors(f, roots, lastUse, p);
  return p;
}

}  // namespace gsl::backend::jit
