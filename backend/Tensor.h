// A dense host tensor: a type plus a shared buffer of 4-byte words, row-major
// (f32 as float; i32 as int32_t; bool as int32_t 0/1; bf16 as packed 2-byte
// uint16_t, ir::dtypeBytes). Copies share the buffer; kernels always
// produce fresh tensors.
//
// Buffers of at least kPooledBytes come from a process-wide pool: a freed
// buffer is kept (up to a bound on the bytes kept) and handed to the next
// request of the same size, so that a training step, which allocates the
// same sizes as the step before, touches no fresh pages (no page faults)
// once warm. Smaller buffers come from malloc.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/Type.h"

namespace gsl::backend {

using ir::DType;
using ir::Shape;
using ir::TensorType;

class Tensor {
 public:
  Tensor() = default;
  // Zero-filled tensor of the given type.
  explicit Tensor(const TensorType& t);
  // A tensor whose elements are unspecified, for a producer that writes
  // every element (the JIT's results): no zero-fill.
  static Tensor uninitialized(const TensorType& t);
  static Tensor scalarF32(float v);
  static Tensor scalarI32(int32_t v);
  static Tensor scalarBool(bool v);
  static Tensor fromF32(const Shape& s, std::vector<float> v);
  static Tensor fromI32(const Shape& s, std::vector<int32_t> v);

  const TensorType& type() const { return type_; }
  DType dtype() const { return type_.dtype; }
  const Shape& shape() const { return type_.shape; }
  int rank() const { return type_.rank(); }
  // Number of elements (0 for an undefined tensor).
  int64_t size() const { return buf_ ? type_.numElements() : 0; }
  // Bytes of the elements (size() * dtypeBytes).
  size_t bytes() const { return (size_t)size() * (size_t)ir::dtypeBytes(type_.dtype); }
  bool defined() const { return buf_ != nullptr; }
  // True when this is the only tensor holding the buffer (no copy of it
  // exists anywhere): then its owner may let a kernel overwrite it (buffer
  // donation, Engine::call). Safe across threads: another thread's last
  // reads of a buffer happen before its copy is dropped.
  bool soleOwner() const;

  float* f32();
  const float* f32() const;
  int32_t* i32();              // also bool
  const int32_t* i32() const;  // also bool
  uint16_t* bf16();
  const uint16_t* bf16() const;
  void* raw() { return buf_->data; }
  const void* raw() const { return buf_->data; }

  // Element i as double (any dtype), for printing and tests.
  double at(int64_t i) const;
  // Scalar value of a rank-0 (or 1-element) tensor.
  double item() const { return at(0); }
  // NumPy-style text: scalars "1.5", arrays "[[1, 2], [3, 4]]"; at most
  // `maxElems` elements, eliding the middle with "..." (as numpy does).
  std::string str(int64_t maxElems = 1000) const;
  // Row-major strides in elements.
  std::vector<int64_t> strides() const;

 private:
  // 4-byte words (f32 is bit-cast), 64-byte aligned; returned to the pool
  // (or freed) with the last tensor sharing it.
  struct Buffer {
    int32_t* data = nullptr;
    size_t words = 0;
    explicit Buffer(size_t words);
    ~Buffer();
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
  };
  Tensor(const TensorType& t, bool zero);

  TensorType type_;
  std::shared_ptr<Buffer> buf_;
};

// The buffer pool's counters, for tests and benchmarks.
struct TensorPoolStats {
  uint64_t reused = 0;       // requests served from the pool
  uint64_t allocated = 0;    // pooled-size requests that allocated fresh memory
  uint64_t cachedBytes = 0;  // bytes kept for reuse now
};
TensorPoolStats tensorPoolStats();
// Gives every buffer kept for reuse back to the system (the host, once set-up
// tensors no longer needed are freed: their sizes are not asked for again).
void releaseTensorPool();
// Requests of at least this many bytes go through the pool.
constexpr size_t kPooledBytes = 64 * 1024;
// At most this many bytes are kept for reuse; a freed buffer that would
// exceed it is given back to the system.
constexpr uint64_t kPoolMaxCachedBytes = uint64_t(1) << 30;

// Shortest decimal text that reads back as the same float ("0.1", "1e-05", "3.0").
std::string formatF32(float v);

}  // namespace gsl::backend
