// What the ranks of one run share (runtime/Host.cpp runMain makes one per
// run): the per-rank programs, the params' global initial values until
// every rank took its block, and the checkpoint given with --resume. Also
// how a rank reports a user error: a RankError at its source location,
// which runMain turns into a diagnostic.
#pragma once
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>

#include "backend/Tensor.h"
#include "frontend/Frontend.h"
#include "runtime/HostWalk.h"
#include "support/SourceLoc.h"

namespace gsl::runtime {

// A user error on one rank, with its source location.
struct RankError : std::runtime_error {
  SourceLoc loc;
  RankError(SourceLoc l, const std::string& m) : std::runtime_error(m), loc(l) {}
};

// A file this rank could not read: under MPI (`mpi`) the ranks may run on
// several hosts, each reading its own file system, so the message names
// the host. Throws RankError.
[[noreturn]] void failReading(SourceLoc l, const std::string& m, bool mpi);

// What all ranks share: the per-rank programs (built once per distinct
// input sharding of a thunk) and the params' global initial values (until
// every rank took its blocks).
class SpmdProgram {
 public:
  SpmdProgram(const frontend::CheckedProgram& p, uint64_t seed) : prog_(p), seed_(seed), programs_(*p.module) {}
  const ir::Module& module() const { return *prog_.module; }
  PerRankPrograms& programs() { return programs_; }

  // The checkpoint given with --resume, read once.
  const std::map<std::string, backend::Tensor>& resumed(const std::string& path,
                                                        std::map<std::string, std::string>& meta);

  // Ranks of this process that take their params' blocks (localParam):
  // the threads, or one MPI rank.
  void setRanksHere(int n) { ranksHere_ = n; }

  // Rank `rank`'s block of param `p`, initialised globally once. The whole
  // tensor is dropped when every rank of this process took its block, and
  // once all are, the buffers kept for reuse are given back (no later
  // tensor has those sizes), so that the process holds each param once.
  backend::Tensor localParam(const ir::Param& p, int rank);

 private:
  const frontend::CheckedProgram& prog_;
  uint64_t seed_;
  PerRankPrograms programs_;
  std::mutex mu_;
  std::map<std::string, backend::Tensor> params_;
  std::map<std::string, int> taken_;  // ranks that took a param's block
  int ranksHere_ = 0;
  size_t released_ = 0;  // params dropped
  bool resumeRead_ = false;
  std::map<std::string, backend::Tensor> resumeTensors_;
  std::map<std::string, std::string> resumeMeta_;
};

}  // namespace gsl::runtime
