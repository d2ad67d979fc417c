// A named logical device mesh: named axes with sizes; ranks are laid out
// row-major over the axes (the last axis varies fastest).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gsl::ir {

struct MeshAxis {
  std::string name;
  int64_t size = 1;
};

struct Mesh {
  std::string name;
  std::vector<MeshAxis> axes;

  int64_t numDevices() const;
  int axisIndex(const std::string& axis) const;  // -1 if absent
  int64_t axisSize(const std::string& axis) const;
  // Coordinates of `rank` along each axis (row-major).
  std::vector<int64_t> coords(int64_t rank) const;
  // "mesh @m = [data: 2, model: 2]"
  std::string str() const;
};

// The world ranks of the group of `rank` over mesh axes `axes` (mesh axis
// indices, major first), in member order, and rank's index in it: the
// ranks whose coordinates differ from rank's only along `axes`, stepping
// through those coordinates like an odometer, the last listed axis fastest.
std::vector<int> collectiveGroup(const Mesh& m, const std::vector<int64_t>& axes, int rank, int* index);

// The groups of a collective over mesh axes `axes` of `m`, for every rank:
// resolved once, when the per-rank program is built
// (passes/ResolveGroups), and read by each call of the collective.
struct CollectiveGroups {
  std::vector<std::vector<int>> groups;  // every group, in member order
  std::vector<int> groupOf, indexOf;     // per world rank: its group, its index in it
  CollectiveGroups(const Mesh& m, const std::vector<int64_t>& axes);
};

}  // namespace gsl::ir
