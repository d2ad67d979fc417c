// runtime/Data: synthetic copy/reverse batches, token-array windows,
// supervised pairs (the shuffled order, .npy rows read one at a time) and
// text corpora (the split, windows, their order, the checks).
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/Data.h"

using namespace gsl::runtime;
using gsl::backend::DType;
using gsl::backend::Tensor;
using gsl::backend::TensorType;

namespace {

bool sameI32(const Tensor& a, const Tensor& b) {
  return a.type() == b.type() && std::memcmp(a.raw(), b.raw(), (size_t)a.size() * 4) == 0;
}

std::string errorOf(auto&& f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "(no error)";
}

// Checks every row of a synthetic batch against the documented layout.
void checkSynthetic(const Batch& b, bool reverse, int64_t batch, int64_t seq, int64_t vocab) {
  REQUIRE(b.inputs.type() == TensorType{DType::I32, {batch, seq}});
  REQUIRE(b.targets.type() == TensorType{DType::I32, {batch, seq}});
  const int64_t P = (seq - 1) / 2;
  CHECK(syntheticAnswerStart(seq) == P);
  const int32_t* in = b.inputs.i32();
  const int32_t* tg = b.targets.i32();
  for (int64_t r = 0; r < batch; ++r) {
    CAPTURE(r);
    const int32_t* row = in + r * seq;
    const int32_t* trow = tg + r * seq;
    for (int64_t i = 0; i < P; ++i) {
      CHECK(row[i] >= 2);
      CHECK(row[i] < vocab);
      CHECK(row[P + 1 + i] == (reverse ? row[P - 1 - i] : row[i]));
    }
    CHECK(row[P] == 1);
    if (seq % 2 == 0) CHECK(row[seq - 1] == 0);
    CHECK(2 * P + 1 + (seq % 2 == 0 ? 1 : 0) == seq);
    for (int64_t t = 0; t + 1 < seq; ++t) CHECK(trow[t] == row[t + 1]);
    CHECK(trow[seq - 1] == 0);
    // The learnable targets [P, 2P) are the answer, all content tokens.
    for (int64_t t = P; t < 2 * P; ++t) {
      CHECK(trow[t] >= 2);
      CHECK(trow[t] == (reverse ? row[2 * P - 1 - t] : row[t - P]));
    }
    for (int64_t t = 2 * P; t < seq; ++t) CHECK(trow[t] == 0);
  }
}

}  // namespace

TEST_CASE("synthetic copy and reverse: the documented structure holds for every row") {
  for (const char* task : {"copy", "reverse"}) {
    for (int64_t seq : {3, 4, 9, 16, 33}) {
      for (int64_t vocab : {3, 5, 100}) {
        CAPTURE(task);
        CAPTURE(seq);
        CAPTURE(vocab);
        Batch b = syntheticBatch(task, 7, 3, 6, seq, vocab);
        checkSynthetic(b, std::string(task) == "reverse", 6, seq, vocab);
      }
    }
  }
  // A tiny example spelled out: seq 8, P = 3, one padding at the end.
  Batch b = syntheticBatch("reverse", 1, 0, 1, 8, 50);
  const int32_t* x = b.inputs.i32();
  std::vector<int32_t> row(x, x + 8);
  CHECK(row == std::vector<int32_t>{row[0], row[1], row[2], 1, row[2], row[1], row[0], 0});
  const int32_t* y = b.targets.i32();
  CHECK(std::vector<int32_t>(y, y + 8) == std::vector<int32_t>{row[1], row[2], 1, row[2], row[1], row[0], 0, 0});
}

TEST_CASE("synthetic batches are deterministic and depend on seed, step and task") {
  Batch a = syntheticBatch("copy", 42, 5, 8, 17, 1000);
  Batch b = syntheticBatch("copy", 42, 5, 8, 17, 1000);
  CHECK(sameI32(a.inputs, b.inputs));
  CHECK(sameI32(a.targets, b.targets));
  CHECK_FALSE(sameI32(a.inputs, syntheticBatch("copy", 42, 6, 8, 17, 1000).inputs));
  CHECK_FALSE(sameI32(a.inputs, syntheticBatch("copy", 43, 5, 8, 17, 1000).inputs));
  // A different task draws different prefixes, not just a different order.
  Batch r = syntheticBatch("reverse", 42, 5, 8, 17, 1000);
  CHECK(std::memcmp(a.inputs.i32(), r.inputs.i32(), 8 * 4) != 0);
  // Rows within a batch differ.
  CHECK(std::memcmp(a.inputs.i32(), a.inputs.i32() + 17, 8 * 4) != 0);

  // Steps 0..49 are pairwise different.
  std::set<std::vector<int32_t>> seen;
  for (int64_t step = 0; step < 50; ++step) {
    Batch s = syntheticBatch("copy", 1, step, 4, 9, 64);
    seen.insert(std::vector<int32_t>(s.inputs.i32(), s.inputs.i32() + s.inputs.size()));
  }
  CHECK(seen.size() == 50);

  // Row r is the same whatever the batch size (rank-independent generation).
  Batch small = syntheticBatch("reverse", 9, 11, 3, 12, 77);
  Batch large = syntheticBatch("reverse", 9, 11, 10, 12, 77);
  CHECK(std::memcmp(small.inputs.i32(), large.inputs.i32(), 3 * 12 * 4) == 0);
  CHECK(std::memcmp(small.targets.i32(), large.targets.i32(), 3 * 12 * 4) == 0);
}

TEST_CASE("synthetic tokens cover the whole content range [2, vocab)") {
  const int64_t vocab = 12;
  Batch b = syntheticBatch("copy", 3, 0, 64, 21, vocab);
  std::set<int32_t> content;
  for (int64_t r = 0; r < 64; ++r)
    for (int64_t i = 0; i < 10; ++i) content.insert(b.inputs.i32()[r * 21 + i]);
  CHECK(content.size() == (size_t)(vocab - 2));
  CHECK(*content.begin() == 2);
  CHECK(*content.rbegin() == vocab - 1);
  // vocab 3: the only content token is 2.
  Batch one = syntheticBatch("copy", 3, 0, 2, 5, 3);
  for (int64_t i = 0; i < 2; ++i) {
    const int32_t* row = one.inputs.i32() + i * 5;
    CHECK(std::vector<int32_t>(row, row + 5) == std::vector<int32_t>{2, 2, 1, 2, 2});
  }
}

TEST_CASE("synthetic batch errors") {
  CHECK(errorOf([] { syntheticBatch("sort", 0, 0, 1, 8, 10); }) ==
        "unknown synthetic data task 'sort' (expected 'copy' or 'reverse')");
  CHECK(errorOf([] { syntheticBatch("copy", 0, 0, 0, 8, 10); }) ==
        "synthetic task 'copy': batch must be >= 1, got 0");
  CHECK(errorOf([] { syntheticBatch("copy", 0, 0, 1, 2, 10); }) == "synthetic task 'copy': seq must be >= 3, got 2");
  CHECK(errorOf([] { syntheticBatch("copy", 0, -1, 1, 8, 10); }) == "synthetic task 'copy': step must be >= 0, got -1");
  CHECK(errorOf([] { syntheticBatch("reverse", 0, 0, 1, 8, 2); }) ==
        "synthetic task 'reverse': vocab must be in [3, 2^31), got 2 (tokens 0 and 1 are padding and separator)");
  CHECK(errorOf([] { syntheticBatch("copy", 0, 0, 1, 8, (int64_t)1 << 31); }).find("vocab must be") !=
        std::string::npos);
}

TEST_CASE("token windows: contiguous rows, next-token targets, wrap-around") {
  const int64_t N = 20;
  std::vector<int32_t> v(N);
  for (int64_t i = 0; i < N; ++i) v[(size_t)i] = (int32_t)(100 + i);
  Tensor tokens = Tensor::fromI32({N}, v);
  const int64_t batch = 2, seq = 4, mod = N - seq - 1;  // 15
  for (int64_t step = 0; step < 8; ++step) {
    Batch b = npyTokenBatch(tokens, step, batch, seq);
    REQUIRE(b.inputs.type() == TensorType{DType::I32, {batch, seq}});
    REQUIRE(b.targets.type() == TensorType{DType::I32, {batch, seq}});
    for (int64_t r = 0; r < batch; ++r) {
      int64_t o = ((step * batch + r) * seq) % mod;
      CAPTURE(step);
      CAPTURE(r);
      for (int64_t t = 0; t < seq; ++t) {
        CHECK(b.inputs.i32()[r * seq + t] == 100 + o + t);
        CHECK(b.targets.i32()[r * seq + t] == 100 + o + t + 1);
      }
    }
  }
  // Spelled out: step 0 reads windows at 0 and 4, step 1 at 8 and 12, step
  // 2 wraps to 16 % 15 = 1 and 20 % 15 = 5.
  Batch s2 = npyTokenBatch(tokens, 2, batch, seq);
  CHECK(std::vector<int32_t>(s2.inputs.i32(), s2.inputs.i32() + 8) ==
        std::vector<int32_t>{101, 102, 103, 104, 105, 106, 107, 108});
  CHECK(std::vector<int32_t>(s2.targets.i32(), s2.targets.i32() + 8) ==
        std::vector<int32_t>{102, 103, 104, 105, 106, 107, 108, 109});
  // The last token a target can reach is tokens[N - 2].
  Batch s1 = npyTokenBatch(tokens, 1, batch, seq);
  CHECK(s1.targets.i32()[7] == 100 + 12 + 4);
  // Deterministic; targets equal the inputs shifted within the row.
  CHECK(sameI32(npyTokenBatch(tokens, 5, 3, 6).inputs, npyTokenBatch(tokens, 5, 3, 6).inputs));
  Batch b = npyTokenBatch(tokens, 3, 3, 6);
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t t = 0; t + 1 < 6; ++t) CHECK(b.targets.i32()[r * 6 + t] == b.inputs.i32()[r * 6 + t + 1]);

  // Minimal array (N = seq + 2): every window starts at 0.
  Tensor tiny = Tensor::fromI32({5}, {1, 2, 3, 4, 5});
  Batch m = npyTokenBatch(tiny, 7, 2, 3);
  CHECK(std::vector<int32_t>(m.inputs.i32(), m.inputs.i32() + 6) == std::vector<int32_t>{1, 2, 3, 1, 2, 3});
  CHECK(std::vector<int32_t>(m.targets.i32(), m.targets.i32() + 6) == std::vector<int32_t>{2, 3, 4, 2, 3, 4});

  // Huge steps do not overflow: (step * batch + r) * seq is reduced exactly.
  const int64_t big = std::numeric_limits<int64_t>::max() / 2;
  Batch h = npyTokenBatch(tokens, big, 2, seq);
  unsigned __int128 w = ((unsigned __int128)big * 2 + 1) * (unsigned __int128)seq;
  int64_t o = (int64_t)(w % (unsigned __int128)mod);
  CHECK(h.inputs.i32()[seq] == 100 + o);
}

TEST_CASE("token window errors") {
  Tensor t = Tensor::fromI32({5}, {1, 2, 3, 4, 5});
  CHECK(errorOf([&] { npyTokenBatch(t, 0, 1, 4); }) ==
        "token data: 5 tokens are too few for seq 4 (need at least seq + 2 = 6)");
  CHECK(errorOf([&] { npyTokenBatch(Tensor(TensorType{DType::I32, {0}}), 0, 1, 1); }) ==
        "token data: 0 tokens are too few for seq 1 (need at least seq + 2 = 3)");
  CHECK(errorOf([&] { npyTokenBatch(Tensor::fromF32({5}, {1, 2, 3, 4, 5}), 0, 1, 2); }) ==
        "token data: expected an i32 array of rank 1, got f32[5]");
  CHECK(errorOf([&] { npyTokenBatch(Tensor::fromI32({1, 5}, {1, 2, 3, 4, 5}), 0, 1, 2); }) ==
        "token data: expected an i32 array of rank 1, got i32[1, 5]");
  CHECK(errorOf([&] { npyTokenBatch(Tensor(), 0, 1, 2); }) == "token data: expected an i32 array of rank 1, got no tensor");
  CHECK(errorOf([&] { npyTokenBatch(t, -1, 1, 2); }) == "token data: step must be >= 0, got -1");
  CHECK(errorOf([&] { npyTokenBatch(t, 0, 0, 2); }) == "token data: batch must be >= 1, got 0");
  CHECK(errorOf([&] { npyTokenBatch(t, 0, 1, 0); }) == "token data: seq must be >= 1, got 0");
}

namespace {

// An order (ShuffledOrder, WindowOrder) of n = 10 rows in batches of 4 (2
// steps an epoch, 2 rows left out of each), asked step after step and
// made afresh for each step by `fresh(seed, step)`: each epoch a
// permutation, another each epoch and under another seed, and the order
// asked step after step gives what a fresh one does.
template <class Order, class Fresh>
void checkEpochs(Order& order, Fresh fresh) {
  const int64_t n = 10, batch = 4;
  std::vector<std::vector<int64_t>> epochs;
  for (int64_t e = 0; e < 3; ++e) {
    std::vector<int64_t> seen;
    for (int64_t k = 0; k < 2; ++k) {
      std::vector<int64_t> r = order.batchRows(e * 2 + k);
      REQUIRE(r.size() == (size_t)batch);
      CHECK(r == fresh(7, e * 2 + k));
      seen.insert(seen.end(), r.begin(), r.end());
    }
    std::set<int64_t> distinct(seen.begin(), seen.end());
    CHECK(distinct.size() == 8);  // no row twice in an epoch
    CHECK(*distinct.begin() >= 0);
    CHECK(*distinct.rbegin() < n);
    epochs.push_back(seen);
  }
  CHECK(epochs[0] != epochs[1]);  // reshuffled each epoch
  CHECK(epochs[1] != epochs[2]);
  CHECK(order.batchRows(1) == fresh(7, 1));  // back to an earlier epoch
  CHECK(fresh(7, 0) != fresh(8, 0));  // the seed changes the order
}

}  // namespace

TEST_CASE("supervised pairs: each epoch a permutation by seed and epoch") {
  ShuffledOrder order(10, 4, 7);  // one order asked step after step (its epoch cached)
  checkEpochs(order, [](uint64_t seed, int64_t step) { return ShuffledOrder(10, 4, seed).batchRows(step); });
  CHECK(errorOf([] { ShuffledOrder(10, 11, 7); }) == "supervised data: 10 rows are fewer than the batch 11");
  CHECK(errorOf([&] { order.batchRows(-1); }) == "supervised data: negative step -1");
}

namespace {

// A .npy file (format 1.0) of dtype `descr`, shape `shape` and raw data.
std::string writeNpyFile(const std::string& name, const std::string& descr, const std::string& shape,
                         const std::string& data) {
  std::string path = (std::filesystem::temp_directory_path() / ("gsl_data_test_" + name)).string();
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + dict.size() + 1) % 64) dict += ' ';
  dict += '\n';
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
  bytes += (char)(dict.size() & 0xff);
  bytes += (char)(dict.size() >> 8);
  bytes += dict + data;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

template <class T>
std::string rawOf(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

}  // namespace

TEST_CASE("NpyRows: N-D rows read one at a time, float64 rounded, bytes counted") {
  std::vector<double> x(4 * 2 * 3);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.1 * (double)i;
  std::string path = writeNpyFile("x.npy", "<f8", "(4, 2, 3)", rawOf(x));
  NpyRows rows(path, false);
  CHECK(rows.rows() == 4);
  CHECK(rows.rowElements() == 6);
  CHECK(rows.shape() == std::vector<int64_t>{4, 2, 3});
  std::vector<float> out(3 * 6);
  rows.read({3, 1}, out.data());
  for (int j = 0; j < 6; ++j) {
    CHECK(out[(size_t)j] == (float)x[(size_t)(18 + j)]);
    CHECK(out[(size_t)(6 + j)] == (float)x[(size_t)(6 + j)]);
  }
  CHECK(rows.bytesRead() == 2 * 6 * 8);  // only the two rows
  x[20] = 1e39;
  path = writeNpyFile("x.npy", "<f8", "(4, 2, 3)", rawOf(x));
  NpyRows bad(path, false);
  bad.read({0, 1, 2}, out.data());  // rows without the value: fine (one row at a time)
  CHECK(errorOf([&] { bad.read({3}, out.data()); }) == path + ": float64 value 1e+39 at index 20 does not fit in f32");
  std::remove(path.c_str());
}

TEST_CASE("NpyRows: labels of int64, uint8 and bool; dtypes refused") {
  std::string path = writeNpyFile("y8.npy", "<i8", "(3,)", rawOf(std::vector<int64_t>{7, -2, (int64_t)1 << 40}));
  NpyRows y(path, true);
  std::vector<int32_t> out(2);
  y.read({1, 0}, out.data());
  CHECK(out == std::vector<int32_t>{-2, 7});
  CHECK(errorOf([&] { y.read({2}, out.data()); }) == path + ": int64 value 1099511627776 at index 2 does not fit in i32");
  path = writeNpyFile("yu.npy", "|u1", "(3,)", std::string("\x00\x09\xff", 3));
  NpyRows u(path, true);
  u.read({2, 1}, out.data());
  CHECK(out == std::vector<int32_t>{255, 9});
  path = writeNpyFile("yb.npy", "|b1", "(2,)", std::string("\x01\x00", 2));
  NpyRows b(path, true);
  b.read({0, 1}, out.data());
  CHECK(out == std::vector<int32_t>{1, 0});
  path = writeNpyFile("xu.npy", "|u1", "(1, 2)", std::string("\x00\xff", 2));
  NpyRows xu(path, false);
  std::vector<float> f(2);
  xu.read({0}, f.data());
  CHECK(f == std::vector<float>{0.0f, 255.0f});
  path = writeNpyFile("y2.npy", "<i2", "(2,)", std::string(4, '\0'));
  CHECK(errorOf([&] { NpyRows(path, true); }) ==
        path + ": npy_pairs reads labels of int32 '<i4', int64 '<i8', uint8 '|u1' or bool '|b1', not '<i2'");
  CHECK(errorOf([&] { NpyRows(path, false); }) ==
        path + ": npy_pairs reads inputs of float32 '<f4', float64 '<f8' or uint8 '|u1', not '<i2'");
  path = writeNpyFile("short.npy", "<f4", "(4, 2)", std::string(12, '\0'));
  CHECK(errorOf([&] { NpyRows(path, false); }) == path + ": truncated: header says 32 bytes of data, file has 12");
  for (const char* n : {"y8.npy", "yu.npy", "yb.npy", "xu.npy", "y2.npy", "short.npy"})
    std::remove((std::filesystem::temp_directory_path() / (std::string("gsl_data_test_") + n)).c_str());
}

TEST_CASE("readTokenFile: int32, int64, uint16 and uint8 tokens; range and shape errors") {
  auto tokens = [](const Tensor& t) { return std::vector<int32_t>(t.i32(), t.i32() + t.size()); };
  std::string path = writeNpyFile("t4.npy", "<i4", "(3,)", rawOf(std::vector<int32_t>{5, 0, 2147483647}));
  Tensor t = readTokenFile(path, 0);
  CHECK(t.type() == TensorType{DType::I32, {3}});
  CHECK(tokens(t) == std::vector<int32_t>{5, 0, 2147483647});
  path = writeNpyFile("t8.npy", "<i8", "(4,)", rawOf(std::vector<int64_t>{3, 50256, 0, 7}));
  CHECK(tokens(readTokenFile(path, 50257)) == std::vector<int32_t>{3, 50256, 0, 7});
  CHECK(errorOf([&] { readTokenFile(path, 50256); }) == path + ": token 50256 at index 1 is not below vocab 50256");
  path = writeNpyFile("t2.npy", "<u2", "(3,)", rawOf(std::vector<uint16_t>{65535, 1, 300}));
  CHECK(tokens(readTokenFile(path, 65536)) == std::vector<int32_t>{65535, 1, 300});
  path = writeNpyFile("t1.npy", "|u1", "(3,)", std::string("\x00\x80\xff", 3));
  CHECK(tokens(readTokenFile(path, 256)) == std::vector<int32_t>{0, 128, 255});
  path = writeNpyFile("tneg.npy", "<i8", "(3,)", rawOf(std::vector<int64_t>{1, 2, -1}));
  CHECK(errorOf([&] { readTokenFile(path, 0); }) == path + ": token -1 at index 2 is negative");
  path = writeNpyFile("tbig.npy", "<i8", "(2,)", rawOf(std::vector<int64_t>{1, (int64_t)1 << 31}));
  CHECK(errorOf([&] { readTokenFile(path, 0); }) == path + ": int64 value 2147483648 at index 1 does not fit in i32");
  path = writeNpyFile("tf.npy", "<f4", "(2,)", std::string(8, '\0'));
  CHECK(errorOf([&] { readTokenFile(path, 0); }) ==
        path + ": npy_tokens reads tokens of int32 '<i4', int64 '<i8', uint16 '<u2' or uint8 '|u1', not '<f4'");
  path = writeNpyFile("t2d.npy", "<i4", "(2, 2)", std::string(16, '\0'));
  CHECK(errorOf([&] { readTokenFile(path, 0); }) == path + ": npy_tokens needs a 1-D array of tokens, got shape [2, 2]");
  for (const char* n : {"t4.npy", "t8.npy", "t2.npy", "t1.npy", "tneg.npy", "tbig.npy", "tf.npy", "t2d.npy"})
    std::remove((std::filesystem::temp_directory_path() / (std::string("gsl_data_test_") + n)).c_str());
}

namespace {

// A file of `bytes` in the temp folder; its path.
std::string writeTextFile(const std::string& name, const std::string& bytes) {
  std::string path = (std::filesystem::temp_directory_path() / ("gsl_text_test_" + name)).string();
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::vector<int32_t> readTokens(TextCorpus& c, int64_t at, int64_t n) {
  std::vector<int32_t> out((size_t)n);
  c.read(at, n, out.data());
  return out;
}

std::vector<int32_t> tokensOf(const std::string& s) { return std::vector<int32_t>(s.begin(), s.end()); }

}  // namespace

TEST_CASE("text corpus: files as one stream, the split by position, windows of seq + 1 bytes") {
  // 26 + 10 = 36 bytes over two files; split 0.75: 27 bytes train, 9 validate.
  const std::string a = "abcdefghijklmnopqrstuvwxyz", b = "0123456789";
  std::string pa = writeTextFile("a.txt", a), pb = writeTextFile("b.txt", b);
  TextCorpus c({pa, pb}, 4, 0.75);
  CHECK(c.bytes() == 36);
  CHECK(c.trainBytes() == 27);
  CHECK(c.windows(false) == 6);  // (27 - 1) / 4: the last ends at byte 25 (window 5: bytes 20..24)
  CHECK(c.windows(true) == 2);   // (9 - 1) / 4
  CHECK(c.windowStart(false, 5) == 20);
  CHECK(c.windowStart(true, 0) == 27);
  CHECK(c.windowStart(true, 1) == 31);
  // A window's inputs and targets: its first and last seq bytes; the
  // validation windows run across the end of the first file.
  CHECK(readTokens(c, c.windowStart(false, 1), 4) == tokensOf("efgh"));
  CHECK(readTokens(c, c.windowStart(false, 1) + 1, 4) == tokensOf("fghi"));
  CHECK(readTokens(c, c.windowStart(true, 0), 5) == tokensOf("12345"));
  CHECK(readTokens(c, 24, 6) == tokensOf("yz0123"));  // across the files
  // Every window lies inside its part: the training ones end before the
  // validation part, the validation ones inside the stream.
  CHECK(c.windowStart(false, c.windows(false) - 1) + 4 + 1 <= c.trainBytes());
  CHECK(c.windowStart(true, c.windows(true) - 1) + 4 + 1 <= c.bytes());
  CHECK(c.bytesRead() == 4 + 4 + 5 + 6);
  // Bytes 128..255 (Latin-1, invalid UTF-8) are tokens like the others.
  std::string pl = writeTextFile("latin1.txt", std::string("caf\xe9 \xff!", 7));
  TextCorpus l({pl}, 2, 1);
  CHECK(l.trainBytes() == 7);
  CHECK(l.windows(true) == 0);
  CHECK(readTokens(l, 3, 4) == std::vector<int32_t>{0xe9, ' ', 0xff, '!'});
  // split 1: all of it trains.
  TextCorpus whole({pa}, 5, 1);
  CHECK(whole.windows(false) == 5);  // (26 - 1) / 5
  CHECK(errorOf([&] { whole.requireWindows(6, false); }) ==
        pa + ": the training part (all 26 bytes) holds 5 windows of seq + 1 = 6 bytes, fewer than the batch 6 "
             "(a shorter seq, a smaller batch or more text)");
  c.requireWindows(6, false);
  c.requireWindows(2, true);
  CHECK(errorOf([&] { c.requireWindows(3, true); }) ==
        pa + " (and 1 more file): the validation part (the last 25%: 9 of 36 bytes) holds 2 windows of seq + 1 = 5 "
             "bytes, fewer than the batch 3 (a shorter seq, a smaller batch or more text, or a smaller split)");
  TextCorpus longSeq({pa, pb}, 40, 0.75);
  CHECK(longSeq.windows(false) == 0);
  CHECK(errorOf([&] { longSeq.requireWindows(1, false); }) ==
        pa + " (and 1 more file): the training part (the first 75%: 27 of 36 bytes) holds 0 windows of seq + 1 = 41 "
             "bytes, fewer than the batch 1 (a shorter seq, a smaller batch or more text)");
  for (const auto& p : {pa, pb, pl}) std::remove(p.c_str());
}

TEST_CASE("text corpus: a missing, empty, binary or directory file is an error naming it") {
  std::string missing = (std::filesystem::temp_directory_path() / "gsl_text_test_missing.txt").string();
  std::remove(missing.c_str());
  CHECK(errorOf([&] { TextCorpus({missing}, 4, 1); }) == missing + ": no such file");
  bool readError = false;
  try {
    TextCorpus({missing}, 4, 1);
  } catch (const TextReadError&) {
    readError = true;  // the cannot-read kind (under MPI the message names the host)
  }
  CHECK(readError);
  std::string empty = writeTextFile("empty.txt", "");
  CHECK(errorOf([&] { TextCorpus({empty}, 4, 1); }) ==
        empty + ": the file is empty (text_bytes reads text, a token per byte)");
  // A NUL byte anywhere, here past the first block the check reads.
  std::string big(300000, 'x');
  big[299990] = '\0';
  std::string binary = writeTextFile("binary.txt", big);
  std::string ok = writeTextFile("ok.txt", "fine text");
  CHECK(errorOf([&] { TextCorpus({ok, binary}, 4, 1); }) ==
        binary + ": not a text file: a NUL byte at offset 299990 (text_bytes reads text, a token per byte)");
  std::string dir = std::filesystem::temp_directory_path().string();
  CHECK(errorOf([&] { TextCorpus({dir}, 4, 1); }) == dir + ": is a directory");
  CHECK(errorOf([&] { TextCorpus({ok}, 4, 0); }) == "text_bytes: split must be in (0, 1], got 0");
  for (const auto& p : {empty, binary, ok}) std::remove(p.c_str());
}

TEST_CASE("text corpus: a reader keeps at most kMaxOpenFiles files open, and reads across all of them") {
  std::vector<std::string> paths;
  std::string all;
  for (int i = 0; i < TextCorpus::kMaxOpenFiles + 5; ++i) {
    std::string s = std::string(1, (char)('A' + i)) + std::string(1, (char)('a' + i));
    paths.push_back(writeTextFile("many" + std::to_string(i) + ".txt", s));
    all += s;
  }
  TextCorpus c(paths, 3, 1);
  for (int pass = 0; pass < 2; ++pass)  // files closed and opened again
    for (int64_t at = 0; at + 3 <= c.bytes(); ++at) CHECK(readTokens(c, at, 3) == tokensOf(all.substr((size_t)at, 3)));
  for (const auto& p : paths) std::remove(p.c_str());
}

TEST_CASE("text windows' order: each epoch a permutation by seed and epoch, without a table") {
  WindowOrder order(10, 4, 7);
  checkEpochs(order, [](uint64_t seed, int64_t step) { return WindowOrder(10, 4, seed).batchRows(step); });
  // A bijection of [0, n) for sizes around powers of 4, and not the identity.
  for (int64_t m : {1, 2, 3, 4, 5, 15, 16, 17, 1000, 65536, 65537, 200003}) {
    CAPTURE(m);
    WindowOrder o(m, 1, 3);
    std::vector<char> hit((size_t)m, 0);
    int64_t fixed = 0;
    for (int64_t i = 0; i < m; ++i) {
      int64_t w = o.at(1, i);
      REQUIRE(w >= 0);
      REQUIRE(w < m);
      CHECK_FALSE(hit[(size_t)w]);
      hit[(size_t)w] = 1;
      fixed += w == i;
    }
    if (m >= 1000) CHECK(fixed < m / 100);  // shuffled (a random permutation fixes ~1 point)
  }
  // A corpus of 10 GB at seq 64 (156 million windows): any position at once.
  WindowOrder huge((int64_t)10e9 / 64, 32, 1);
  std::set<int64_t> rows;
  for (int64_t s : {0, 1, 4000000}) {
    std::vector<int64_t> r = huge.batchRows(s);
    rows.insert(r.begin(), r.end());
  }
  CHECK(rows.size() == 96);
  CHECK(*rows.rbegin() < huge.windows());
  CHECK(errorOf([] { WindowOrder(3, 4, 7); }) == "text data: 3 windows are fewer than the batch 4");
  CHECK(errorOf([&] { order.batchRows(-1); }) == "text data: negative step -1");
}
