#include "runtime/Data.h"

#include <cmath>
#include <limits>
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "backend/Random.h"

namespace gsl::runtime {

using backend::DType;
using backend::Tensor;
using backend::TensorType;

namespace {

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what); }

void checkBatchSeq(const char* who, int64_t step, int64_t batch, int64_t seq, int64_t minSeq) {
  if (step < 0) fail(std::string(who) + ": step must be >= 0, got " + std::to_string(step));
  if (batch < 1) fail(std::string(who) + ": batch must be >= 1, got " + std::to_string(batch));
  if (seq < minSeq)
    fail(std::string(who) + ": seq must be >= " + std::to_string(minSeq) + ", got " + std::to_string(seq));
  if (batch > std::numeric_limits<int64_t>::max() / seq / 4)
    fail(std::string(who) + ": batch " + std::to_string(batch) + " x seq " + std::to_string(seq) +
         " is too large");
}

}  // namespace

int64_t syntheticAnswerStart(int64_t seq) { return (seq - 1) / 2; }

Batch syntheticBatch(const std::string& task, uint64_t seed, int64_t step, int64_t batch,
                     int64_t seq, int64_t vocab) {
  bool reverse;
  if (task == "copy") reverse = false;
  else if (task == "reverse") reverse = true;
  else fail("unknown synthetic data task '" + task + "' (expected 'copy' or 'reverse')");
  std::string who = "synthetic task '" + task + "'";
  checkBatchSeq(who.c_str(), step, batch, seq, 3);
  if (vocab < 3 || vocab > std::numeric_limits<int32_t>::max())
    fail(who + ": vocab must be in [3, 2^31), got " + std::to_string(vocab) +
         " (tokens 0 and 1 are padding and separator)");

  const int64_t P = (seq - 1) / 2;
  const uint64_t stream =
      backend::hashName("data/" + task) ^ ((uint64_t)step * 0x9E3779B97F4A7C15ULL);
  const double span = (double)(vocab - 2);

  Batch b{Tensor(TensorType{DType::I32, {batch, seq}}), Tensor(TensorType{DType::I32, {batch, seq}})};
  int32_t* in = b.inputs.i32();
  int32_t* tg = b.targets.i32();
  for (int64_t r = 0; r < batch; ++r) {
    int32_t* row = in + r * seq;
    for (int64_t i = 0; i < P; ++i) {
      double u = backend::uniformAt(seed, stream, (uint64_t)(r * seq + i));
      int64_t tok = 2 + (int64_t)std::floor(u * span);
      if (tok > vocab - 1) tok = vocab - 1;  // u < 1, so only a rounding guard
      row[i] = (int32_t)tok;
    }
    row[P] = 1;
    for (int64_t i = 0; i < P; ++i) row[P + 1 + i] = reverse ? row[P - 1 - i] : row[i];
    // seq even: row[seq - 1] stays the padding 0.
    int32_t* trow = tg + r * seq;
    for (int64_t t = 0; t + 1 < seq; ++t) trow[t] = row[t + 1];
    trow[seq - 1] = 0;
  }
  return b;
}

Batch npyTokenBatch(const Tensor& tokens, int64_t step, int64_t batch, int64_t seq) {
  const char* who = "token data";
  if (!tokens.defined() || tokens.dtype() != DType::I32 || tokens.rank() != 1)
    fail(std::string(who) + ": expected an i32 array of rank 1, got " +
         (tokens.defined() ? tokens.type().str() : std::string("no tensor")));
  checkBatchSeq(who, step, batch, seq, 1);
  const int64_t n = tokens.shape()[0];
  if (n < seq + 2)
    fail(std::string(who) + ": " + std::to_string(n) + " tokens are too few for seq " +
         std::to_string(seq) + " (need at least seq + 2 = " + std::to_string(seq + 2) + ")");
  const unsigned __int128 mod = (unsigned __int128)(n - seq - 1);

  Batch b{Tensor(TensorType{DType::I32, {batch, seq}}), Tensor(TensorType{DType::I32, {batch, seq}})};
  const int32_t* src = tokens.i32();
  int32_t* in = b.inputs.i32();
  int32_t* tg = b.targets.i32();
  for (int64_t r = 0; r < batch; ++r) {
    unsigned __int128 window = (unsigned __int128)step * (unsigned __int128)batch + (unsigned __int128)r;
    int64_t o = (int64_t)((window * (unsigned __int128)seq) % mod);
    for (int64_t t = 0; t < seq; ++t) {
      in[r * seq + t] = src[o + t];
      tg[r * seq + t] = src[o + t + 1];
    }
  }
  return b;
}

Batch supervisedBatch(const Tensor& x, const Tensor& y, uint64_t seed, int64_t step, int64_t batch) {
  const int64_t n = x.shape()[0], f = x.shape()[1];
  if (step < 0) fail("supervised data: negative step " + std::to_string(step));
  if (n < batch)
    fail("supervised data: " + std::to_string(n) + " rows are fewer than the batch " + std::to_string(batch));
  const int64_t perEpoch = n / batch;
  const int64_t epoch = step / perEpoch, k = step % perEpoch;
  // The epoch's order: Fisher-Yates, swap i with j uniform in [0, i].
  std::vector<int64_t> perm((size_t)n);
  for (int64_t i = 0; i < n; ++i) perm[(size_t)i] = i;
  const uint64_t stream = backend::hashName("data/shuffle") ^ ((uint64_t)epoch * 0x9E3779B97F4A7C15ULL);
  for (int64_t i = n - 1; i > 0; --i) {
    int64_t j = (int64_t)std::floor(backend::uniformAt(seed, stream, (uint64_t)i) * (double)(i + 1));
    if (j > i) j = i;  // u < 1, so only a rounding guard
    std::swap(perm[(size_t)i], perm[(size_t)j]);
  }
  Batch b{Tensor(TensorType{DType::F32, {batch, f}}), Tensor(TensorType{DType::I32, {batch}})};
  for (int64_t r = 0; r < batch; ++r) {
    int64_t row = perm[(size_t)(k * batch + r)];
    std::copy(x.f32() + row * f, x.f32() + (row + 1) * f, b.inputs.f32() + r * f);
    b.targets.i32()[r] = y.i32()[row];
  }
  return b;
}

}  // namespace gsl::runtime
