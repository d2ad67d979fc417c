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

void Communicator::collective(const CollectiveCall& c) {
  run(c);
  uint64_t sent = ir::opInfo(c.kind).volume(c.group->size(), c.inputBytes());
  if (c.kind == ir::OpKind::CollectivePermute) {
    // Nothing when this member receives its own block (a static count cannot
    // know which member that is, so the cost model counts the buffer).
    auto me = std::find(c.group->begin(), c.group->end(), rank()) - c.group->begin();
    if ((*c.perm)[me] == me) sent = 0;
  }
  stats.add(ir::opName(c.kind), sent);
}

}  // namespace gsl::backend
