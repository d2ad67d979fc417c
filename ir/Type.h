// Tensor types: an element dtype and a static shape. Scalars are rank 0.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gsl::ir {

enum class DType { F32, I32, Bool };

const char* dtypeName(DType d);                       // "f32", "i32", "bool"
std::optional<DType> parseDType(std::string_view s);  // inverse of dtypeName

using Shape = std::vector<int64_t>;

struct TensorType {
  DType dtype = DType::F32;
  Shape shape;

  int rank() const { return (int)shape.size(); }
  // Number of elements; saturates at INT64_MAX (see checkedNumElements).
  int64_t numElements() const;
  // False if the element count or byte size overflows 64 bits.
  bool sizeFits() const;
  bool operator==(const TensorType& o) const { return dtype == o.dtype && shape == o.shape; }
  bool operator!=(const TensorType& o) const { return !(*this == o); }
  // "f32[2, 3]", scalars "f32".
  std::string str() const;
};

std::string shapeStr(const Shape& s);  // "[2, 3]"

}  // namespace gsl::ir
