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
//    "gsl: error: rank 2 was killed by signal 9 (Killed); the other ranks were
//    stopped". Its exit status is mpirun's (128 + N when mpirun itself died
//    of signal N).
//  - if this process dies, mpirun gets SIGTERM (PR_SET_PDEATHSIG) and ends
//    the ranks.
// The ranks see GSL_MPI_LAUNCHER=1 in their environment.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gsl::runtime {

// Runs `gslExe args...` on `np` ranks under mpirun (with the flags a
// container needs) and returns the exit status for this process.
int launchUnderMpirun(const std::string& gslExe, const std::vector<std::string>& args, int64_t np);

// True in a rank started by launchUnderMpirun (GSL_MPI_LAUNCHER is set).
bool underGslLauncher();

}  // namespace gsl::runtime
