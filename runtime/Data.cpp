#include "runtime/Data.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <algorithm>
#include <stdexcept>
#include <vector>

#include "backend/Npy.h"
#include "backend/Random.h"
#include "support/Diagnostics.h"
#include "support/Text.h"

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

ShuffledOrder::ShuffledOrder(int64_t n, int64_t batch, uint64_t seed) : n_(n), batch_(batch), seed_(seed) {
  if (batch < 1) fail("supervised data: batch must be >= 1, got " + std::to_string(batch));
  if (n < batch)
    fail("supervised data: " + std::to_string(n) + " rows are fewer than the batch " + std::to_string(batch));
}

std::vector<int64_t> ShuffledOrder::batchRows(int64_t step) {
  if (step < 0) fail("supervised data: negative step " + std::to_string(step));
  const int64_t perEpoch = n_ / batch_;
  const int64_t epoch = step / perEpoch, k = step % perEpoch;
  if (epoch != epoch_) {
    // The epoch's order: Fisher-Yates, swap i with j uniform in [0, i].
    perm_.resize((size_t)n_);
    for (int64_t i = 0; i < n_; ++i) perm_[(size_t)i] = i;
    const uint64_t stream = backend::hashName("data/shuffle") ^ ((uint64_t)epoch * 0x9E3779B97F4A7C15ULL);
    for (int64_t i = n_ - 1; i > 0; --i) {
      int64_t j = (int64_t)std::floor(backend::uniformAt(seed_, stream, (uint64_t)i) * (double)(i + 1));
      if (j > i) j = i;  // u < 1, so only a rounding guard
      std::swap(perm_[(size_t)i], perm_[(size_t)j]);
    }
    epoch_ = epoch;
  }
  return std::vector<int64_t>(perm_.begin() + k * batch_, perm_.begin() + (k + 1) * batch_);
}

WindowOrder::WindowOrder(int64_t n, int64_t batch, uint64_t seed) : n_(n), batch_(batch), seed_(seed) {
  if (batch < 1) fail("text data: batch must be >= 1, got " + std::to_string(batch));
  if (n < batch)
    fail("text data: " + std::to_string(n) + " windows are fewer than the batch " + std::to_string(batch));
  // 4^halfBits_ >= n: two halves of halfBits_ bits each.
  while (halfBits_ < 31 && ((int64_t)1 << (2 * halfBits_)) < n) ++halfBits_;
}

uint64_t WindowOrder::feistel(uint64_t stream, uint64_t x) const {
  const uint64_t mask = ((uint64_t)1 << halfBits_) - 1;
  uint64_t l = x >> halfBits_, r = x & mask;
  for (uint64_t round = 0; round < 4; ++round) {
    uint32_t out[4];
    backend::philox(seed_, stream, (r << 2) | round, out);
    const uint64_t f = (((uint64_t)out[1] << 32) | out[0]) & mask;
    const uint64_t nl = r;
    r = l ^ f;
    l = nl;
  }
  return (l << halfBits_) | r;
}

int64_t WindowOrder::at(int64_t epoch, int64_t i) const {
  GSL_ASSERT(i >= 0 && i < n_, "WindowOrder::at: position out of range");
  if (halfBits_ == 0) return 0;  // n == 1
  const uint64_t stream = backend::hashName("data/text") ^ ((uint64_t)epoch * 0x9E3779B97F4A7C15ULL);
  uint64_t x = (uint64_t)i;
  do x = feistel(stream, x);
  while (x >= (uint64_t)n_);
  return (int64_t)x;
}

std::vector<int64_t> WindowOrder::batchRows(int64_t step) const {
  if (step < 0) fail("text data: negative step " + std::to_string(step));
  const int64_t perEpoch = n_ / batch_;
  const int64_t epoch = step / perEpoch, k = step % perEpoch;
  std::vector<int64_t> rows((size_t)batch_);
  for (int64_t r = 0; r < batch_; ++r) rows[(size_t)r] = at(epoch, k * batch_ + r);
  return rows;
}

namespace {

// Reads up to `n` bytes at `at`; the bytes read (short only at the end of the file).
size_t preadAll(int fd, void* dst, size_t n, uint64_t at, const std::string& path) {
  size_t done = 0;
  while (done < n) {
    ssize_t got = ::pread(fd, static_cast<char*>(dst) + done, n - done, (off_t)(at + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw TextReadError(path + ": cannot read: " + std::strerror(errno));
    if (got == 0) break;
    done += (size_t)got;
  }
  return done;
}

// The errors are readNpy's: "no such file", "is a directory", "not a
// regular file", "cannot read: ...".
int openText(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 && (errno == ENOENT || errno == ENOTDIR)) throw TextReadError(path + ": no such file");
  if (fd < 0) throw TextReadError(path + ": cannot read: " + std::strerror(errno));
  return fd;
}

// Thousands separated: 2,576,674.
std::string grouped(int64_t v) {
  std::string s = std::to_string(v);
  for (int i = (int)s.size() - 3; i > 0; i -= 3) s.insert((size_t)i, ",");
  return s;
}

}  // namespace

TextCorpus::TextCorpus(const std::vector<std::string>& paths, int64_t seq, double split)
    : paths_(paths), seq_(seq), split_(split) {
  if (paths.empty()) fail("text_bytes: no file given");
  if (seq < 1) fail("text_bytes: seq must be >= 1, got " + std::to_string(seq));
  if (!(split > 0 && split <= 1)) fail("text_bytes: split must be in (0, 1], got " + shortest(split));
  // Each file once, a block at a time: its size, and that it is text.
  std::vector<unsigned char> block(1 << 18);
  for (const std::string& path : paths) {
    int fd = openText(path);
    struct stat st;
    const bool stated = ::fstat(fd, &st) == 0;
    if (!stated || !S_ISREG(st.st_mode)) {
      const std::string why = !stated                 ? std::string("cannot read: ") + std::strerror(errno)
                              : S_ISDIR(st.st_mode) ? "is a directory"
                                                    : "not a regular file";
      ::close(fd);
      throw TextReadError(path + ": " + why);
    }
    uint64_t size = 0;
    try {
      for (size_t got; (got = preadAll(fd, block.data(), block.size(), size, path)) > 0; size += got)
        if (const void* nul = std::memchr(block.data(), 0, got)) {
          const uint64_t at = size + (uint64_t)(static_cast<const unsigned char*>(nul) - block.data());
          fail(path + ": not a text file: a NUL byte at offset " + std::to_string(at) +
               " (text_bytes reads text, a token per byte)");
        }
    } catch (...) {
      ::close(fd);
      throw;
    }
    ::close(fd);
    if (size == 0) fail(path + ": the file is empty (text_bytes reads text, a token per byte)");
    starts_.push_back(total_);
    total_ += (int64_t)size;
  }
  starts_.push_back(total_);
  fds_.assign(paths.size(), -1);
  trainBytes_ = split >= 1 ? total_ : (int64_t)std::floor(split * (double)total_);
}

TextCorpus::~TextCorpus() {
  for (int f : fds_)
    if (f >= 0) ::close(f);
}

int64_t TextCorpus::windows(bool validation) const {
  const int64_t part = validation ? total_ - trainBytes_ : trainBytes_;
  return part > seq_ ? (part - 1) / seq_ : 0;
}

void TextCorpus::requireWindows(int64_t batch, bool validation) const {
  const int64_t have = windows(validation);
  if (have >= batch) return;
  const double share = validation ? 1 - split_ : split_;
  char pct[32];
  std::snprintf(pct, sizeof pct, "%.4g%%", share * 100);
  const int64_t part = validation ? total_ - trainBytes_ : trainBytes_;
  std::string name = paths_[0];
  if (paths_.size() > 1)
    name += " (and " + std::to_string(paths_.size() - 1) + (paths_.size() == 2 ? " more file)" : " more files)");
  std::string where = split_ >= 1 ? "all " + grouped(total_) + " bytes"
                                  : std::string(validation ? "the last " : "the first ") + pct + ": " +
                                        grouped(part) + " of " + grouped(total_) + " bytes";
  fail(name + ": the " + (validation ? "validation" : "training") + " part (" + where + ") holds " +
       std::to_string(have) + (have == 1 ? " window" : " windows") + " of seq + 1 = " + std::to_string(seq_ + 1) +
       " bytes, fewer than the batch " + std::to_string(batch) + " (a shorter seq, a smaller batch or more text" +
       (validation ? ", or a smaller split" : "") + ")");
}

int TextCorpus::fd(size_t file) {
  if (fds_[file] >= 0) return fds_[file];
  if ((int)opened_.size() == kMaxOpenFiles) {
    ::close(fds_[opened_.front()]);
    fds_[opened_.front()] = -1;
    opened_.erase(opened_.begin());
  }
  fds_[file] = openText(paths_[file]);
  opened_.push_back(file);
  return fds_[file];
}

void TextCorpus::read(int64_t at, int64_t count, int32_t* dst) {
  GSL_ASSERT(at >= 0 && count >= 0 && at + count <= total_, "TextCorpus::read: bytes out of range");
  buf_.resize((size_t)count);
  // The file holding byte `at`, then the next ones.
  size_t file = (size_t)(std::upper_bound(starts_.begin(), starts_.end(), at) - starts_.begin()) - 1;
  int64_t done = 0;
  while (done < count) {
    const int64_t off = at + done - starts_[file];
    const int64_t n = std::min(count - done, starts_[file + 1] - (at + done));
    if (preadAll(fd(file), buf_.data() + done, (size_t)n, (uint64_t)off, paths_[file]) < (size_t)n)
      throw TextReadError(paths_[file] + ": cannot read: the file got shorter");
    done += n;
    ++file;
  }
  bytesRead_ += (uint64_t)count;
  for (int64_t i = 0; i < count; ++i) dst[i] = buf_[(size_t)i];
}

NpyRows::NpyRows(const std::string& path, bool labels) : NpyRows(path, labels ? NpyKind::Labels : NpyKind::Inputs) {}

NpyRows::NpyRows(const std::string& path, NpyKind kind) : path_(path), kind_(kind) {
  backend::NpyLayout l = backend::readNpyLayout(path);
  descr_ = l.descr;
  struct Accepts {
    const char* who;
    const char* what;
    std::vector<std::string> descrs;
    const char* names;
  };
  static const Accepts kAccepts[] = {
      {"npy_pairs", "inputs", {"<f4", "<f8", "|u1"}, "float32 '<f4', float64 '<f8' or uint8 '|u1'"},
      {"npy_pairs", "labels", {"<i4", "<i8", "|u1", "|b1"}, "int32 '<i4', int64 '<i8', uint8 '|u1' or bool '|b1'"},
      {"npy_tokens", "tokens", {"<i4", "<i8", "<u2", "|u1"}, "int32 '<i4', int64 '<i8', uint16 '<u2' or uint8 '|u1'"},
  };
  const Accepts& a = kAccepts[(int)kind];
  if (std::find(a.descrs.begin(), a.descrs.end(), descr_) == a.descrs.end())
    fail(path + ": " + a.who + " reads " + a.what + " of " + a.names + ", not '" + descr_ + "'");
  itemSize_ = descr_[2] - '0';
  shape_ = l.shape;
  if (shape_.empty()) fail(path + ": " + a.who + " needs an array of rows, not a scalar");
  for (size_t d = 1; d < shape_.size(); ++d) rowElems_ *= shape_[d];
  if (l.dataBytes < l.elements * itemSize_)
    fail(path + ": truncated: header says " + std::to_string(l.elements * itemSize_) + " bytes of data, file has " +
         std::to_string(l.dataBytes));
  dataOffset_ = l.dataOffset;
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) fail(path + ": cannot read: " + std::strerror(errno));
}

NpyRows::~NpyRows() {
  if (fd_ >= 0) ::close(fd_);
}

void NpyRows::read(const std::vector<int64_t>& rows, void* dst) {
  for (size_t i = 0; i < rows.size(); ++i) readRange(rows[i], 1, static_cast<char*>(dst) + i * (size_t)rowElems_ * 4);
}

void NpyRows::readRange(int64_t first, int64_t count, void* dst) {
  GSL_ASSERT(first >= 0 && count >= 0 && first + count <= rows(), "NpyRows::readRange: rows out of range");
  const int64_t n = count * rowElems_;
  const size_t bytes = (size_t)n * itemSize_;
  buf_.resize(bytes);
  const uint64_t at = dataOffset_ + (uint64_t)first * (uint64_t)rowElems_ * itemSize_;
  size_t done = 0;
  while (done < bytes) {
    ssize_t got = ::pread(fd_, buf_.data() + done, bytes - done, (off_t)(at + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) fail(path_ + ": cannot read: " + (got < 0 ? std::strerror(errno) : "the file got shorter"));
    done += (size_t)got;
  }
  bytesRead_ += bytes;
  const char* src = buf_.data();
  const uint64_t flat0 = (uint64_t)first * (uint64_t)rowElems_;
  auto misfit = [&](const std::string& value, int64_t j) {
    fail(path_ + ": " + value + " at index " + std::to_string(flat0 + (uint64_t)j) + " does not fit in " +
         (kind_ == NpyKind::Inputs ? "f32" : "i32"));
  };
  if (kind_ == NpyKind::Inputs) {
    float* out = static_cast<float*>(dst);
    if (descr_ == "<f4") {
      std::memcpy(out, src, bytes);  // little-endian host assumed, as backend/Npy
    } else if (descr_ == "<f8") {
      for (int64_t j = 0; j < n; ++j) {
        double v;
        std::memcpy(&v, src + 8 * j, 8);
        if (std::isfinite(v) && std::fabs(v) > (double)std::numeric_limits<float>::max())
          misfit("float64 value " + shortest(v), j);
        out[j] = (float)v;
      }
    } else {
      for (int64_t j = 0; j < n; ++j) out[j] = (float)(unsigned char)src[j];
    }
    return;
  }
  int32_t* out = static_cast<int32_t*>(dst);
  if (descr_ == "<i4") {
    std::memcpy(out, src, bytes);
  } else if (descr_ == "<i8") {
    for (int64_t j = 0; j < n; ++j) {
      int64_t v;
      std::memcpy(&v, src + 8 * j, 8);
      if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
        misfit("int64 value " + std::to_string(v), j);
      out[j] = (int32_t)v;
    }
  } else if (descr_ == "<u2") {
    for (int64_t j = 0; j < n; ++j) {
      uint16_t v;
      std::memcpy(&v, src + 2 * j, 2);
      out[j] = v;
    }
  } else if (descr_ == "|u1") {
    for (int64_t j = 0; j < n; ++j) out[j] = (unsigned char)src[j];
  } else {
    for (int64_t j = 0; j < n; ++j) out[j] = src[j] != 0 ? 1 : 0;
  }
}

Tensor readTokenFile(const std::string& path, int64_t vocab) {
  NpyRows f(path, NpyKind::Tokens);
  if (f.shape().size() != 1)
    fail(path + ": npy_tokens needs a 1-D array of tokens, got shape " + ir::shapeStr(f.shape()));
  Tensor t(TensorType{DType::I32, {f.rows()}});
  f.readRange(0, f.rows(), t.i32());
  const int32_t* p = t.i32();
  for (int64_t i = 0; i < f.rows(); ++i)
    if (p[i] < 0 || (vocab > 0 && p[i] >= vocab))
      fail(path + ": token " + std::to_string(p[i]) + " at index " + std::to_string(i) +
           (p[i] < 0 ? " is negative" : " is not below vocab " + std::to_string(vocab)));
  return t;
}

}  // namespace gsl::runtime
