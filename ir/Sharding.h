// How a tensor's elements lie on a mesh: for each tensor dim, the mesh axes
// that split it (major first; empty = not split). Mesh axes not named are
// replicated. `partial` lists axes over which the value is an unreduced
// partial sum (internal only: produced by contracting a split dim).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "ir/Mesh.h"

namespace gsl::ir {

struct Sharding {
  std::string mesh;
  std::vector<std::vector<std::string>> dims;
  std::vector<std::string> partial;

  static Sharding replicated(const std::string& mesh, int rank);
  bool isReplicated() const;
  bool operator==(const Sharding& o) const {
    return mesh == o.mesh && dims == o.dims && partial == o.partial;
  }
  bool operator!=(const Sharding& o) const { return !(*this == o); }
  // "@shard(m, [data, _])", "@shard(m, [(data, model), _])", with
  // " partial(model)" appended when partial is non-empty.
  std::string str() const;
};

// The one form the partitioner works on (passes/SpmdPartitioner, passes/
// LoopPartition, the partition rules of passes/PartitionRules): every
// replicated form (no sharding, mesh "", or replicated(m) without partial
// axes) as mesh "" with empty dims; any other sharding as it is.
Sharding normalForm(const std::optional<Sharding>& s, int rank);
// The sharding a value of normal form `s` carries in the IR: none for
// mesh "".
std::optional<Sharding> annotationOf(const Sharding& s);

}  // namespace gsl::ir
