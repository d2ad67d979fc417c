// extern "C" helpers called from JIT-compiled code (see Runtime.h).
#include "backend/jit/Runtime.h"
#include "backend/jit/BF16Gemm.h"
#include "backend/jit/KernelProfile.h"
#include "backend/jit/LowerLoop.h"

// GCC 12 reports a spurious -Wmaybe-uninitialized inside Eigen's AVX-512
// product kernel (as in backend/Kernels.cpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <Eigen/Core>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/Engine.h"
#include "backend/Kernels.h"
#include "backend/Random.h"
#include "support/Diagnostics.h"

using gsl::backend::jit::CallContext;

namespace {

CallContext& callContext(void* ctx) { return *static_cast<CallContext*>(ctx); }

const gsl::ir::Op& opAt(const CallContext& c, int64_t op) {
  GSL_ASSERT(c.fn && op >= 0 && (size_t)op < c.fn->ops.size(), "jit runtime: bad op index");
  return *c.fn->ops[(size_t)op];
}

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ColMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
using RowMap = Eigen::Map<const RowMat, 0, Eigen::OuterStride<>>;
using ColMap = Eigen::Map<const ColMat, 0, Eigen::OuterStride<>>;
using OutMap = Eigen::Map<RowMat, 0, Eigen::OuterStride<>>;

// A strided rows x cols operand: `rowMajor` says whether it is read as a
// row-major map (cs == 1) or a column-major one (rs == 1), `ld` is the
// other stride. Operands with no unit stride are first packed into `tmp`.
struct Operand {
  const float* p;
  bool rowMajor;
  int64_t ld;
};

Operand operand(const float* p, int64_t rows, int64_t cols, int64_t rs, int64_t cs,
                std::vector<float>& tmp) {
  if (cs == 1 || cols == 1) return {p, true, rows == 1 ? cols : rs};
  if (rs == 1 || rows == 1) return {p, false, cs};
  tmp.resize((size_t)(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) tmp[(size_t)(i * cols + j)] = p[i * rs + j * cs];
  return {tmp.data(), true, cols};
}

template <class MA, class MB>
void product(OutMap& C, const MA& A, const MB& B) {
  C.noalias() = A * B;
}

}  // namespace

namespace gsl::backend::jit {

std::vector<std::pair<std::string, void*>> runtimeSymbols() {
  return {
      {"gsl_rt_param", (void*)&gsl_rt_param},
      {"gsl_rt_random_uniform", (void*)&gsl_rt_random_uniform},
      {"gsl_rt_dropout", (void*)&gsl_rt_dropout},
      {"gsl_rt_collective", (void*)&gsl_rt_collective},
      {"gsl_rt_eval_op", (void*)&gsl_rt_eval_op},
      {"gsl_rt_bf16_matmul", (void*)&gsl_rt_bf16_matmul},
      {"gsl_rt_bf16_gemm", (void*)&gsl_rt_bf16_gemm},
      {"gsl_rt_take_error", (void*)&gsl_rt_take_error},
      {"gsl_rt_sgemm", (void*)&gsl_rt_sgemm},
      {"gsl_rt_pow_i32", (void*)&gsl_rt_pow_i32},
      {"gsl_rt_gelu", (void*)&gsl_rt_gelu},
      {"gsl_rt_sigmoid", (void*)&gsl_rt_sigmoid},
      {"gsl_rt_loop", (void*)&gsl_rt_loop},
      {"gsl_rt_profile", (void*)&gsl_rt_profile},
      // The C library functions LLVM lowers intrinsics and idioms to
      // (llvm.exp.f32 -> expf, frem -> fmodf, loop idioms -> memcpy/memset).
      {"expf", (void*)static_cast<float (*)(float)>(&::expf)},
      {"logf", (void*)static_cast<float (*)(float)>(&::logf)},
      {"powf", (void*)static_cast<float (*)(float, float)>(&::powf)},
      {"fmodf", (void*)static_cast<float (*)(float, float)>(&::fmodf)},
      {"exp2f", (void*)static_cast<float (*)(float)>(&::exp2f)},
      {"log2f", (void*)static_cast<float (*)(float)>(&::log2f)},
      {"erff", (void*)static_cast<float (*)(float)>(&::erff)},  // erf (no LLVM intrinsic)
      {"tanhf", (void*)static_cast<float (*)(float)>(&::tanhf)},  // bf16 tanh, as the interpreter
      {"exp", (void*)static_cast<double (*)(double)>(&::exp)},
      {"log", (void*)static_cast<double (*)(double)>(&::log)},
      {"exp2", (void*)static_cast<double (*)(double)>(&::exp2)},
      {"memcpy", (void*)&::memcpy},
      {"memmove", (void*)&::memmove},
      {"memset", (void*)&::memset},
  };
}

}  // namespace gsl::backend::jit

extern "C" {

const void* gsl_rt_param(void* ctx, int64_t op) {
  CallContext& c = callContext(ctx);
  try {
    const gsl::ir::Op& o = opAt(c, op);
    GSL_ASSERT(c.kctx && c.kctx->param, "jit: param op without a param callback");
    const std::string& name = o.attrs.getString("name");
    const gsl::backend::Tensor& p = c.kctx->param(name);
    GSL_ASSERT(p.type() == o.result->type,
               "param '" + name + "' has type " + p.type().str() + ", expected " + o.result->type.str());
    return p.raw();
  } catch (...) {
    c.error = std::current_exception();
    return nullptr;
  }
}

void gsl_rt_random_uniform(void* ctx, int32_t seedOperand, float* out, int64_t n) {
  const CallContext& c = callContext(ctx);
  const uint64_t key = c.kctx->seed;
  const uint64_t stream = gsl::backend::randomOpStream(seedOperand);
  for (int64_t i = 0; i < n; ++i) out[i] = gsl::backend::uniformAt(key, stream, (uint64_t)i);
}

void gsl_rt_dropout(void* ctx, int64_t op, const float* x, const int32_t* key, float* out) {
  const CallContext& c = callContext(ctx);
  gsl::backend::dropoutInto(opAt(c, op), x, key, out, c.kctx->seed);
}

int32_t gsl_rt_collective(void* ctx, int64_t op, const void* in, void* out) {
  CallContext& c = callContext(ctx);
  try {
    gsl::backend::collectiveInto(opAt(c, op), in, out, *c.kctx);
    return 0;
  } catch (...) {
    c.error = std::current_exception();
    return 1;
  }
}

int32_t gsl_rt_eval_op(void* ctx, int64_t op, const void* const* ins, void* out) {
  CallContext& c = callContext(ctx);
  try {
    const gsl::ir::Op& o = opAt(c, op);
    std::vector<gsl::backend::Tensor> in;
    for (size_t i = 0; i < o.operands.size(); ++i) {
      gsl::backend::Tensor t(o.operands[i]->type);
      if (t.size()) std::memcpy(t.raw(), ins[i], t.bytes());
      in.push_back(std::move(t));
    }
    gsl::backend::Tensor r = gsl::backend::evalOp(o, in, *c.kctx);
    GSL_ASSERT(r.type() == o.result->type, std::string("jit: ") + o.info().mnemonic + " produced " +
                                               r.type().str() + ", expected " + o.result->type.str());
    if (r.size()) std::memcpy(out, r.raw(), r.bytes());
    return 0;
  } catch (...) {
    c.error = std::current_exception();
    return 1;
  }
}

int32_t gsl_rt_take_error(void* ctx, int64_t op, int64_t index, int64_t rows) {
  CallContext& c = callContext(ctx);
  try {
    throw gsl::backend::RuntimeError(opAt(c, op).loc, "take: index " + std::to_string(index) +
                                                          " is out of range for a table of " +
                                                          std::to_string(rows) + " rows");
  } catch (...) {
    c.error = std::current_exception();
  }
  return 1;
}

float gsl_rt_gelu(float x) { return gsl::backend::geluF32(x); }
float gsl_rt_sigmoid(float x) { return gsl::backend::sigmoidF32(x); }

void gsl_rt_sgemm(int64_t M, int64_t N, int64_t K, const float* A, int64_t rsA, int64_t csA,
                  const float* B, int64_t rsB, int64_t csB, float* C, int64_t rsC, int64_t csC) {
  if (M <= 0 || N <= 0) return;
  if (csC != 1 && N != 1) {
    if (rsC == 1 || M == 1) {
      // Column-major C: compute C^T (N x M, row-major) = B^T A^T.
      gsl_rt_sgemm(N, M, K, B, csB, rsB, A, csA, rsA, C, csC, rsC);
      return;
    }
    // No unit stride: compute into a packed buffer, then scatter.
    std::vector<float> tmp((size_t)(M * N));
    gsl_rt_sgemm(M, N, K, A, rsA, csA, B, rsB, csB, tmp.data(), N, 1);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * rsC + j * csC] = tmp[(size_t)(i * N + j)];
    return;
  }
  OutMap Cm(C, M, N, Eigen::OuterStride<>(M == 1 ? N : rsC));
  if (K <= 0) {
    Cm.setZero();
    return;
  }
  thread_local std::vector<float> tmpA, tmpB;
  Operand a = operand(A, M, K, rsA, csA, tmpA), b = operand(B, K, N, rsB, csB, tmpB);
  if (a.rowMajor && b.rowMajor)
    product(Cm, RowMap(a.p, M, K, Eigen::OuterStride<>(a.ld)), RowMap(b.p, K, N, Eigen::OuterStride<>(b.ld)));
  else if (a.rowMajor)
    product(Cm, RowMap(a.p, M, K, Eigen::OuterStride<>(a.ld)), ColMap(b.p, K, N, Eigen::OuterStride<>(b.ld)));
  else if (b.rowMajor)
    product(Cm, ColMap(a.p, M, K, Eigen::OuterStride<>(a.ld)), RowMap(b.p, K, N, Eigen::OuterStride<>(b.ld)));
  else
    product(Cm, ColMap(a.p, M, K, Eigen::OuterStride<>(a.ld)), ColMap(b.p, K, N, Eigen::OuterStride<>(b.ld)));
}

int32_t gsl_rt_pow_i32(int32_t a, int32_t e) {
  if (e < 0) {
    if (a == 1) return 1;
    if (a == -1) return (e & 1) ? -1 : 1;
    return 0;
  }
  uint32_t r = 1, base = (uint32_t)a;
  while (e) {
    if (e & 1) r *= base;
    base *= base;
    e >>= 1;
  }
  return (int32_t)r;
}

}  // extern "C"
