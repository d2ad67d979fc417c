#include "ir/Sharding.h"

namespace gsl::ir {

Sharding Sharding::replicated(Symbol mesh, int rank) {
  Sharding s;
  s.mesh = mesh;
  s.dims.assign(rank, {});
  return s;
}

Sharding Sharding::fromNames(std::string_view mesh, const std::vector<std::vector<std::string>>& dims,
                             const std::vector<std::string>& partial) {
  Sharding s;
  s.mesh = Symbol(mesh);
  for (const auto& d : dims) s.dims.push_back(axesOf(d));
  s.partial = axesOf(partial);
  return s;
}

Axes axesOf(const std::vector<std::string>& names) { return Axes(names.begin(), names.end()); }

std::vector<std::string> namesOf(const Axes& axes) { return {axes.begin(), axes.end()}; }

std::vector<std::vector<std::string>> namesOf(const std::vector<Axes>& dims) {
  std::vector<std::vector<std::string>> r;
  for (const Axes& a : dims) r.push_back(namesOf(a));
  return r;
}

Sharding normalForm(const std::optional<Sharding>& s, int rank) {
  if (!s || s->isReplicated()) return Sharding::replicated(Symbol(), rank);
  return *s;
}

std::optional<Sharding> annotationOf(const Sharding& s) {
  if (s.mesh.empty()) return std::nullopt;
  return s;
}

bool Sharding::isReplicated() const {
  for (const auto& d : dims)
    if (!d.empty()) return false;
  return partial.empty();
}

std::string Sharding::str() const {
  std::string r = "@shard(" + mesh + ", [";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) r += ", ";
    const auto& d = dims[i];
    if (d.empty()) r += "_";
    else if (d.size() == 1) r += d[0];
    else {
      r += "(";
      for (size_t j = 0; j < d.size(); ++j) r += (j ? ", " : "") + d[j];
      r += ")";
    }
  }
  r += "])";
  if (!partial.empty()) {
    r += " partial(";
    for (size_t j = 0; j < partial.size(); ++j) r += (j ? ", " : "") + partial[j];
    r += ")";
  }
  return r;
}

}  // namespace gsl::ir
