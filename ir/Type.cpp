#include "ir/Type.h"

#include <limits>

namespace gsl::ir {

const char* dtypeName(DType d) {
  switch (d) {
    case DType::F32: return "f32";
    case DType::I32: return "i32";
    case DType::Bool: return "bool";
    case DType::BF16: return "bf16";
  }
  return "?";
}

std::optional<DType> parseDType(std::string_view s) {
  if (s == "f32") return DType::F32;
  if (s == "i32") return DType::I32;
  if (s == "bool") return DType::Bool;
  if (s == "bf16") return DType::BF16;
  return std::nullopt;
}

int64_t TensorType::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return std::numeric_limits<int64_t>::max();
    n *= d;
  }
  return n;
}

bool TensorType::sizeFits() const {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / 4 / d) return false;
    n *= d;
  }
  return true;
}

std::string shapeStr(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ", ";
    r += std::to_string(s[i]);
  }
  return r + "]";
}

std::string TensorType::str() const {
  std::string r = dtypeName(dtype);
  if (!shape.empty()) r += shapeStr(shape);
  return r;
}

}  // namespace gsl::ir
