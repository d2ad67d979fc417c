// Training data for next-token prediction: synthetic tasks and windows over
// a token array. Every batch is a pure function of its arguments (no
// generator state) and is generated whole, the same whatever the number of
// ranks; ranks slice their rows afterwards.
//
// Tokens:
//   0          padding (never a content token; a target of 0 means "no loss here")
//   1          separator (synthetic tasks)
//   2..vocab-1 content
//
// Synthetic tasks ("copy", "reverse"), for a row of length seq (>= 3):
//   P = (seq - 1) / 2 content tokens p[0..P), uniform in [2, vocab), then
//   row = p[0] .. p[P-1]  1  a[0] .. a[P-1]  (0 when seq is even)
//   positions 0..P-1 hold the prefix, position P the separator, positions
//   P+1..2P the answer a (copy: a[i] = p[i]; reverse: a[i] = p[P-1-i]) and,
//   when seq is even, position 2P+1 = seq-1 holds one padding 0.
// inputs = the row; targets[t] = row[t+1] for t < seq-1, targets[seq-1] = 0.
// The learnable positions are the answer: t in [P, 2P) (syntheticAnswerStart
// .. syntheticAnswerStart + P), where the input is the separator or an
// answer token and the target is the next answer token (always >= 2). Before
// them the targets are random prefix tokens (t < P-1, not predictable) and
// the separator (t = P-1); after them they are padding 0.
//
// Row r's tokens come from backend::uniformAt(seed, stream(task, step),
// r * seq + i) with stream = hashName("data/" + task) ^ (step * golden
// ratio constant), so a row depends on (task, seed, step, r, seq, vocab)
// only: the same (seed, step) gives the same batch, and row r is the same
// in a batch of 8 as in a batch of 16.
//
// Errors (unknown task, non-positive batch, seq < 3, vocab < 3 or too
// large for i32, negative step, bad token array) throw std::runtime_error
// with a clear message.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/Tensor.h"

namespace gsl::runtime {

struct Batch {
  backend::Tensor inputs;   // i32 [batch, seq]
  backend::Tensor targets;  // i32 [batch, seq]: inputs shifted left by one
};

// Supervised pairs (npy_pairs): N rows of inputs and N labels. An epoch is
// N / batch steps (the last N mod batch rows of its order are left out);
// epoch e = step / (N / batch) visits the rows in a permutation that is a
// pure function of (seed, e) (Fisher-Yates driven by backend::uniformAt),
// so the batches of a step are the same at every -np and after --resume.
// Step s takes rows perm_e[k * batch .. (k + 1) * batch), k = s mod (N /
// batch). The last epoch's permutation is kept (a step of the same epoch
// does not draw it again).
class ShuffledOrder {
 public:
  ShuffledOrder(int64_t n, int64_t batch, uint64_t seed);
  // The file rows of step `step`'s batch, in batch order.
  std::vector<int64_t> batchRows(int64_t step);

 private:
  int64_t n_, batch_;
  uint64_t seed_;
  int64_t epoch_ = -1;
  std::vector<int64_t> perm_;
};

// The order of a text corpus' training windows (text_bytes): as
// ShuffledOrder, an epoch is n / batch steps and epoch e = step / (n /
// batch) visits the windows in a permutation that is a pure function of
// (seed, e), step s taking its positions [k * batch, (k + 1) * batch), k =
// s mod (n / batch). The permutation is computed an element at a time,
// not held as a table: a keyed Feistel network (4 rounds, Philox round
// keys from (seed, e)) permutes [0, 4^h), the next power of 4 >= n, and
// an index it takes to n or beyond is permuted again until it lands below
// n ("cycle walking", still a bijection of [0, n)). Memory is constant
// whatever n: a corpus of 10 GB needs no table of its windows.
class WindowOrder {
 public:
  WindowOrder(int64_t n, int64_t batch, uint64_t seed);
  // The windows of step `step`'s batch, in batch order.
  std::vector<int64_t> batchRows(int64_t step) const;
  // Position i of epoch e's permutation (i in [0, n)).
  int64_t at(int64_t epoch, int64_t i) const;
  int64_t windows() const { return n_; }

 private:
  int64_t n_, batch_;
  uint64_t seed_;
  int halfBits_ = 0;
  uint64_t feistel(uint64_t stream, uint64_t x) const;
};

// The bytes of one or more text files (text_bytes), read as one stream,
// the files one after the other; a token is a byte's value (vocab 256).
// The first floor(split * N) bytes of the N are the training part, the
// rest the validation part. A part of P bytes holds (P - 1) / seq windows
// of seq + 1 bytes, window w at offset w * seq of its part (consecutive
// windows share one byte): inputs = its first seq bytes, targets = its
// last seq (the next byte of each input).
//
// Streaming: the constructor reads each file once, a block at a time, to
// check it (no NUL byte), and keeps only the sizes; a window is read with
// pread where it lies (a reader keeps at most kMaxOpenFiles files open).
// Memory does not grow with the corpus.
//
// Errors throw TextReadError for a file that cannot be read ("<path>: no
// such file", "is a directory", "cannot read: ..."), std::runtime_error
// for one that is not text: "<path>: <what>". A file is text unless it is empty or holds a NUL byte
// (as git, grep and diff decide); any other byte, invalid UTF-8 included
// (Latin-1 text), is a token like the others.
struct TextReadError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
class TextCorpus {
 public:
  static constexpr int kMaxOpenFiles = 16;
  TextCorpus(const std::vector<std::string>& paths, int64_t seq, double split);
  ~TextCorpus();
  TextCorpus(const TextCorpus&) = delete;
  TextCorpus& operator=(const TextCorpus&) = delete;

  int64_t bytes() const { return total_; }
  int64_t trainBytes() const { return trainBytes_; }
  // The windows of the training or the validation part.
  int64_t windows(bool validation) const;
  // Throws std::runtime_error unless the part holds at least `batch`
  // windows ("corpus.txt: the training part (the first 95%: 950 of 1,000
  // bytes) holds 1 window of seq + 1 = 513 bytes, fewer than the batch 4
  // ...").
  void requireWindows(int64_t batch, bool validation) const;
  // Where window w of a part starts in the stream.
  int64_t windowStart(bool validation, int64_t w) const {
    return (validation ? trainBytes_ : 0) + w * seq_;
  }
  // Reads `count` bytes from stream offset `at` as i32 tokens into `dst`.
  void read(int64_t at, int64_t count, int32_t* dst);
  // The bytes read by read() so far (the constructor's check not counted).
  uint64_t bytesRead() const { return bytesRead_; }

 private:
  std::vector<std::string> paths_;
  std::vector<int64_t> starts_;  // each file's first byte in the stream; then total_
  std::vector<int> fds_;         // -1: not open
  std::vector<size_t> opened_;   // open files, oldest first
  int64_t total_ = 0, trainBytes_ = 0, seq_ = 0;
  double split_ = 1;
  uint64_t bytesRead_ = 0;
  std::vector<unsigned char> buf_;
  int fd(size_t file);
};

// One .npy array of a supervised data set, read a row at a time (pread at
// the row's offset: a rank reads only the rows it is given, never the
// whole file). A row is a slice along the first dim, of any rank. The
// values are converted to the data set's dtype as they are read:
//   inputs (f32): float32 '<f4' as is; float64 '<f8' rounded to the
//     nearest f32 (a finite value beyond f32's range is an error; inf and
//     NaN stay); uint8 '|u1' exactly.
//   labels (i32): int32 '<i4' as is; int64 '<i8' when in i32's range (else
//     an error); uint8 '|u1' and bool '|b1' (0 or 1) exactly.
//   tokens (i32, npy_tokens): int32 '<i4', int64 '<i8', uint16 '<u2' and
//     uint8 '|u1', converted as labels.
// Errors throw std::runtime_error: "<path>: <what>", a value that does not
// fit naming it and its flat index in the file ("x.npy: float64 value 1e+39
// at index 50 does not fit in f32").
enum class NpyKind { Inputs, Labels, Tokens };
class NpyRows {
 public:
  NpyRows(const std::string& path, bool labels);
  NpyRows(const std::string& path, NpyKind kind);
  ~NpyRows();
  NpyRows(const NpyRows&) = delete;
  NpyRows& operator=(const NpyRows&) = delete;

  int64_t rows() const { return shape_.empty() ? 0 : shape_[0]; }
  // The file's shape (rank >= 1) and dtype string.
  const std::vector<int64_t>& shape() const { return shape_; }
  const std::string& descr() const { return descr_; }
  int64_t rowElements() const { return rowElems_; }
  // Reads file rows `rows` (each in [0, rows())) into `dst`, one after the
  // other: rows.size() * rowElements() values of f32 (inputs) or i32
  // (labels).
  void read(const std::vector<int64_t>& rows, void* dst);
  // Reads the `count` consecutive rows from `first` (one pread) into `dst`.
  void readRange(int64_t first, int64_t count, void* dst);
  // The bytes read from the file's data so far (the header not counted).
  uint64_t bytesRead() const { return bytesRead_; }

 private:
  std::string path_, descr_;
  NpyKind kind_;
  int fd_ = -1;
  std::vector<int64_t> shape_;
  int64_t rowElems_ = 1;
  size_t itemSize_ = 4;
  uint64_t dataOffset_ = 0;
  uint64_t bytesRead_ = 0;
  std::vector<char> buf_;
};

// A batch of the synthetic task `task` ("copy" or "reverse"), see above.
Batch syntheticBatch(const std::string& task, uint64_t seed, int64_t step, int64_t batch,
                     int64_t seq, int64_t vocab);

// First learnable target position of a synthetic row: P = (seq - 1) / 2;
// positions [P, 2P) are learnable.
int64_t syntheticAnswerStart(int64_t seq);

// Contiguous windows over `tokens` (i32 [N], N >= seq + 2): row r of step
// s starts at o = ((s * batch + r) * seq) mod (N - seq - 1) (computed
// without overflow); inputs[r] = tokens[o .. o+seq), targets[r] =
// tokens[o+1 .. o+seq+1). Consecutive rows and steps read consecutive
// windows until they wrap around to the start.
Batch npyTokenBatch(const backend::Tensor& tokens, int64_t step, int64_t batch, int64_t seq);

// The tokens of an npy_tokens file, read whole: a 1-D array of int32
// '<i4', int64 '<i8', uint16 '<u2' or uint8 '|u1' (NumPy's default integer
// and raw bytes included), converted to i32 [N] as NpyRows converts
// labels. A token that does not fit in i32, is negative, or (vocab > 0:
// the data set's vocab=) is not below vocab is an error naming the file
// and the token's index: "t.npy: token 70000 at index 3 is not below vocab
// 50000". Errors throw std::runtime_error (backend::NpyError for a file
// that cannot be read as .npy).
backend::Tensor readTokenFile(const std::string& path, int64_t vocab);

}  // namespace gsl::runtime
