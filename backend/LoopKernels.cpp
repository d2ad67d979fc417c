#include "backend/LoopKernels.h"

#include <cstring>

#include "support/Diagnostics.h"

namespace gsl::backend {

// The row `i` selects of x (elements per row in `row`); asserts the range.
static int64_t rowIndex(const Tensor& x, const Tensor& i, const char* op, int64_t& row) {
  const int64_t rows = x.shape()[0];
  row = rows ? x.size() / rows : 0;
  const int64_t k = i.i32()[0];
  GSL_ASSERT(k >= 0 && k < rows, std::string(op) + ": index " + std::to_string(k) +
                                     " is out of range for dim 0 of " + x.type().str());
  return k;
}

Tensor dynamicIndex(const Tensor& x, const Tensor& i, const TensorType& rt) {
  int64_t row;
  int64_t k = rowIndex(x, i, "dynamic_index", row);
  Tensor out(rt);
  GSL_ASSERT(out.size() == row, "dynamic_index: result type mismatch");
  if (row) std::memcpy(out.raw(), static_cast<const int32_t*>(x.raw()) + k * row, (size_t)row * 4);
  return out;
}

Tensor dynamicUpdate(const Tensor& x, const Tensor& u, const Tensor& i) {
  int64_t row;
  int64_t k = rowIndex(x, i, "dynamic_update", row);
  GSL_ASSERT(u.size() == row, "dynamic_update: row type mismatch");
  Tensor out(x.type());
  if (x.size()) std::memcpy(out.raw(), x.raw(), (size_t)x.size() * 4);
  if (row) std::memcpy(static_cast<int32_t*>(out.raw()) + k * row, u.raw(), (size_t)row * 4);
  return out;
}

}  // namespace gsl::backend
