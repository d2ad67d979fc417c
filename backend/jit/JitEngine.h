// The LLVM JIT engine (`--engine jit`): runs IR functions as native code.
//
// Each ir::Function is lowered to one LLVM module (backend/jit/Codegen): an
// entry function that calls one function per kernel, identical kernels
// emitted once. It is optimised at O3 for the host CPU, emitted as an
// object file and added to one process-wide ORC LLJIT. Compiled code is cached process-wide, keyed
// by the options (JitOptions.h, passed in by the caller; the compiler reads
// no environment variables) and a hash of the function's printed IR: the
// rank, the params and the seed are run-time arguments, so the 64 rank
// threads of an SPMD run share one compiled program. The cache is
// thread-safe and compiles each distinct function exactly once per
// options; different functions compile at once on different threads (each
// compile owns its LLVM context and target machine; only linking into the
// LLJIT is serialised). An engine computes that key once per function it is called with
// and then remembers the function by address, so a function must not
// change while an engine that has called it lives.
//
// Behind it, when configured (ObjectCache.h, docs/compile-cache.md), the
// object files persist on disk, keyed by the unoptimised LLVM IR, the
// target, the options and the versions: a later run, or another rank
// process, loads them instead of compiling.
//
// Numerics match the reference interpreter (backend/Kernels.cpp), which is
// the oracle the JIT is tested against; see OpLowering.cpp for what is
// generated inline and what calls a runtime helper (Runtime.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/Engine.h"
#include "backend/Kernels.h"
#include "backend/jit/JitOptions.h"

namespace gsl::backend {

// An engine that runs code compiled with `opts` with `ctx` (params, seed,
// rank, communicator, meshes); both are copied. Every function it is called
// with must outlive it: it remembers compiled code by the function's address,
// so a function freed and another built at that address would run the first
// one's code.
std::unique_ptr<Engine> makeJitEngine(const KernelContext& ctx, const JitOptions& opts = {});

// Number of functions compiled so far by this process (misses of both
// caches: compiled by LLVM).
uint64_t jitCompileCount();

// What the persistent cache did for this process: modules loaded from it,
// compiled by LLVM (= jitCompileCount), and of those, how many replaced an
// invalid (corrupt, truncated or foreign) entry.
struct JitCacheStats {
  uint64_t loaded = 0, compiled = 0, rebuilt = 0;
};
JitCacheStats jitCacheStats();

// Wall seconds this process spent getting functions ready to run (lowering,
// compiling or loading), summed over compiles.
double jitCompileSeconds();

// Wall seconds the calling thread has spent getting functions ready to run
// (compiling them, or waiting for another thread's compile of them). The
// run's throughput leaves this out of a rank's time.
double jitThreadReadySeconds();
// Its counter, in nanoseconds (runtime/Fibers.cpp keeps one per rank fiber).
uint64_t& jitThreadReadyNanos();
// The calling thread's workspace of the compiled functions: their
// intermediates live there for a call, collectives included (so a rank
// fiber, runtime/Fibers.h, swaps its own in).
struct JitWorkspace {
  char* p = nullptr;
  size_t size = 0;
  JitWorkspace() = default;
  JitWorkspace(const JitWorkspace&) = delete;
  JitWorkspace& operator=(const JitWorkspace&) = delete;
  ~JitWorkspace();
};
JitWorkspace& jitThreadWorkspace();

// Told when a function starts compiling (done false) and when it is ready
// (done true, with the seconds it took and whether its object came from
// the persistent cache). Called on the compiling thread; set it before any
// engine runs.
struct JitCompileEvent {
  std::string function;
  size_t ops = 0;
  bool done = false, loaded = false;
  double seconds = 0;
};
using JitCompileObserver = std::function<void(const JitCompileEvent&)>;
void setJitCompileObserver(JitCompileObserver o);

// Compiles `f` now, if it is not cached yet (`gsl compile --time-passes`).
void jitCompile(const ir::Function& f, const JitOptions& opts = {});

// Compiles `f` now on the calling thread, unless it is compiled or being
// compiled already (then returns at once); a compile error is kept for the
// caller that runs `f`. Run by `gsl run`'s compile-ahead thread: the
// functions a rank will call next compile while it compiles or runs the
// current one (docs/compile-cache.md).
void jitCompileAhead(const ir::Function& f, const JitOptions& opts = {});

// With `on`, every function linked from then on (entry functions and
// their kernels) is appended as "address size name" to /tmp/perf-PID.map,
// so that `perf record` / `perf report` name the JIT's code (`gsl run
// --perf-map`, docs/trace.md). A kernel is named after its source op,
// "FILE:LINE.OP.kN@FUNCTION", FILE from `sourceFiles` (by SourceLoc::file).
void jitWritePerfMap(bool on, std::vector<std::string> sourceFiles = {});

// Peak bytes of the workspace that holds `f`'s intermediate values, after
// liveness-based buffer reuse (compiles `f` if it is not cached yet).
size_t jitPeakBytes(const ir::Function& f, const JitOptions& opts = {});

// The same figure from the buffer planner alone, without compiling `f`
// (cheap: used to check a run's memory before it starts).
size_t jitPlannedPeakBytes(const ir::Function& f, const JitOptions& opts = {});

// Per result of `f`, the input whose buffer it is written into when the
// caller donates that input (Donation; invalid: none), from the buffer
// planner alone (for the memory estimate).
std::vector<DonorInput> jitPlannedDonors(const ir::Function& f, const JitOptions& opts = {});

// The LLVM IR of `f` (`gsl compile --emit llvm`): after the O3 pipeline, or
// as generated when `optimized` is false. Does not touch the cache.
std::string jitEmitLLVM(const ir::Function& f, bool optimized = true, const JitOptions& opts = {});

}  // namespace gsl::backend
