#include "backend/jit/Strides.h"

#include "support/Diagnostics.h"

namespace gsl::backend::jit {

using ir::Shape;

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Strides bcastStrides(const Shape& in, const Shape& out) {
  GSL_ASSERT(in.size() <= out.size(), "jit: broadcast operand rank exceeds result rank");
  Strides st(out.size(), 0), own = rowMajorStrides(in);
  size_t lead = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) {
    GSL_ASSERT(in[i] == out[lead + i] || in[i] == 1, "jit: incompatible broadcast");
    st[lead + i] = in[i] == 1 ? 0 : own[i];
  }
  return st;
}

void collapse(Shape& s, std::vector<Strides*> st) {
  Shape ns;
  std::vector<Strides> nst(st.size());
  for (size_t d = 0; d < s.size(); ++d) {
    if (s[d] == 1) continue;
    if (!ns.empty()) {
      bool ok = true;
      for (size_t k = 0; k < st.size(); ++k) ok &= nst[k].back() == (*st[k])[d] * s[d];
      if (ok) {
        ns.back() *= s[d];
        for (size_t k = 0; k < st.size(); ++k) nst[k].back() = (*st[k])[d];
        continue;
      }
    }
    ns.push_back(s[d]);
    for (size_t k = 0; k < st.size(); ++k) nst[k].push_back((*st[k])[d]);
  }
  s = ns;
  for (size_t k = 0; k < st.size(); ++k) *st[k] = nst[k];
}

}  // namespace gsl::backend::jit
