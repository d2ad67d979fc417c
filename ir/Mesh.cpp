#include "ir/Mesh.h"

namespace gsl::ir {

int64_t Mesh::numDevices() const {
  int64_t n = 1;
  for (const auto& a : axes) n *= a.size;
  return n;
}

int Mesh::axisIndex(const std::string& axis) const {
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i].name == axis) return (int)i;
  return -1;
}

int64_t Mesh::axisSize(const std::string& axis) const {
  int i = axisIndex(axis);
  return i < 0 ? 1 : axes[i].size;
}

std::vector<int64_t> Mesh::coords(int64_t rank) const {
  std::vector<int64_t> c(axes.size());
  for (int i = (int)axes.size() - 1; i >= 0; --i) {
    c[i] = rank % axes[i].size;
    rank /= axes[i].size;
  }
  return c;
}

std::string Mesh::str() const {
  std::string r = "mesh @" + name + " = [";
  for (size_t i = 0; i < axes.size(); ++i) {
    if (i) r += ", ";
    r += axes[i].name + ": " + std::to_string(axes[i].size);
  }
  return r + "]";
}

}  // namespace gsl::ir
