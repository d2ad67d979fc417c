// The op timer's table (KernelProfile.h): gsl_rt_profile's records by op,
// and what each row says about its op (kind, GEMM shape, FLOPs), worked
// out once, when the op is first seen.
#include "backend/jit/KernelProfile.h"

#include <chrono>
#include <map>
#include <mutex>
#include <unordered_map>

#include "backend/jit/BufferPlan.h"
#include "backend/jit/Contraction.h"
#include "backend/jit/Runtime.h"

namespace gsl::backend {

namespace {

using ir::OpClass;
using ir::OpKind;

// The counter llvm.readcyclecounter reads in the generated code (rdtsc).
uint64_t tscNow() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_ia32_rdtsc();
#else
  return 0;
#endif
}

struct Entry {
  KernelProfileRow row;
  uint64_t cycles = 0;
};

// Time-stamp counter ticks per second, from the counter and the steady
// clock read at the reset and again when the table is read (the counter
// is invariant on the CPUs the JIT targets: it ticks at a fixed rate
// whatever the core's clock).
struct Table {
  std::mutex mutex;
  std::unordered_map<const ir::Op*, size_t> index;
  std::vector<Entry> entries;
  uint64_t tsc0 = tscNow();
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
};

Table& table() {
  static Table t;
  return t;
}

// "B x M x N x K" of a contraction as the JIT runs it (planGemm with
// AVX-512's width: the layout, not the code, matters here), and the copies
// it makes of operands that cannot be read in place.
std::string gemmShape(const ir::Op& op, double& flops) {
  JitOptions o;
  o.vectorWidth = 16;
  std::optional<jit::Gemm> g = jit::planGemm(op, o);
  if (!g) return op.result->type.str() + " (einsum loops)";
  int64_t batch = 1;
  for (int64_t d : g->batch) batch *= d;
  flops = 2.0 * (double)batch * (double)g->M * (double)g->N * (double)g->K;
  std::string s;
  if (batch > 1) s += std::to_string(batch) + " x ";
  s += std::to_string(g->M) + "x" + std::to_string(g->N) + "x" + std::to_string(g->K);
  // Which operand is read transposed (A by columns, B by columns: A·Bᵀ).
  if (g->rsA == 1 && g->M > 1) s += " At";
  if (g->csB != 1 && g->N > 1) s += " Bt";
  if (g->copyA.on) s += " copyA";
  if (g->copyB.on) s += " copyB";
  if (g->copyC.on) s += " copyC";
  if (g->code == jit::Gemm::Code::Eigen) s += " eigen";
  if (g->code == jit::Gemm::Code::Dots) s += " dots";
  return s;
}

// Whether `op` is an elementwise op of the host's function (not of a loop
// body) that writes one of its results after the first: in a training
// step (Training.cpp: loss, new params, new optimizer states) the
// optimizer's update. (The per-rank program does not keep the training
// request, so a forward function with several results would count too.)
bool optimizerUpdate(const ir::Op& op, const ir::Function* root, const ir::Function* fn) {
  if (fn != root) return false;
  for (size_t j = 1; j < root->results.size(); ++j)
    if (root->results[j] == op.result) return true;
  return false;
}

KernelProfileRow describe(const ir::Op& op, const ir::Function* root, const ir::Function* fn) {
  KernelProfileRow r;
  r.function = root ? root->name : fn->name;
  r.op = op.info().mnemonic;
  if (op.loc.valid()) r.op += ":" + std::to_string(op.loc.line);
  r.shape = op.result->type.str();
  const OpClass cls = op.info().cls;
  if (cls == OpClass::Contraction) {
    r.kind = "gemm";
    r.shape = gemmShape(op, r.flops);
  } else if (cls == OpClass::Collective) {
    r.kind = "collective";
  } else if (jit::isElementwise(op.kind) || cls == OpClass::Random) {
    r.kind = optimizerUpdate(op, root, fn) ? "optimizer" : "elementwise";
  } else if (op.kind == OpKind::Softmax || op.kind == OpKind::LogSoftmax || op.kind == OpKind::LayerNorm) {
    r.kind = "softmax/layer_norm";
  } else if (cls == OpClass::Reduction || op.kind == OpKind::CumSum) {
    r.kind = "reduction";
  } else if (cls == OpClass::DataMovement || cls == OpClass::Source) {
    r.kind = "copy";
  } else {
    r.kind = "other";
  }
  return r;
}

}  // namespace

std::vector<KernelProfileRow> jitKernelProfile() {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t.t0).count();
  const uint64_t ticks = tscNow() - t.tsc0;
  const double perTick = ticks ? secs / (double)ticks : 0;
  std::vector<KernelProfileRow> rows;
  for (const Entry& e : t.entries) {
    rows.push_back(e.row);
    rows.back().seconds = (double)e.cycles * perTick;
  }
  return rows;
}

void jitKernelProfileReset() {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  t.index.clear();
  t.entries.clear();
  t.tsc0 = tscNow();
  t.t0 = std::chrono::steady_clock::now();
}

}  // namespace gsl::backend

extern "C" void gsl_rt_profile(void* ctx, int64_t op, int64_t cycles) {
  using namespace gsl::backend;
  auto* c = static_cast<jit::CallContext*>(ctx);
  const gsl::ir::Op* o = c->fn->ops[(size_t)op].get();
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  auto [it, fresh] = t.index.emplace(o, t.entries.size());
  if (fresh) t.entries.push_back({describe(*o, c->root, c->fn), 0});
  Entry& e = t.entries[it->second];
  e.row.calls++;
  e.cycles += (uint64_t)cycles;
}
