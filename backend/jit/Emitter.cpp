#include "backend/jit/Emitter.h"

#include <llvm/IR/BasicBlock.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/Verifier.h>
#include <llvm/TargetParser/Triple.h>
#include <llvm/Support/raw_ostream.h>

#include "support/Diagnostics.h"

namespace gsl::backend::jit {

Emitter::Emitter(const ir::Function& f, const BufferPlan& plan, const JitOptions& opts, llvm::Module& m)
    : f_(f), m_(m), c_(m.getContext()), b_(c_), opts_(opts), plan_(plan) {
  f32_ = b_.getFloatTy();
  f64_ = b_.getDoubleTy();
  i32_ = b_.getInt32Ty();
  i16_ = b_.getInt16Ty();
  i64_ = b_.getInt64Ty();
  ptr_ = b_.getPtrTy();
}

void Emitter::beginFunction(const std::string& symbol) {
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
}

void Emitter::finishFunction() {
  b_.CreateRet(b_.getInt32(0));
  std::string err;
  llvm::raw_string_ostream os(err);
  GSL_ASSERT(!llvm::verifyFunction(*fn_, &os), "jit: generated invalid LLVM IR for @" + f_.name + ": " + err);
}

// Base pointer of a materialised value (computed at the top level of the
// function, so it dominates every later use).
llvm::Value* Emitter::ptr(IRValue v) {
  auto it = ptrs_.find(v);
  GSL_ASSERT(it != ptrs_.end(), "jit: value %" + std::to_string(v->id) + " has no buffer");
  return it->second;
}

void Emitter::bindStorage(IRValue v) {
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
      if (s.dynamicRow) break;  // bound by the dynamic_index's code
      ptrs_[v] = s.elemOffset ? b_.CreateConstInBoundsGEP1_64(i32_, ptr(s.base), s.elemOffset, "view")
                              : ptr(s.base);
      break;
    case Storage::Param: case Storage::None: break;  // bound by the param op / none
  }
}

llvm::Value* Emitter::tempPtr(size_t offset) {
  if (temp_) return offset ? b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), temp_, offset, "tmp") : temp_;
  return b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), workspace_, plan_.temp[opIndex_] + offset, "tmp");
}

llvm::Value* Emitter::opIndexValue() { return opIndexArg_ ? opIndexArg_ : i64c(opIndex_); }

llvm::Value* Emitter::gep(llvm::Type* t, llvm::Value* base, llvm::Value* off) {
  return b_.CreateInBoundsGEP(t, base, off);
}

// Loads of the op's own buffers (its result, temp space).
// Elements are 4-byte aligned, bf16 ones (i16) 2-byte.
static llvm::Align elemAlign(llvm::Type* t) { return llvm::Align(t->getScalarSizeInBits() == 16 ? 2 : 4); }

llvm::Value* Emitter::load(llvm::Type* t, llvm::Value* base, llvm::Value* off) {
  return b_.CreateAlignedLoad(t, gep(t, base, off), elemAlign(t));
}

// Loads of an operand: the buffer planner never places a value being
// written where a value being read lives, so operand loads do not alias
// the stores of the current scope (alias-scope metadata; this is what
// lets LLVM vectorise and keep accumulators in registers).
llvm::Value* Emitter::loadIn(llvm::Type* t, llvm::Value* base, llvm::Value* off) {
  auto* l = b_.CreateAlignedLoad(t, gep(t, base, off), elemAlign(t));
  l->setMetadata(llvm::LLVMContext::MD_noalias, scope_);
  return l;
}

void Emitter::store(llvm::Value* v, llvm::Value* base, llvm::Value* off) {
  auto* s = b_.CreateAlignedStore(v, gep(v->getType(), base, off), elemAlign(v->getType()));
  s->setMetadata(llvm::LLVMContext::MD_alias_scope, scope_);
}

// A new scope: stores from here on are in it. Starts every op, and every
// phase of an op that reads what an earlier phase wrote through loadIn.
void Emitter::newScope(bool stream) {
  llvm::MDBuilder mdb(c_);
  if (!domain_) domain_ = mdb.createAnonymousAliasScopeDomain("gsl");
  scope_ = llvm::MDNode::get(c_, {mdb.createAnonymousAliasScope(domain_, stream ? kStreamScope : "op")});
}

// Vector stores in a kStreamScope scope that the optimiser proved aligned
// to their size become non-temporal (vmovntps on x86: the cache lines are
// written without being read first), and the function's returns are
// preceded by a store fence, so that the results are visible to whoever
// reads them next, on any thread.
void markStreamingStores(llvm::Module& m) {
  if (!llvm::Triple(m.getTargetTriple()).isX86()) return;
  for (llvm::Function& fn : m) {
    bool marked = false;
    for (llvm::BasicBlock& bb : fn)
      for (llvm::Instruction& in : bb) {
        auto* st = llvm::dyn_cast<llvm::StoreInst>(&in);
        if (!st || !st->getValueOperand()->getType()->isVectorTy()) continue;
        const uint64_t bytes = m.getDataLayout().getTypeStoreSize(st->getValueOperand()->getType());
        llvm::MDNode* scopes = st->getMetadata(llvm::LLVMContext::MD_alias_scope);
        if (!scopes || st->getAlign().value() < bytes) continue;
        bool stream = false;
        for (const llvm::MDOperand& op : scopes->operands())
          if (auto* sc = llvm::dyn_cast<llvm::MDNode>(op.get()); sc && sc->getNumOperands() > 2)
            if (auto* name = llvm::dyn_cast<llvm::MDString>(sc->getOperand(2).get()))
              stream |= name->getString() == kStreamScope;
        if (!stream) continue;
        st->setMetadata(llvm::LLVMContext::MD_nontemporal,
                        llvm::MDNode::get(m.getContext(), {llvm::ConstantAsMetadata::get(
                                                              llvm::ConstantInt::get(llvm::Type::getInt32Ty(m.getContext()), 1))}));
        marked = true;
      }
    if (!marked) continue;
    for (llvm::BasicBlock& bb : fn)
      if (auto* ret = llvm::dyn_cast<llvm::ReturnInst>(bb.getTerminator()))
        llvm::IRBuilder<>(ret).CreateIntrinsic(llvm::Intrinsic::x86_sse_sfence, {}, {});
  }
}

llvm::FunctionCallee Emitter::helper(const char* name, llvm::Type* ret, llvm::ArrayRef<llvm::Type*> args) {
  auto fc = m_.getOrInsertFunction(name, llvm::FunctionType::get(ret, args, false));
  if (auto* fn = llvm::dyn_cast<llvm::Function>(fc.getCallee())) fn->addFnAttr(llvm::Attribute::NoUnwind);
  return fc;
}

// Branches to the error exit when `status` (i32) is nonzero.
void Emitter::checkStatus(llvm::Value* status) {
  auto* ok = llvm::BasicBlock::Create(c_, "ok", fn_);
  b_.CreateCondBr(b_.CreateICmpNE(status, b_.getInt32(0)), error_, ok);
  b_.SetInsertPoint(ok);
}

// for (iv = 0; iv < n; ++iv) body(iv), n a constant. The builder is left
// after the loop.
void Emitter::loop(int64_t n, const std::function<void(llvm::Value*)>& body, bool vectorize) {
  loopAcc(
      n, {},
      [&](llvm::Value* iv, const std::vector<llvm::Value*>&) {
        body(iv);
        return std::vector<llvm::Value*>{};
      },
      vectorize);
}

std::vector<llvm::Value*> Emitter::loopAcc(int64_t n, std::vector<llvm::Value*> init, const AccBody& body,
                                           bool vectorize) {
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
  llvm::BranchInst* br = b_.CreateCondBr(b_.CreateICmpSLT(inc, i64c(n)), head, exit);
  if (!vectorize) {  // !llvm.loop !{self, !{"llvm.loop.vectorize.enable", false}}
    llvm::Metadata* off[] = {llvm::MDString::get(c_, "llvm.loop.vectorize.enable"),
                             llvm::ConstantAsMetadata::get(b_.getFalse())};
    llvm::Metadata* ops[] = {nullptr, llvm::MDNode::get(c_, off)};
    llvm::MDNode* md = llvm::MDNode::getDistinct(c_, ops);
    md->replaceOperandWith(0, md);
    br->setMetadata(llvm::LLVMContext::MD_loop, md);
  }
  b_.SetInsertPoint(exit);
  return next;
}

// Nested loops over `shape` (outer first); body(ivs).
void Emitter::nest(const Shape& shape, const std::function<void(const std::vector<llvm::Value*>&)>& body) {
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
llvm::Value* Emitter::offset(const std::vector<llvm::Value*>& ivs, const Strides& st, int64_t base) {
  llvm::Value* off = nullptr;
  for (size_t d = 0; d < ivs.size() && d < st.size(); ++d) {
    if (st[d] == 0) continue;
    llvm::Value* t = st[d] == 1 ? ivs[d] : b_.CreateMul(ivs[d], i64c(st[d]), "", true, true);
    off = off ? b_.CreateAdd(off, t, "", true, true) : t;
  }
  if (!off) return i64c(base);
  return base ? b_.CreateAdd(off, i64c(base), "", true, true) : off;
}

void Emitter::map(const Shape& shape, const std::vector<Strides>& st, const MapBody& body) {
  nest(shape, [&](const std::vector<llvm::Value*>& ivs) {
    std::vector<llvm::Value*> offs;
    for (const Strides& s : st) offs.push_back(offset(ivs, s));
    body(ivs, offs);
  });
}

// Copies 4-byte words: dst[dstSt . i] = src[srcSt . i] over `shape`.
void Emitter::copyWords(llvm::Value* dst, llvm::Value* src, Shape shape, Strides dstSt, Strides srcSt,
                        llvm::Type* word) {
  if (!word) word = i32_;
  const uint64_t bytes = word->getScalarSizeInBits() / 8;
  collapse(shape, {&dstSt, &srcSt});
  if (shape.size() == 1 && dstSt[0] == 1 && srcSt[0] == 1) {
    b_.CreateMemCpy(dst, elemAlign(word), src, elemAlign(word), (uint64_t)shape[0] * bytes);
    return;
  }
  const bool tiled = tileTranspose(shape, dstSt, srcSt);
  const size_t r = shape.size();
  if (tiled && bytes == 4 && dstSt[r - 1] == 1) {
    // The two 16 x 16 tile dims: n x n blocks (n the vector width, 8 or
    // 16) transposed in registers: n contiguous source rows in, n
    // contiguous destination rows out.
    const int64_t n = opts_.vectorWidth >= 16 ? 16 : 8, T = shape[r - 1];
    Shape outer(shape.begin(), shape.end() - 2);
    outer.push_back(T / n), outer.push_back(T / n);
    Strides od(dstSt.begin(), dstSt.end() - 2), os(srcSt.begin(), srcSt.end() - 2);
    od.push_back(dstSt[r - 2] * n), od.push_back(n);  // block (i, j): rows of a, columns of last
    os.push_back(n), os.push_back(srcSt[r - 1] * n);
    const int64_t srcRow = srcSt[r - 1], dstRow = dstSt[r - 2];
    auto* vt = llvm::FixedVectorType::get(word, (unsigned)n);
    map(outer, {od, os}, [&](const std::vector<llvm::Value*>&, const std::vector<llvm::Value*>& o) {
      std::vector<llvm::Value*> rows;  // rows[l][j] = source (a = j, last = l)
      for (int64_t l = 0; l < n; ++l) {
        auto* ld = b_.CreateAlignedLoad(vt, gep(word, src, b_.CreateAdd(o[1], i64c(l * srcRow))), elemAlign(word));
        ld->setMetadata(llvm::LLVMContext::MD_noalias, scope_);
        rows.push_back(ld);
      }
      transposeInRegisters(rows);  // rows[j][l] = source (a = j, last = l)
      for (int64_t j = 0; j < n; ++j) {
        auto* st = b_.CreateAlignedStore(rows[(size_t)j], gep(word, dst, b_.CreateAdd(o[0], i64c(j * dstRow))),
                                         elemAlign(word));
        st->setMetadata(llvm::LLVMContext::MD_alias_scope, scope_);
      }
    });
    return;
  }
  map(shape, {dstSt, srcSt}, [&](const std::vector<llvm::Value*>&, const std::vector<llvm::Value*>& o) {
    store(loadIn(word, src, o[1]), dst, o[0]);
  });
}

// Transposes the n x n matrix whose rows are the n vectors of `rows` (n a
// power of two): log2(n) stages, stage k exchanging bit k of the row and
// column indices between rows i and i | 2^k with two-input shuffles.
void Emitter::transposeInRegisters(std::vector<llvm::Value*>& rows) {
  const int n = (int)rows.size();
  for (int bit = 1; bit < n; bit <<= 1)
    for (int i = 0; i < n; ++i) {
      if (i & bit) continue;
      const int j = i | bit;
      std::vector<int> lo(n), hi(n);
      for (int c = 0; c < n; ++c) {
        lo[c] = (c & bit) ? n + (c ^ bit) : c;  // row i keeps its bit-clear columns, takes row j's
        hi[c] = (c & bit) ? n + c : (c ^ bit);
      }
      llvm::Value* a = b_.CreateShuffleVector(rows[i], rows[j], lo);
      llvm::Value* b = b_.CreateShuffleVector(rows[i], rows[j], hi);
      rows[i] = a, rows[j] = b;
    }
}

// A copy whose innermost destination dim reads the source with a stride
// while another dim reads it contiguously (a transpose) walks one of the
// two with a large stride. When both sizes are multiples of 16, the
// iteration space is reordered into 16 x 16 tiles (one cache line each
// way): [other dims, a / 16, last / 16, 16 of a, 16 of last].
bool Emitter::tileTranspose(Shape& shape, Strides& dst, Strides& src) {
  constexpr int64_t T = 16;
  const size_t last = shape.size() - 1;
  if (shape.size() < 2 || src[last] == 1) return false;
  size_t a = last;
  for (size_t d = 0; d < last; ++d)
    if (src[d] == 1) a = d;
  if (a == last || shape[a] % T || shape[last] % T) return false;
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
  return true;
}

void Emitter::fill(llvm::Value* dst, int64_t n, llvm::Value* v) {
  loop(n, [&](llvm::Value* i) { store(v, dst, i); });
}

// bf16 bits -> f32: u = h << 16 (support/BF16.h's bf16ToF32).
// `elem`, or a vector of it as long as `like` if that is a vector.
static llvm::Type* likeShape(llvm::Type* like, llvm::Type* elem) {
  if (auto* v = llvm::dyn_cast<llvm::VectorType>(like)) return llvm::VectorType::get(elem, v);
  return elem;
}

llvm::Value* Emitter::widenBF16(llvm::Value* h) {
  llvm::Type *wide = likeShape(h->getType(), i32_), *fl = likeShape(h->getType(), f32_);
  return b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(h, wide), llvm::ConstantInt::get(wide, 16)), fl);
}

// f32 -> bf16 bits, support/BF16.h's f32ToBF16: a NaN keeps its upper
// bits with the quiet bit (0x0040) set; otherwise u + 0x7fff + the kept
// part's lowest bit, shifted down (ties to even; overflow carries into
// the infinity).
llvm::Value* Emitter::narrowBF16(llvm::Value* f) {
  llvm::Type *wide = likeShape(f->getType(), i32_), *half = likeShape(f->getType(), i16_);
  auto c = [&](uint32_t v) { return llvm::ConstantInt::get(wide, v); };
  llvm::Value* u = b_.CreateBitCast(f, wide);
  llvm::Value* hi = b_.CreateLShr(u, c(16));
  llvm::Value* rounded = b_.CreateLShr(b_.CreateAdd(u, b_.CreateAdd(c(0x7fff), b_.CreateAnd(hi, c(1)))), c(16));
  llvm::Value* nan = b_.CreateFCmpUNO(f, f);
  return b_.CreateTrunc(b_.CreateSelect(nan, b_.CreateOr(hi, c(0x40)), rounded), half);
}

void Emitter::copyConvertBF16(bool widen, llvm::Value* dst, llvm::Value* src, Shape shape, Strides dstSt,
                              Strides srcSt) {
  collapse(shape, {&dstSt, &srcSt});
  tileTranspose(shape, dstSt, srcSt);
  map(shape, {dstSt, srcSt}, [&](const std::vector<llvm::Value*>&, const std::vector<llvm::Value*>& o) {
    llvm::Value* x = loadIn(widen ? i16_ : f32_, src, o[1]);
    store(widen ? widenBF16(x) : narrowBF16(x), dst, o[0]);
  });
}
}  // namespace gsl::backend::jit
