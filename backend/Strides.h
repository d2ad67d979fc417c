// Row-major element strides, shared by the reference kernels
// (Kernels.cpp) and the JIT's addressing (jit/Strides.h).
#pragma once
#include <cstdint>
#include <vector>

#include "ir/Type.h"

namespace gsl::backend {

using Strides = std::vector<int64_t>;

// Row-major strides of a tensor of shape `s` (the last dim contiguous).
inline Strides rowMajorStrides(const ir::Shape& s) {
  Strides st(s.size());
  int64_t acc = 1;
  for (int d = (int)s.size() - 1; d >= 0; --d) {
    st[d] = acc;
    acc *= s[d];
  }
  return st;
}

}  // namespace gsl::backend
