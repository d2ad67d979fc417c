#include "ir/Sharding.h"

namespace gsl::ir {

Sharding Sharding::replicated(const std::string& mesh, int rank) {
  Sharding s;
  s.mesh = mesh;
  s.dims.assign(rank, {});
  return s;
}

Sharding normalForm(const std::optional<Sharding>& s, int rank) {
  if (!s || s->isReplicated()) return Sharding::replicated("", rank);
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
