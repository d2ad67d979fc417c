// The run-time support of JIT-compiled GSL functions: the per-call context
// that generated code passes around, and the extern "C" helpers it calls
// for what is not generated inline (params, random numbers, collectives,
// error reports, large matrix products).
//
// Generated code never sees C++ objects: it hands the opaque context pointer
// back to these helpers. Helpers never throw into JIT frames: a failure is
// stored in the context and reported as a nonzero status, on which the
// generated code returns at once and the engine rethrows.
#pragma once
#include <cstdint>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "backend/Kernels.h"
#include "ir/Function.h"

namespace gsl::backend::jit {

// One call of a compiled function. `fn` is the function being called (its
// text equals the compiled one, so op indices agree); helpers look ops up
// in it (collectives, source locations of errors).
struct CallContext {
  const KernelContext* kctx = nullptr;
  const ir::Function* fn = nullptr;
  // The function the host called (`fn` itself, or the function whose loop
  // runs `fn` as its body): names the calls in the op timer's table
  // (KernelProfile.h).
  const ir::Function* root = nullptr;
  std::exception_ptr error;  // set by a helper that returned a nonzero status
};

// Signature of a compiled function: inputs[i] is argument i's buffer,
// outputs[j] result j's buffer (null for results the engine fills itself:
// arguments and repeated values), `workspace` holds the intermediate values
// (peak bytes known at compile time). Returns 0, or nonzero after a helper
// stored an error in the context.
using CompiledFn = int32_t (*)(void* const* inputs, void* const* outputs, char* workspace, void* ctx);

// Name and address of every helper, for registration in the JITDylib.
std::vector<std::pair<std::string, void*>> runtimeSymbols();

}  // namespace gsl::backend::jit

extern "C" {
// param op number `op` of the called function: checks the param's type and
// returns a pointer to its current value (read-only), or null on error.
const void* gsl_rt_param(void* ctx, int64_t op);
// random_uniform: out[i] = uniformAt(seed, randomOpStream(seedOperand), i), i < n.
void gsl_rt_random_uniform(void* ctx, int32_t seedOperand, float* out, int64_t n);
// dropout op number `op` with a key (backend/Kernels.h's dropoutInto).
void gsl_rt_dropout(void* ctx, int64_t op, const float* x, const int32_t* key, float* out);
// Collective op number `op` on this rank: in -> out (buffers of its operand
// and result types). Returns 0 or 1 (error stored).
int32_t gsl_rt_collective(void* ctx, int64_t op, const void* in, void* out);
// Any op the code generator does not handle (ops added to the op table
// later): backend::evalOp on the operand buffers `ins` into `out`.
// Returns 0 or 1 (error stored).
int32_t gsl_rt_eval_op(void* ctx, int64_t op, const void* const* ins, void* out);
// Reports take's out-of-range index (always returns 1).
int32_t gsl_rt_take_error(void* ctx, int64_t op, int64_t index, int64_t rows);
// C[i*rsC + j*csC] = sum_k A[i*rsA + k*csA] * B[k*rsB + j*csB] for an M x N
// result (C is overwritten), with Eigen's blocked GEMM.
void gsl_rt_sgemm(int64_t M, int64_t N, int64_t K, const float* A, int64_t rsA, int64_t csA,
                  const float* B, int64_t rsB, int64_t csB, float* C, int64_t rsC, int64_t csC);
// Wrapping integer power (the interpreter's powI32).
int32_t gsl_rt_pow_i32(int32_t a, int32_t e);
// The reference kernel's GELU of one f32 (backend::geluF32), for bf16 gelu.
float gsl_rt_gelu(float x);
// The reference kernel's sigmoid of one f32 (backend::sigmoidF32), for bf16 sigmoid.
float gsl_rt_sigmoid(float x);
}
