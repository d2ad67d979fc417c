#include "passes/ReshapeLayout.h"

#include <algorithm>
#include <vector>

namespace gsl::passes {

using namespace ir;

namespace {

int64_t axesProduct(const Module& m, const std::string& mesh, const Axes& axes) {
  const Mesh* me = m.findMesh(mesh);
  int64_t p = 1;
  for (const auto& a : axes) p *= me ? me->axisSize(a) : 1;
  return p;
}

}  // namespace

std::optional<std::map<Symbol, int64_t>> contiguousLayout(const Module& m, const Shape& shape,
                                                               const Sharding& s) {
  std::map<Symbol, int64_t> w;
  if (s.mesh.empty() || !m.findMesh(s.mesh)) return w;
  int last = -1, padded = -1;
  for (int d = 0; d < (int)shape.size(); ++d)
    if (!s.dims[d].empty()) {
      last = d;
      if (shape[d] % axesProduct(m, s.mesh, s.dims[d]) != 0) padded = d;
    }
  // A padded dim (docs/sharding.md, "Uneven dims") keeps one contiguous
  // block per rank only as the one split dim with nothing but size-one dims
  // before it: each rank's block of ceil(size / n) rows is then one range
  // of the row-major order, its padding rows past the end of the tensor.
  if (padded >= 0 && padded != last) return std::nullopt;
  for (int d = 0; d < last; ++d) {
    if (padded >= 0 && (shape[d] != 1 || !s.dims[d].empty())) return std::nullopt;
    if (shape[d] != axesProduct(m, s.mesh, s.dims[d])) return std::nullopt;
  }
  int64_t stride = 1;  // elements per step along dim d
  for (int d = (int)shape.size() - 1; d >= 0; --d) {
    if (!s.dims[d].empty()) {
      const int64_t n = axesProduct(m, s.mesh, s.dims[d]);
      int64_t step = stride * ((shape[d] + n - 1) / n);  // one (padded) block along d
      for (int i = (int)s.dims[d].size() - 1; i >= 0; --i) {
        w[s.dims[d][i]] = step;
        step *= axesProduct(m, s.mesh, {s.dims[d][i]});
      }
    }
    stride *= shape[d];
  }
  return w;
}

std::optional<Sharding> sameLayoutSharding(const Module& m, const Shape& from, const Sharding& s, const Shape& to) {
  auto w = contiguousLayout(m, from, s);
  if (!w || w->empty()) return std::nullopt;
  // The axes, major (largest weight) first, dealt to the dims of `to` from
  // the major end: a dim takes axes while they divide what is left of it.
  std::vector<std::pair<int64_t, Symbol>> axes;
  for (auto& [a, wt] : *w) axes.push_back({wt, a});
  std::sort(axes.begin(), axes.end(), [](auto& x, auto& y) { return x.first > y.first; });
  Sharding r = Sharding::replicated(s.mesh, (int)to.size());
  size_t k = 0;
  for (size_t d = 0; d < to.size() && k < axes.size(); ++d) {
    int64_t left = to[d];
    while (k < axes.size()) {
      int64_t n = axesProduct(m, s.mesh, {axes[k].second});
      if (left % n != 0) break;
      r.dims[d].push_back(axes[k].second);
      left /= n;
      ++k;
    }
  }
  if (k != axes.size()) {
    // No even split of `to` fits: every axis on its first dim larger than
    // one, padded, when that keeps each rank's range (a padded major dim,
    // [14, 3] @[a, _] to [7, 2, 3] @[a, _, _] over 4).
    r = Sharding::replicated(s.mesh, (int)to.size());
    size_t d = 0;
    while (d < to.size() && to[d] == 1) ++d;
    if (d == to.size()) return std::nullopt;
    for (auto& [wt, a] : axes) r.dims[d].push_back(a);
  }
  auto rw = contiguousLayout(m, to, r);
  if (!rw || *rw != *w) return std::nullopt;
  return r;
}

}  // namespace gsl::passes
