// `gsl run --mpi`: starts the ranks under mpirun and watches over them.
//
// The gsl process that the user started stays alive as mpirun's parent:
//  - mpirun runs in its own process group with stdin from /dev/null, so a
//    Ctrl-C on the terminal reaches only this process; the first SIGINT
//    (or SIGTERM) is forwarded to the ranks as SIGUSR1 (mpirun forwards
//    SIGUSR1 to every rank), on which every rank stops at its next safe
//    point (runtime/Host.h); rank 0 prints "gsl: interrupted" and the ranks
//    exit 0. This process then exits 130. A second SIGINT is forwarded
//    too: each rank removes its temp files and exits at once. A third
//    kills mpirun's process group.
//  - mpirun's stderr passes through this process: its line "mpirun:
//    Forwarding signal 10 to job" is dropped, and when mpirun reports a
//    rank that died of a signal ("mpirun noticed that process rank 2 ...
//    exited on signal 9 (Killed)"), this process adds one line of its own:
//    "gsl: error: rank 2 on host node2 was killed by signal 9 (Killed); the
//    other ranks were stopped". Its exit status is mpirun's (128 + N when mpirun itself died
//    of signal N).
//  - if this process dies, mpirun gets SIGTERM (PR_SET_PDEATHSIG) and ends
//    the ranks.
// The ranks see GSL_MPI_LAUNCHER=1 in their environment, on every host
// (mpirun -x; so do the launcher's other GSL_* variables).
//
// Hosts (docs/cluster.md): with no --hostfile and no --host every rank runs
// on this machine and the transport is shared memory (btl self,vader, which
// needs no network interface: works offline and in containers). With
// --hostfile or --host the transport is left to OpenMPI (shared memory
// between ranks of one host, TCP or the cluster's fabric between hosts).
// Options after --mpirun-args go to mpirun as given, after gsl's own; one
// that sets the btl replaces gsl's shared-memory default.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gsl::runtime {

struct MpiLaunchOptions {
  int64_t np = 1;
  std::string hostfile;                // mpirun --hostfile
  std::string hosts;                   // mpirun --host, "a:4,b:4"
  std::vector<std::string> mpirunArgs;  // passed through (splitMpirunArgs)
};

// The mpirun command line (argv[0] "mpirun") that runs `gslExe args...`.
std::vector<std::string> mpirunCommand(const std::string& gslExe, const std::vector<std::string>& args,
                                       const MpiLaunchOptions& o, const std::vector<std::string>& environment);

// Runs `gslExe args...` under mpirun (mpirunCommand) and returns the exit
// status for this process.
int launchUnderMpirun(const std::string& gslExe, const std::vector<std::string>& args, const MpiLaunchOptions& o);

// The total slot count of a --host list "a:4,b:4" (a host without :N has
// one slot, as mpirun counts it); nullopt when malformed.
std::optional<int64_t> hostListSlots(const std::string& hosts);

// --mpirun-args "..." split into words as a shell would for plain words:
// white space separates, '...' and "..." quote (no expansions, no escapes
// inside '...'; \ escapes the next character elsewhere). nullopt on an
// unterminated quote.
std::optional<std::vector<std::string>> splitMpirunArgs(const std::string& text);

// True in a rank started by launchUnderMpirun (GSL_MPI_LAUNCHER is set).
bool underGslLauncher();

}  // namespace gsl::runtime
