#include "backend/Tensor.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <new>
#include <unordered_map>

#include <sys/mman.h>

#include "support/BF16.h"
#include "support/Diagnostics.h"

// AddressSanitizer: GCC says so with __SANITIZE_ADDRESS__, Clang with
// __has_feature.
#if defined(__SANITIZE_ADDRESS__)
#define GSL_HAS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GSL_HAS_ASAN 1
#endif
#endif
#ifndef GSL_HAS_ASAN
#define GSL_HAS_ASAN 0
#endif

namespace gsl::backend {

namespace {

// Freed buffers of kPooledBytes or more, by size in bytes (a multiple of
// 64), for reuse by the next request of that size. They are mapped from
// the system directly, not taken from malloc: a buffer the pool gives back
// (release, or beyond its bound) leaves the process's resident memory at
// once, where malloc would keep it in an arena that other sizes cannot
// use (a checkpoint's whole groups came on top of the steps' freed
// buffers; docs/memory.md).
class Pool {
 public:
  static Pool& get() {
    static Pool* p = new Pool;  // never destroyed: buffers may outlive static destructors
    return *p;
  }
  void* take(size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(bytes);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        cached_ -= bytes;
        reused_++;
        return p;
      }
      allocated_++;
    }
    return map(bytes);
  }
  void give(void* p, size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cached_ + bytes <= kPoolMaxCachedBytes) {
        free_[bytes].push_back(p);
        cached_ += bytes;
        return;
      }
    }
    unmap(p, bytes);
  }
  void release() {
    std::unordered_map<size_t, std::vector<void*>> kept;
    {
      std::lock_guard<std::mutex> lock(mu_);
      kept.swap(free_);
      cached_ = 0;
    }
    for (auto& [bytes, ps] : kept)
      for (void* p : ps) unmap(p, bytes);
  }
  TensorPoolStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return {reused_, allocated_, cached_};
  }
  // A buffer below the pool's size, from malloc.
  static void* alloc(size_t bytes) {
    void* p = std::aligned_alloc(64, bytes);
    if (!p) throw std::bad_alloc();  // reported as out of memory by the host
    return p;
  }

 private:
  // Fresh zero pages (page-aligned), untouched until written. Under
  // AddressSanitizer (make test-asan) from malloc instead, so that an
  // access past a pooled buffer's end is still caught.
#if GSL_HAS_ASAN
  static void* map(size_t bytes) { return alloc(bytes); }
  static void unmap(void* p, size_t) { std::free(p); }
#else
  static void* map(size_t bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();  // reported as out of memory by the host
    return p;
  }
  static void unmap(void* p, size_t bytes) { munmap(p, bytes); }
#endif

  std::mutex mu_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  uint64_t cached_ = 0, reused_ = 0, allocated_ = 0;
};

size_t roundedBytes(size_t words) { return (std::max<size_t>(words, 1) * 4 + 63) / 64 * 64; }

}  // namespace

TensorPoolStats tensorPoolStats() { return Pool::get().stats(); }

void releaseTensorPool() { Pool::get().release(); }

bool Tensor::soleOwner() const {
  if (!buf_ || buf_.use_count() != 1) return false;
  // use_count is a relaxed load: pair it with the release of the last
  // other holder's decrement, so that its reads of the buffer come before
  // our writes.
  std::atomic_thread_fence(std::memory_order_acquire);
  return true;
}

Tensor::Buffer::Buffer(size_t n) : words(n) {
  const size_t bytes = roundedBytes(n);
  data = static_cast<int32_t*>(bytes >= kPooledBytes ? Pool::get().take(bytes) : Pool::alloc(bytes));
}

Tensor::Buffer::~Buffer() {
  const size_t bytes = roundedBytes(words);
  if (bytes >= kPooledBytes) Pool::get().give(data, bytes);
  else std::free(data);
}

Tensor::Tensor(const TensorType& t, bool zero) : type_(t) {
  const size_t words = ((size_t)t.numElements() * ir::dtypeBytes(t.dtype) + 3) / 4;
  buf_ = std::make_shared<Buffer>(words);
  if (zero && words) std::memset(buf_->data, 0, words * 4);
}

Tensor::Tensor(const TensorType& t) : Tensor(t, true) {}

Tensor Tensor::uninitialized(const TensorType& t) { return Tensor(t, false); }

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
  Tensor t(TensorType{DType::F32, s}, false);
  GSL_ASSERT((int64_t)v.size() == t.size(), "fromF32: size mismatch");
  if (!v.empty()) std::memcpy(t.f32(), v.data(), v.size() * 4);
  return t;
}
Tensor Tensor::fromI32(const Shape& s, std::vector<int32_t> v) {
  Tensor t(TensorType{DType::I32, s}, false);
  GSL_ASSERT((int64_t)v.size() == t.size(), "fromI32: size mismatch");
  if (!v.empty()) std::memcpy(t.i32(), v.data(), v.size() * 4);
  return t;
}

float* Tensor::f32() {
  GSL_ASSERT(type_.dtype == DType::F32, "f32() on a non-f32 tensor");
  return reinterpret_cast<float*>(buf_->data);
}
const float* Tensor::f32() const {
  GSL_ASSERT(type_.dtype == DType::F32, "f32() on a non-f32 tensor");
  return reinterpret_cast<const float*>(buf_->data);
}
int32_t* Tensor::i32() {
  GSL_ASSERT(type_.dtype == DType::I32 || type_.dtype == DType::Bool, "i32() on a float tensor");
  return buf_->data;
}
const int32_t* Tensor::i32() const {
  GSL_ASSERT(type_.dtype == DType::I32 || type_.dtype == DType::Bool, "i32() on a float tensor");
  return buf_->data;
}
uint16_t* Tensor::bf16() {
  GSL_ASSERT(type_.dtype == DType::BF16, "bf16() on a non-bf16 tensor");
  return reinterpret_cast<uint16_t*>(buf_->data);
}
const uint16_t* Tensor::bf16() const {
  GSL_ASSERT(type_.dtype == DType::BF16, "bf16() on a non-bf16 tensor");
  return reinterpret_cast<const uint16_t*>(buf_->data);
}

double Tensor::at(int64_t i) const {
  GSL_ASSERT(i >= 0 && i < size(), "Tensor::at out of range");
  if (type_.dtype == DType::F32) return f32()[i];
  if (type_.dtype == DType::BF16) return bf16ToF32(bf16()[i]);
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
    case DType::BF16: return formatF32(bf16ToF32(t.bf16()[i]));
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
