#include "backend/Tensor.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <functional>

#include "support/Diagnostics.h"

namespace gsl::backend {

Tensor::Tensor(const TensorType& t) : type_(t) {
  buf_ = std::make_shared<std::vector<int32_t>>((size_t)t.numElements(), 0);
}

Tensor Tensor::scalarF32(float v) {
  Tensor t(TensorType{DType::F32, {}});
  t.f32()[0] = v;
  return t;
}
Tensor Tensor::scalarI32(int32_t v) {
  Tensor t(TensorType{DType::I32, {}});
  t.i32()[0] = v;
  return t;
}
Tensor Tensor::scalarBool(bool v) {
  Tensor t(TensorType{DType::Bool, {}});
  t.i32()[0] = v ? 1 : 0;
  return t;
}
Tensor Tensor::fromF32(const Shape& s, std::vector<float> v) {
  Tensor t(TensorType{DType::F32, s});
  GSL_ASSERT((int64_t)v.size() == t.size(), "fromF32: size mismatch");
  if (!v.empty()) std::memcpy(t.f32(), v.data(), v.size() * 4);
  return t;
}
Tensor Tensor::fromI32(const Shape& s, std::vector<int32_t> v) {
  Tensor t(TensorType{DType::I32, s});
  GSL_ASSERT((int64_t)v.size() == t.size(), "fromI32: size mismatch");
  if (!v.empty()) std::memcpy(t.i32(), v.data(), v.size() * 4);
  return t;
}

float* Tensor::f32() {
  GSL_ASSERT(type_.dtype == DType::F32, "f32() on a non-f32 tensor");
  return reinterpret_cast<float*>(buf_->data());
}
const float* Tensor::f32() const {
  GSL_ASSERT(type_.dtype == DType::F32, "f32() on a non-f32 tensor");
  return reinterpret_cast<const float*>(buf_->data());
}
int32_t* Tensor::i32() {
  GSL_ASSERT(type_.dtype != DType::F32, "i32() on an f32 tensor");
  return buf_->data();
}
const int32_t* Tensor::i32() const {
  GSL_ASSERT(type_.dtype != DType::F32, "i32() on an f32 tensor");
  return buf_->data();
}

double Tensor::at(int64_t i) const {
  GSL_ASSERT(i >= 0 && i < size(), "Tensor::at out of range");
  if (type_.dtype == DType::F32) return f32()[i];
  return i32()[i];
}

std::vector<int64_t> Tensor::strides() const {
  std::vector<int64_t> s(rank());
  int64_t acc = 1;
  for (int d = rank() - 1; d >= 0; --d) {
    s[d] = acc;
    acc *= shape()[d];
  }
  return s;
}

std::string formatF32(float v) {
  if (std::isnan(v)) return "nan";  // as NumPy, whatever the sign bit (glibc's log(-1) is -nan)
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

static std::string elemStr(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::F32: return formatF32(t.f32()[i]);
    case DType::I32: return std::to_string(t.i32()[i]);
    case DType::Bool: return t.i32()[i] ? "true" : "false";
  }
  return "?";
}

std::string Tensor::str(int64_t maxElems) const {
  if (rank() == 0) return elemStr(*this, 0);
  // NumPy summarises large arrays: 3 items at each edge of each dim.
  bool summarise = size() > maxElems;
  const int edge = 3;
  auto st = strides();
  std::string out;
  std::function<void(int, int64_t)> rec = [&](int d, int64_t off) {
    out += "[";
    int64_t n = shape()[d];
    for (int64_t i = 0; i < n; ++i) {
      if (summarise && n > 2 * edge && i == edge) {
        out += (d + 1 == rank()) ? "..., " : "...,\n" + std::string(d + 1, ' ');
        i = n - edge - 1;
        continue;
      }
      if (d + 1 == rank()) out += elemStr(*this, off + i * st[d]);
      else rec(d + 1, off + i * st[d]);
      if (i + 1 < n) out += (d + 1 == rank()) ? ", " : ",\n" + std::string(d + 1, ' ');
    }
    out += "]";
  };
  rec(0, 0);
  return out;
}

}  // namespace gsl::backend
