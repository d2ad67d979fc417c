// What the ranks of one run share: the params' initial blocks and the
// --resume checkpoint, each made once for all ranks of the process.
#include "runtime/SpmdProgram.h"

#include "backend/Random.h"
#include "runtime/Checkpoint.h"
#include "runtime/Distribute.h"
#include "runtime/MpiComm.h"

namespace gsl::runtime {

using backend::Tensor;

void failReading(SourceLoc l, const std::string& m, bool mpi) {
  throw RankError(l, mpi ? m + " on host " + MpiSession::hostName() : m);
}

const std::map<std::string, Tensor>& SpmdProgram::resumed(const std::string& path,
                                                          std::map<std::string, std::string>& meta) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!resumeRead_) {
    resumeRead_ = true;
    for (auto& nt : readSafetensors(path, &resumeMeta_)) resumeTensors_[nt.name] = nt.value;
  }
  meta = resumeMeta_;
  return resumeTensors_;
}

Tensor SpmdProgram::localParam(const ir::Param& p, int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = params_.find(p.name);
  if (it == params_.end()) it = params_.emplace(p.name, backend::initParam(p, seed_)).first;
  Tensor local = localBlock(module(), it->second, p.sharding, rank);
  if (++taken_[p.name] == ranksHere_) {
    params_.erase(it);
    if (++released_ == module().params.size()) backend::releaseTensorPool();
  }
  return local;
}

}  // namespace gsl::runtime
