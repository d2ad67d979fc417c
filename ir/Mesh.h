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

}  // namespace gsl::ir
