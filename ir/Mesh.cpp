#include "ir/Mesh.h"

#include "support/Diagnostics.h"

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

std::vector<int> collectiveGroup(const Mesh& m, const std::vector<int64_t>& axes, int rank, int* index) {
  const int64_t nd = m.numDevices();
  GSL_ASSERT(rank >= 0 && rank < nd,
             "internal error: collectiveGroup: rank " + std::to_string(rank) + " is outside " + m.str());
  std::vector<bool> used(m.axes.size(), false);
  for (int64_t a : axes) {
    GSL_ASSERT(a >= 0 && a < (int64_t)m.axes.size() && !used[a],
               "internal error: collectiveGroup: bad axis list for " + m.str());
    used[a] = true;
  }
  std::vector<int64_t> row(m.axes.size());  // row-major strides of the mesh
  int64_t acc = 1;
  for (int i = (int)m.axes.size() - 1; i >= 0; --i) {
    row[i] = acc;
    acc *= m.axes[i].size;
  }
  const std::vector<int64_t> c = m.coords(rank);
  // The member with coordinates 0 along `axes`; members step through the
  // axes' coordinates like an odometer, the last listed axis fastest.
  int64_t base = rank;
  int64_t n = 1;
  for (int64_t a : axes) {
    base -= c[a] * row[a];
    n *= m.axes[a].size;
  }
  std::vector<int> group;
  group.reserve((size_t)n);
  std::vector<int64_t> k(axes.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t r = base;
    for (size_t j = 0; j < axes.size(); ++j) r += k[j] * row[axes[j]];
    if (r == rank && index) *index = (int)i;
    group.push_back((int)r);
    for (int j = (int)axes.size() - 1; j >= 0; --j) {
      if (++k[j] < m.axes[axes[j]].size) break;
      k[j] = 0;
    }
  }
  return group;
}

CollectiveGroups::CollectiveGroups(const Mesh& m, const std::vector<int64_t>& axes) {
  const int nd = (int)m.numDevices();
  groupOf.assign((size_t)nd, -1);
  indexOf.assign((size_t)nd, -1);
  for (int r = 0; r < nd; ++r) {
    if (groupOf[r] >= 0) continue;
    groups.push_back(collectiveGroup(m, axes, r, nullptr));
    for (size_t i = 0; i < groups.back().size(); ++i) {
      groupOf[groups.back()[i]] = (int)groups.size() - 1;
      indexOf[groups.back()[i]] = (int)i;
    }
  }
}

}  // namespace gsl::ir
