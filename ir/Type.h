// Tensor types: an element dtype and a static shape. Scalars are rank 0.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gsl::ir {

// BF16 is bfloat16: f32's sign and 8-bit exponent with a 7-bit stored
// mantissa, 2 bytes per element (conversions: support/BF16.h).
enum class DType { F32, I32, Bool, BF16 };

const char* dtypeName(DType d);                       // "f32", "i32", "bool", "bf16"
std::optional<DType> parseDType(std::string_view s);  // inverse of dtypeName
// Bytes one element takes in memory and on the wire: 2 for bf16, else 4
// (bool is an int32 0/1).
inline int dtypeBytes(DType d) { return d == DType::BF16 ? 2 : 4; }
// f32 and bf16: the dtypes float arithmetic is defined on.
inline bool isFloat(DType d) { return d == DType::F32 || d == DType::BF16; }

using Shape = std::vector<int64_t>;

struct TensorType {
  DType dtype = DType::F32;
  Shape shape;

  int rank() const { return (int)shape.size(); }
  // Number of elements; saturates at INT64_MAX (see checkedNumElements).
  int64_t numElements() const;
  // False if the element count or byte size overflows 64 bits.
  bool sizeFits() const;
  // Bytes of the whole tensor (numElements() * dtypeBytes(dtype)).
  int64_t byteSize() const { return numElements() * dtypeBytes(dtype); }
  bool operator==(const TensorType& o) const { return dtype == o.dtype && shape == o.shape; }
  bool operator!=(const TensorType& o) const { return !(*this == o); }
  // "f32[2, 3]", scalars "f32".
  std::string str() const;
};

std::string shapeStr(const Shape& s);  // "[2, 3]"

}  // namespace gsl::ir
