#include "runtime/Fibers.h"

#include <sched.h>
#include <sys/mman.h>

#include <cxxabi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "backend/jit/JitEngine.h"  // jitThreadReadyNanos
#include "support/Trace.h"

#if defined(__x86_64__) && defined(__linux__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define GSL_FIBERS 1
#else
#define GSL_FIBERS 0
#endif

namespace gsl::runtime::fibers {

int cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return (int)std::max(1u, std::thread::hardware_concurrency());
}

int workersFor(int n) {
  const int c = cores();
  return n > c && available() ? c : n;
}

namespace {

// Bumped by progress(); a thread whose fibers all wait parks until it changes.
std::atomic<uint32_t> epoch{0};
std::atomic<int> parked{0};
std::mutex parkMu;
std::condition_variable parkCv;

}  // namespace

void progress() {
  epoch.fetch_add(1);
  if (parked.load() == 0) return;
  std::lock_guard<std::mutex> lock(parkMu);
  parkCv.notify_all();
}

#if GSL_FIBERS

// Switches stacks: saves the callee-saved registers, MXCSR and the x87
// control word on the current stack, stores its pointer in *save, and
// resumes the stack `to` (saved the same way, or made by Fiber::Fiber).
extern "C" void gsl_fiber_switch(void** save, void* to);
asm(R"(
  .text
  .globl gsl_fiber_switch
  .type gsl_fiber_switch, @function
gsl_fiber_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size gsl_fiber_switch, .-gsl_fiber_switch
)");

bool available() { return true; }

namespace {

// libstdc++'s per-thread exception state (cxxabi's opaque __cxa_eh_globals):
// the exceptions being handled belong to the fiber handling them.
struct EhGlobals {
  void* caughtExceptions;
  unsigned int uncaughtExceptions;
};
EhGlobals* ehGlobals() { return reinterpret_cast<EhGlobals*>(abi::__cxa_get_globals()); }

constexpr size_t kStack = 8 << 20;  // as a thread's default stack (ulimit -s)
constexpr size_t kGuard = 64 << 10;

struct Worker;

struct Fiber {
  Fiber(Worker* w, int i) : worker(w), index(i) {
    void* p = mmap(nullptr, kStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK,
                   -1, 0);
    if (p == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "fiber stack");
    base = static_cast<char*>(p);
    mprotect(base, kGuard, PROT_NONE);  // a stack overflow faults instead of writing the next stack
    auto* top = reinterpret_cast<uint64_t*>(base + kStack);
    uint32_t mxcsr;
    uint16_t fpcw;
    asm volatile("stmxcsr %0" : "=m"(mxcsr));
    asm volatile("fnstcw %0" : "=m"(fpcw));
    top[-1] = 0;                                         // entry's return address: none
    top[-2] = reinterpret_cast<uint64_t>(&Fiber::entry);  // gsl_fiber_switch returns here
    for (int k = 3; k <= 8; ++k) top[-k] = 0;            // rbp, rbx, r12..r15
    top[-9] = (uint64_t)mxcsr | ((uint64_t)fpcw << 32);
    sp = &top[-9];
  }
  ~Fiber() { munmap(base, kStack); }
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  [[noreturn]] static void entry();

  Worker* worker;
  int index;
  char* base = nullptr;
  void* sp = nullptr;
  bool done = false;
  // The rank's thread-locals while it is switched out.
  trace::Recorder* trace = nullptr;
  uint64_t readyNanos = 0;
  EhGlobals eh{nullptr, 0};
  backend::JitWorkspace workspace;  // freed with the fiber
};

// Exchanges the thread's JIT workspace with a fiber's.
void swapWorkspace(backend::JitWorkspace& w) {
  backend::JitWorkspace& t = backend::jitThreadWorkspace();
  std::swap(t.p, w.p);
  std::swap(t.size, w.size);
}

// How long a thread whose fibers all wait spins (yielding the core) before
// it parks. Waits for the other threads' ranks are mostly shorter than a
// millisecond; parking and waking cost two futex calls and a wake-up's
// latency each time (at 50 us, ~100 parks a step of the transformer
// example at -np 64). Fibers run only with ranks outnumbering the cores,
// one worker thread per core, so the spin rarely takes a core another
// thread of this process could use.
constexpr auto kIdleSpin = std::chrono::microseconds(1000);

struct Worker {
  const std::function<void(int)>* body = nullptr;
  std::vector<std::unique_ptr<Fiber>> fibers;
  Fiber* cur = nullptr;
  void* sp = nullptr;  // the scheduler's stack while a fiber runs
  bool idle = false;   // the running fiber yielded waiting for another

  void runFiber(Fiber& f) {
    trace::current = f.trace;
    backend::jitThreadReadyNanos() = f.readyNanos;
    *ehGlobals() = f.eh;
    swapWorkspace(f.workspace);
    cur = &f;
    idle = false;
    gsl_fiber_switch(&sp, f.sp);
    cur = nullptr;
    f.trace = trace::current;
    f.readyNanos = backend::jitThreadReadyNanos();
    f.eh = *ehGlobals();
    swapWorkspace(f.workspace);
    trace::current = nullptr;
    *ehGlobals() = EhGlobals{nullptr, 0};
  }

  // Round-robin until every fiber ended. A round in which every fiber only
  // waited spins (yielding the core) for up to kIdleSpin, then parks.
  void loop() {
    size_t live = fibers.size();
    auto idleSince = std::chrono::steady_clock::time_point::min();
    while (live) {
      const uint32_t seen = epoch.load();
      bool allIdle = true;
      for (auto& f : fibers) {
        if (f->done) continue;
        runFiber(*f);
        if (f->done) {
          --live;
          allIdle = false;
        } else if (!idle) {
          allIdle = false;
        }
      }
      if (!allIdle || !live) {
        idleSince = std::chrono::steady_clock::time_point::min();
        continue;
      }
      const auto now = std::chrono::steady_clock::now();
      if (idleSince == std::chrono::steady_clock::time_point::min()) idleSince = now;
      if (now - idleSince < kIdleSpin) {
        std::this_thread::yield();
        continue;
      }
      std::unique_lock<std::mutex> lock(parkMu);
      parked.fetch_add(1);
      // A safety net re-checks every 20 ms (progress() notifies).
      parkCv.wait_for(lock, std::chrono::milliseconds(20), [&] { return epoch.load() != seen; });
      parked.fetch_sub(1);
    }
  }
};

thread_local Worker* tlWorker = nullptr;

void Fiber::entry() {
  Worker* w = tlWorker;
  Fiber* f = w->cur;
  (*w->body)(f->index);  // noexcept by contract: an escaping exception terminates (entry has no caller)
  f->done = true;
  gsl_fiber_switch(&f->sp, w->sp);
  __builtin_unreachable();
}

}  // namespace

bool yield(bool idle) {
  Worker* w = tlWorker;
  if (!w || !w->cur) return false;
  Fiber* f = w->cur;
  w->idle = idle;
  gsl_fiber_switch(&f->sp, w->sp);
  return true;
}

void run(int n, int workers, const std::function<void(int)>& body) {
  workers = std::max(1, std::min(workers, n));
  std::vector<Worker> ws(workers);
  for (int i = 0; i < n; ++i) {
    Worker& w = ws[i % workers];
    w.body = &body;
    w.fibers.push_back(std::make_unique<Fiber>(&w, i));
  }
  auto work = [](Worker* w) {
    tlWorker = w;
    w->loop();
    tlWorker = nullptr;
  };
  std::vector<std::thread> threads;
  threads.reserve(workers - 1);
  std::exception_ptr startError;
  for (int t = 1; t < workers; ++t) {
    try {
      threads.emplace_back(work, &ws[t]);
    } catch (...) {
      // Fewer threads: the remaining workers' fibers join this thread's.
      for (int u = t; u < workers; ++u)
        for (auto& f : ws[u].fibers) {
          f->worker = &ws[0];
          ws[0].fibers.push_back(std::move(f));
        }
      break;
    }
  }
  work(&ws[0]);
  for (auto& t : threads) t.join();
}

#else  // no fibers: runRanks uses one OS thread per rank

bool available() { return false; }
bool yield(bool) { return false; }
void run(int n, int, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) threads.emplace_back(body, i);
  for (auto& t : threads) t.join();
}

#endif

}  // namespace gsl::runtime::fibers
