#include "backend/Communicator.h"

#include <algorithm>

#include "support/Diagnostics.h"

namespace gsl::backend {

uint64_t CollectiveCall::inputBytes() const {
  const uint64_t n = group->size(), elem = (uint64_t)ir::dtypeBytes(dtype);
  switch (kind) {
    case ir::OpKind::AllGather: return bytes;
    case ir::OpKind::AllReduce: return count * elem;
    case ir::OpKind::ReduceScatter: return count * elem * n;
    case ir::OpKind::AllToAll: return bytes * n;
    case ir::OpKind::CollectivePermute: return bytes;
    default: break;
  }
  GSL_ASSERT(false, std::string("internal error: ") + ir::opName(kind) + " is not a collective of the communicator");
  return 0;
}

void Communicator::run(const CollectiveCall& c) {
  const std::vector<int>& g = *c.group;
  switch (c.kind) {
    case ir::OpKind::AllGather: return runAllGather(g, c.send, c.bytes, c.recv);
    case ir::OpKind::AllReduce: return runAllReduce(g, c.recv, c.count, c.dtype, c.op);
    case ir::OpKind::ReduceScatter: return runReduceScatter(g, c.send, c.count, c.dtype, c.recv);
    case ir::OpKind::AllToAll: return runAllToAll(g, c.send, c.bytes, c.recv);
    case ir::OpKind::CollectivePermute: return runPermute(g, *c.perm, c.send, c.bytes, c.recv);
    default: break;
  }
  GSL_ASSERT(false, std::string("internal error: no transport for ") + ir::opName(c.kind));
}

namespace {
[[noreturn]] void noTransport(ir::OpKind k) {
  internalError(__FILE__, __LINE__, std::string("internal error: this communicator has no transport for ") + ir::opName(k));
}
}  // namespace

void Communicator::runAllGather(const std::vector<int>&, const void*, size_t, void*) { noTransport(ir::OpKind::AllGather); }
void Communicator::runAllReduce(const std::vector<int>&, void*, size_t, ir::DType, ReduceOp) {
  noTransport(ir::OpKind::AllReduce);
}
void Communicator::runReduceScatter(const std::vector<int>&, const void*, size_t, ir::DType, void*) {
  noTransport(ir::OpKind::ReduceScatter);
}
void Communicator::runAllToAll(const std::vector<int>&, const void*, size_t, void*) { noTransport(ir::OpKind::AllToAll); }
void Communicator::runPermute(const std::vector<int>&, const std::vector<int64_t>&, const void*, size_t, void*) {
  noTransport(ir::OpKind::CollectivePermute);
}

void Communicator::collective(const CollectiveCall& c) {
  run(c);
  uint64_t sent = ir::opInfo(c.kind).volume(c.group->size(), c.inputBytes());
  if (c.kind == ir::OpKind::CollectivePermute) {
    // Nothing when this member receives its own block (a static count cannot
    // know which member that is, so the cost model counts the buffer).
    auto me = std::find(c.group->begin(), c.group->end(), rank()) - c.group->begin();
    if ((*c.perm)[me] == me) sent = 0;
  }
  stats.add(c.kind, sent);
}

}  // namespace gsl::backend
