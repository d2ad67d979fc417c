// The LLVM JIT engine (`--engine jit`): runs IR functions as native code.
//
// Each ir::Function is lowered to one LLVM function (backend/jit/Codegen),
// optimised at O3 for the host CPU and added to one process-wide ORC LLJIT.
// Compiled code is cached process-wide, keyed by the options (JitOptions.h,
// passed in by the caller; the compiler reads no environment variables)
// and the function's printed IR text: the rank, the params and the seed are
// run-time arguments, so the 64 rank threads of an SPMD run share one
// compiled program. The cache is thread-safe and compiles each distinct
// function exactly once per options.
//
// Numerics match the reference interpreter (backend/Kernels.cpp), which is
// the oracle the JIT is tested against; see OpLowering.cpp for what is
// generated inline and what calls a runtime helper (Runtime.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "backend/Engine.h"
#include "backend/Kernels.h"
#include "backend/jit/JitOptions.h"

namespace gsl::backend {

// An engine that runs code compiled with `opts` with `ctx` (params, seed,
// rank, communicator, meshes); both are copied.
std::unique_ptr<Engine> makeJitEngine(const KernelContext& ctx, const JitOptions& opts = {});

// Number of functions compiled so far by this process (cache misses).
uint64_t jitCompileCount();

// Peak bytes of the workspace that holds `f`'s intermediate values, after
// liveness-based buffer reuse (compiles `f` if it is not cached yet).
size_t jitPeakBytes(const ir::Function& f, const JitOptions& opts = {});

// The same figure from the buffer planner alone, without compiling `f`
// (cheap: used to check a run's memory before it starts).
size_t jitPlannedPeakBytes(const ir::Function& f, const JitOptions& opts = {});

// The LLVM IR of `f` (`gsl compile --emit llvm`): after the O3 pipeline, or
// as generated when `optimized` is false. Does not touch the cache.
std::string jitEmitLLVM(const ir::Function& f, bool optimized = true, const JitOptions& opts = {});

}  // namespace gsl::backend
