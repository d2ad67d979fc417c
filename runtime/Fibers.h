// Ranks outnumbering the cores: thread ranks run as fibers (user-level
// threads with their own stacks) on one OS thread per core.
//
// A thread rank blocks in every collective until its group arrives. With
// more ranks than cores, an OS thread per rank makes every collective cost
// each rank a kernel context switch (a futex wait and wake, or a yield),
// which on a 2-core VM was ~15 us: ~3000 rank-collectives per step of the
// transformer example at -np 64 made its step 44x the -np 2 step. Fibers
// switch in user space (a few registers, no system call): a rank waiting in
// a collective lets the next rank of its OS thread run.
//
// Fiber i runs on OS thread i % workers and never migrates, so thread-local
// scratch (kernels' workspaces) is shared only by fibers that never run at
// the same time; the thread-locals that belong to a rank (its trace recorder,
// its JIT compile-time counter, the C++ exception being handled) are saved
// and restored at each switch.
//
// Available on x86-64 Linux without sanitizers (available() says); elsewhere
// runRanks keeps one OS thread per rank.
#pragma once
#include <functional>

namespace gsl::runtime::fibers {

// Whether fibers are built in.
bool available();

// The cores this process may run on (its CPU affinity), at least 1.
int cores();

// The OS threads that run `n` thread ranks (runtime/ThreadComm.h,
// runRanks): one per core when the ranks outnumber the cores and fibers
// are built in, else one per rank.
int workersFor(int n);

// Runs body(i) for i in [0, n) as n fibers on `workers` OS threads and
// returns when all ended. `body` must not throw (an exception escaping it
// terminates). Throws std::system_error when a thread or a stack cannot be
// made (before any fiber ran).
void run(int n, int workers, const std::function<void(int)>& body);

// Inside a fiber: lets the other fibers of this OS thread run and returns
// later. `idle`: the caller is waiting for another fiber (when every fiber
// of an OS thread is idle it parks until progress() is called). Returns
// false, doing nothing, outside a fiber.
bool yield(bool idle);

// Something a waiting fiber may wait for happened (wakes parked threads).
void progress();

}  // namespace gsl::runtime::fibers
