#include "runtime/TestFaults.h"

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace gsl::runtime {

const TestFaults& testFaults() {
  static const TestFaults f = [] {
    TestFaults t;
    const char* env = std::getenv("GSL_TEST_FAULT");
    if (!env) return t;
    std::istringstream ss(env);
    for (std::string item; std::getline(ss, item, ',');) {
      auto eq = item.find('=');
      if (eq == std::string::npos) continue;
      std::string k = item.substr(0, eq);
      int v = std::atoi(item.c_str() + eq + 1);
      if (k == "mismatch_rank") t.mismatchRank = v;
      else if (k == "checkpoint_pause_ms") t.checkpointPauseMs = v;
    }
    return t;
  }();
  return f;
}

namespace {

// Forwards to the real communicator; its first all_reduce is sent as an
// all_gather instead (TEST-ONLY: mismatch_rank).
class MismatchComm : public backend::Communicator {
 public:
  explicit MismatchComm(backend::Communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  void allGather(const std::vector<int>& group, const void* send, size_t bytes, void* recv) override {
    inner_.allGather(group, send, bytes, recv);
    stats = inner_.stats;
  }
  void allReduce(const std::vector<int>& group, void* data, size_t count, ir::DType dt,
                 backend::ReduceOp op) override {
    if (!fired_) {
      fired_ = true;
      std::vector<char> scratch(count * 4 * group.size());
      inner_.allGather(group, data, count * 4, scratch.data());
    } else {
      inner_.allReduce(group, data, count, dt, op);
    }
    stats = inner_.stats;
  }
  void reduceScatter(const std::vector<int>& group, const void* send, size_t count, ir::DType dt,
                     void* recv) override {
    inner_.reduceScatter(group, send, count, dt, recv);
    stats = inner_.stats;
  }
  void allToAll(const std::vector<int>& group, const void* send, size_t bytes, void* recv) override {
    inner_.allToAll(group, send, bytes, recv);
    stats = inner_.stats;
  }
  void permute(const std::vector<int>& group, const std::vector<int64_t>& perm, const void* send, size_t bytes,
               void* recv) override {
    inner_.permute(group, perm, send, bytes, recv);
    stats = inner_.stats;
  }
  void barrier() override { inner_.barrier(); }
  void abort(const std::string& why) override { inner_.abort(why); }

 private:
  backend::Communicator& inner_;
  bool fired_ = false;
};

}  // namespace

std::unique_ptr<backend::Communicator> faultInjectingComm(backend::Communicator& inner, int rank) {
  if (testFaults().mismatchRank == rank) return std::make_unique<MismatchComm>(inner);
  return nullptr;
}

}  // namespace gsl::runtime
