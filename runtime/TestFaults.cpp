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
  void barrier() override { inner_.barrier(); }
  void abort(const std::string& why) override { inner_.abort(why); }

 protected:
  void run(const backend::CollectiveCall& c) override {
    if (c.kind == ir::OpKind::AllReduce && !fired_) {
      fired_ = true;
      std::vector<char> scratch(c.count * 4 * c.group->size());
      inner_.allGather(*c.group, c.send, c.count * 4, scratch.data());
      return;
    }
    inner_.collective(c);
  }

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
