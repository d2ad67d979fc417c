// How a tensor's elements lie on a mesh: for each tensor dim, the mesh axes
// that split it (major first; empty = not split). Mesh axes not named are
// replicated. `partial` lists axes over which the value is an unreduced
// partial sum (internal only: produced by contracting a split dim).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "ir/Mesh.h"
#include "support/Symbol.h"

namespace gsl::ir {

// The mesh axes that split one tensor dim, major first.
using Axes = std::vector<Symbol>;

// The mesh and axis names are interned (support/Symbol): comparing two
// shardings compares pointers, not text.
struct Sharding {
  Symbol mesh;
  std::vector<Axes> dims;
  Axes partial;

  static Sharding replicated(Symbol mesh, int rank);
  static Sharding replicated(std::string_view mesh, int rank) { return replicated(Symbol(mesh), rank); }
  // From names as written (tests, tools).
  static Sharding fromNames(std::string_view mesh, const std::vector<std::vector<std::string>>& dims,
                            const std::vector<std::string>& partial = {});
  bool isReplicated() const;
  bool operator==(const Sharding& o) const {
    return mesh == o.mesh && dims == o.dims && partial == o.partial;
  }
  bool operator!=(const Sharding& o) const { return !(*this == o); }
  // "@shard(m, [data, _])", "@shard(m, [(data, model), _])", with
  // " partial(model)" appended when partial is non-empty.
  std::string str() const;
};

// Axes from their names as written (the front end, tests), and back.
Axes axesOf(const std::vector<std::string>& names);
std::vector<std::string> namesOf(const Axes& axes);
std::vector<std::vector<std::string>> namesOf(const std::vector<Axes>& dims);

// The one form the partitioner works on (passes/SpmdPartitioner, passes/
// LoopPartition, the partition rules of passes/PartitionRules): every
// replicated form (no sharding, mesh "", or replicated(m) without partial
// axes) as mesh "" with empty dims; any other sharding as it is.
Sharding normalForm(const std::optional<Sharding>& s, int rank);
// The sharding a value of normal form `s` carries in the IR: none for
// mesh "".
std::optional<Sharding> annotationOf(const Sharding& s);

}  // namespace gsl::ir
