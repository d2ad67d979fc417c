// runtime/Checkpoint: safetensors round trips, the exact bytes written,
// every read error, hostile input, and atomic writes.
#include <doctest/doctest.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/Checkpoint.h"

using namespace gsl::runtime;
using gsl::backend::DType;
using gsl::backend::Tensor;
using gsl::backend::TensorType;

namespace {

// A fresh temp dir per test case, removed (with its files) at the end.
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/gsl_ckpt_test.XXXXXX";
    char* p = mkdtemp(tmpl);
    REQUIRE(p);
    path = p;
  }
  ~TempDir() {
    chmod(path.c_str(), 0755);
    removeTree(path);
  }
  std::string operator/(const std::string& name) const { return path + "/" + name; }
  static void removeTree(const std::string& p) {
    if (DIR* d = opendir(p.c_str())) {
      while (dirent* e = readdir(d)) {
        std::string n = e->d_name;
        if (n == "." || n == "..") continue;
        std::string c = p + "/" + n;
        struct stat st;
        if (lstat(c.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) removeTree(c);
        else unlink(c.c_str());
      }
      closedir(d);
    }
    rmdir(p.c_str());
  }
  std::vector<std::string> list() const {
    std::vector<std::string> r;
    if (DIR* d = opendir(path.c_str())) {
      while (dirent* e = readdir(d)) {
        std::string n = e->d_name;
        if (n != "." && n != "..") r.push_back(n);
      }
      closedir(d);
    }
    return r;
  }
};

std::string readFile(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void writeFile(const std::string& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  f.write(bytes.data(), (std::streamsize)bytes.size());
}

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = (char)((v >> (8 * i)) & 0xff);
  return s;
}

// A safetensors file with the given header text (padded with spaces to a
// multiple of 8) and data section.
std::string stFile(const std::string& json, const std::string& data) {
  std::string h = json;
  h.append((8 - h.size() % 8) % 8, ' ');
  return le64(h.size()) + h + data;
}

// The CheckpointError message of reading `bytes` from a file named `name`.
std::string readError(const TempDir& dir, const std::string& bytes, const std::string& name = "m.safetensors") {
  std::string p = dir / name;
  writeFile(p, bytes);
  try {
    readSafetensors(p, nullptr);
  } catch (const CheckpointError& e) {
    std::string msg = e.what();
    // Strip the directory so tests can compare the rest exactly.
    if (msg.rfind(dir.path + "/", 0) == 0) msg = msg.substr(dir.path.size() + 1);
    return msg;
  }
  return "(no error)";
}

bool sameBits(const Tensor& a, const Tensor& b) {
  if (a.type() != b.type()) return false;
  if (a.size() != b.size()) return false;
  return a.size() == 0 || std::memcmp(a.raw(), b.raw(), (size_t)a.size() * 4) == 0;
}

Tensor boolTensor(const gsl::ir::Shape& s, std::vector<int32_t> v) {
  Tensor t(TensorType{DType::Bool, s});
  for (size_t i = 0; i < v.size(); ++i) t.i32()[i] = v[i];
  return t;
}

// In a forked child: stdout to /dev/null, so nothing doctest buffered in
// the parent is printed twice (std::cerr flushes the tied std::cout).
void quietChild() {
  int devnull = open("/dev/null", O_WRONLY);
  if (devnull >= 0) dup2(devnull, 1);
}

float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

TEST_CASE("round trip: f32, i32, bool, scalars, empty tensors, metadata") {
  TempDir dir;
  std::vector<NamedTensor> ts = {
      {"w", Tensor::fromF32({2, 3}, {0.5f, -1.25f, 3.0f, 1e-30f, -0.0f, 65504.0f})},
      {"ids", Tensor::fromI32({4}, {std::numeric_limits<int32_t>::min(), -1, 0,
                                    std::numeric_limits<int32_t>::max()})},
      {"mask", boolTensor({2, 2}, {1, 0, 0, 1})},
      {"lr", Tensor::scalarF32(0.001f)},
      {"step", Tensor::scalarI32(42)},
      {"flag", Tensor::scalarBool(true)},
      {"empty", Tensor(TensorType{DType::F32, {0, 3}})},
      {"special", Tensor::fromF32({4}, {std::numeric_limits<float>::infinity(),
                                        -std::numeric_limits<float>::infinity(),
                                        bitsToFloat(0x7fc00001u), bitsToFloat(0x00000001u)})},
      {"layer.0/attn \"q\"\t\xc3\xa9", Tensor::fromF32({1, 1, 1, 2}, {7.0f, 8.0f})},
  };
  std::map<std::string, std::string> meta = {
      {"format", "gsl"},
      {"step", "42"},
      {"note", "quote \" backslash \\ newline \n tab \t ctrl \x01 del \x7f \xc3\xa9 \xe6\xbc\xa2 \xf0\x9f\x98\x80"},
      {"", ""},
  };
  std::string p = dir / "model.safetensors";
  writeSafetensors(p, ts, meta);
  CHECK(dir.list() == std::vector<std::string>{"model.safetensors"});  // no temp file left

  std::map<std::string, std::string> got;
  got["stale"] = "cleared";
  auto back = readSafetensors(p, &got);
  CHECK(got == meta);
  REQUIRE(back.size() == ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    CAPTURE(ts[i].name);
    CHECK(back[i].name == ts[i].name);
    CHECK(back[i].value.type() == ts[i].value.type());
    CHECK(sameBits(back[i].value, ts[i].value));
  }
  CHECK(back[5].value.dtype() == DType::Bool);
  CHECK(back[5].value.rank() == 0);
  CHECK(back[5].value.item() == 1);

  // Metadata may be ignored; overwriting an existing checkpoint works.
  CHECK(readSafetensors(p, nullptr).size() == ts.size());
  writeSafetensors(p, {{"only", Tensor::scalarI32(-5)}}, {});
  got["x"] = "y";
  back = readSafetensors(p, &got);
  CHECK(got.empty());
  REQUIRE(back.size() == 1);
  CHECK(back[0].name == "only");
  CHECK(back[0].value.item() == -5);
  CHECK(dir.list() == std::vector<std::string>{"model.safetensors"});
}

TEST_CASE("no tensors: the header is {} padded to 8 bytes") {
  TempDir dir;
  std::string p = dir / "e.safetensors";
  writeSafetensors(p, {}, {});
  CHECK(readFile(p) == le64(8) + "{}      ");
  std::map<std::string, std::string> got;
  CHECK(readSafetensors(p, &got).empty());
  CHECK(got.empty());

  writeSafetensors(p, {}, {{"a", "b"}});
  // 26 bytes of JSON, padded with 6 spaces to 32.
  CHECK(readFile(p) == le64(32) + "{\"__metadata__\":{\"a\":\"b\"}}      ");
  CHECK(readSafetensors(p, &got).empty());
  CHECK(got == std::map<std::string, std::string>{{"a", "b"}});
}

TEST_CASE("byte-exact file: header text, space padding, offsets, little-endian data") {
  TempDir dir;
  std::string p = dir / "tiny.safetensors";
  writeSafetensors(p,
                   {{"a", Tensor::fromF32({2}, {1.0f, -2.0f})},
                    {"b", Tensor::scalarI32(7)},
                    {"c", boolTensor({3}, {1, 0, 1})}},
                   {{"k", "v"}});
  // The JSON is 188 bytes; 4 spaces pad it to 192 = 0xc0.
  const std::string json =
      "{\"__metadata__\":{\"k\":\"v\"},"
      "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
      "\"b\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[8,12]},"
      "\"c\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[12,15]}}";
  REQUIRE(json.size() == 188);
  std::string expected;
  expected += std::string("\xc0\x00\x00\x00\x00\x00\x00\x00", 8);
  expected += json + "    ";
  expected += std::string("\x00\x00\x80\x3f", 4);  // 1.0f
  expected += std::string("\x00\x00\x00\xc0", 4);  // -2.0f
  expected += std::string("\x07\x00\x00\x00", 4);  // 7
  expected += std::string("\x01\x00\x01", 3);      // true, false, true
  std::string got = readFile(p);
  CHECK(got.size() == 8 + 192 + 15);
  CHECK(got == expected);
}

TEST_CASE("names and metadata are escaped as serde_json does") {
  TempDir dir;
  std::string p = dir / "esc.safetensors";
  writeSafetensors(p, {{"q\"\\/\n\x1f\xc3\xa9", Tensor::scalarBool(false)}}, {});
  std::string json =
      "{\"q\\\"\\\\/\\n\\u001f\xc3\xa9\":{\"dtype\":\"BOOL\",\"shape\":[],\"data_offsets\":[0,1]}}";
  CHECK(readFile(p) == stFile(json, std::string(1, '\0')));
  auto back = readSafetensors(p, nullptr);
  REQUIRE(back.size() == 1);
  CHECK(back[0].name == "q\"\\/\n\x1f\xc3\xa9");

  // Invalid UTF-8 cannot be written (JSON is UTF-8).
  try {
    writeSafetensors(p, {{"bad\xff", Tensor::scalarI32(1)}}, {});
    FAIL("expected a CheckpointError");
  } catch (const CheckpointError& e) {
    CHECK(std::string(e.what()) == p + ": cannot write: tensor name 'bad\\xff' is not valid UTF-8");
  }
  try {
    writeSafetensors(p, {}, {{"k", "\xc0\x80"}});
    FAIL("expected a CheckpointError");
  } catch (const CheckpointError& e) {
    CHECK(std::string(e.what()) == p + ": cannot write: metadata value for 'k' is not valid UTF-8");
  }
  CHECK(readSafetensors(p, nullptr).size() == 1);  // the old file is intact
}

TEST_CASE("reading files written by other tools: any key order, escapes, whitespace") {
  TempDir dir;
  // Offsets in another order than the keys, unknown extra field, \u escapes,
  // pretty-printed JSON, metadata last.
  std::string json =
      "{\n  \"z\\u00e9\\ud83d\\ude00\": {\"shape\": [2], \"dtype\": \"I32\", \"data_offsets\": [4, 12], "
      "\"extra\": [1, [2, {}]]},\n  \"a\": {\"data_offsets\": [0, 4], \"dtype\": \"F32\", \"shape\": []},\n"
      "  \"__metadata__\": {\"k\\/\": \"v\\t\"}\n}";
  std::string data = std::string("\x00\x00\x20\x41", 4) + std::string("\x01\x00\x00\x00\xfe\xff\xff\xff", 8);
  std::string p = dir / "other.safetensors";
  writeFile(p, stFile(json, data));
  std::map<std::string, std::string> meta;
  auto back = readSafetensors(p, &meta);
  REQUIRE(back.size() == 2);
  CHECK(back[0].name == "z\xc3\xa9\xf0\x9f\x98\x80");  // header order
  CHECK(back[0].value.type() == TensorType{DType::I32, {2}});
  CHECK(back[0].value.at(0) == 1);
  CHECK(back[0].value.at(1) == -2);
  CHECK(back[1].name == "a");
  CHECK(back[1].value.item() == 10.0);
  CHECK(meta == std::map<std::string, std::string>{{"k/", "v\t"}});

  // BOOL bytes other than 0 read as true.
  writeFile(p, stFile("{\"b\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[0,3]}}", std::string("\x00\x02\xff", 3)));
  back = readSafetensors(p, nullptr);
  REQUIRE(back.size() == 1);
  CHECK(back[0].value.i32()[0] == 0);
  CHECK(back[0].value.i32()[1] == 1);
  CHECK(back[0].value.i32()[2] == 1);
}

TEST_CASE("read errors: file system and lengths") {
  TempDir dir;
  std::string missing = dir / "nope.safetensors";
  CHECK_THROWS_WITH_AS(readSafetensors(missing, nullptr), (missing + ": no such file").c_str(), CheckpointError);
  CHECK_THROWS_WITH_AS(readSafetensors(dir / "no/such/dir.safetensors", nullptr),
                       (dir / "no/such/dir.safetensors: no such file").c_str(), CheckpointError);
  CHECK_THROWS_WITH_AS(readSafetensors(dir.path, nullptr), (dir.path + ": is a directory").c_str(),
                       CheckpointError);
  std::string fifo = dir / "fifo";
  REQUIRE(mkfifo(fifo.c_str(), 0644) == 0);
  CHECK_THROWS_WITH_AS(readSafetensors(fifo, nullptr), (fifo + ": not a regular file").c_str(), CheckpointError);

  CHECK(readError(dir, "") == "m.safetensors: not a safetensors file: it has 0 bytes, fewer than the 8-byte "
                              "header length");
  CHECK(readError(dir, std::string("\x08\x00\x00", 3)) == "m.safetensors: not a safetensors file: it has 3 bytes, fewer "
                                          "than the 8-byte header length");
  CHECK(readError(dir, le64(9) + "{}      ") ==
        "m.safetensors: header length 9 is larger than the file (16 bytes)");
  CHECK(readError(dir, le64(UINT64_MAX) + "{}") ==
        "m.safetensors: header length 18446744073709551615 is larger than the file (10 bytes)");
  CHECK(readError(dir, le64(0)) == "m.safetensors: malformed header: expected a value at the end of the header");
}

TEST_CASE("read errors: malformed JSON") {
  TempDir dir;
  auto err = [&](const std::string& json) { return readError(dir, stFile(json, "")); };
  const std::string pre = "m.safetensors: malformed header: ";
  CHECK(err("") == pre + "expected a value at the end of the header");
  CHECK(err("[]") == pre + "expected a JSON object, found an array");
  CHECK(err("\"x\"") == pre + "expected a JSON object, found a string");
  CHECK(err("{") == pre + "expected a string key at the end of the header");
  CHECK(err("{\"a\":}") == pre + "expected a value at byte 5 ('}')");
  CHECK(err("{\"a\" 1}") == pre + "expected ':' after key 'a' at byte 5 ('1}')");
  CHECK(err("{\"a\":1,}") == pre + "expected a string key at byte 7 ('}')");
  CHECK(err("{\"a\":[1,]}") == pre + "expected a value at byte 8 (']}')");
  CHECK(err("{\"a\":[1 2]}") == pre + "expected ',' or ']' in an array at byte 8 ('2]}')");
  CHECK(err("{\"a\":1 \"b\":2}") == pre + "expected ',' or '}' in an object at byte 7 ('\"b\":2}')");
  CHECK(err("{\"a") == pre + "unterminated string at byte 1 ('\"a')");
  CHECK(err("{\"a\\q\":1}") == pre + "invalid escape in a string at byte 3 ('\\q\":1}')");
  CHECK(err("{\"a\\u12\":1}") == pre + "invalid \\u escape at byte 5 ('12\":1}')");
  CHECK(err("{\"\\ud800\":1}") == pre + "unpaired surrogate in a \\u escape at byte 2 ('\\ud800\":1}')");
  CHECK(err("{\"\\udc00\":1}") == pre + "unpaired surrogate in a \\u escape at byte 2 ('\\udc00\":1}')");
  CHECK(err("{\"\\ud800\\u0041\":1}") == pre + "unpaired surrogate in a \\u escape at byte 2 ('\\ud800\\u0041\":1}')");
  CHECK(err(std::string("{\"a\tb\":1}")) == pre + "control character in a string (must be escaped) at byte 3 ('\\x09b\":1}')");
  CHECK(err("{\"a\":01}") == pre + "leading zeros are not allowed in JSON numbers at byte 5 ('01}')");
  CHECK(err("{\"a\":1.5}") == pre + "only integers are allowed (no fractions or exponents) at byte 5 ('1.5}')");
  CHECK(err("{\"a\":1e3}") == pre + "only integers are allowed (no fractions or exponents) at byte 5 ('1e3}')");
  CHECK(err("{\"a\":-}") == pre + "expected a digit at byte 6 ('}')");
  CHECK(err("{\"a\":99999999999999999999}") ==
        pre + "integer 99999999999999999999 is out of range at byte 5 ('99999999999999999999...')");
  CHECK(err("{\"a\":true}") == pre + "unsupported JSON value (a safetensors header holds only objects, arrays, "
                                      "strings and integers) at byte 5 ('true}')");
  CHECK(err("{\"a\":null}").find("unsupported JSON value") != std::string::npos);
  CHECK(err("{} x") == pre + "unexpected text after the JSON object at byte 3 ('x')");
  CHECK(err("{\"a\":1,\"a\":2}") == pre + "duplicate key 'a' at byte 7 ('\"a\":2}')");
  CHECK(err(std::string("{\"\xff\":1}")) == pre + "not valid UTF-8 at byte 2");
  CHECK(err(std::string("{\"\xed\xa0\x80\":1}")) == pre + "not valid UTF-8 at byte 2");  // a surrogate
  CHECK(err(std::string("{}\0", 3)) == pre + "unexpected text after the JSON object at byte 2 ('\\x00')");
  // Deep nesting is refused, not a stack overflow.
  std::string deep = "{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  CHECK(err(deep) == pre + "nesting deeper than 64 levels at byte 68 ('[[[[[[[[[[[[[[[[[[[[...')");
  std::string ok = "{\"__metadata__\":{},\"a\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[0,4],\"x\":" +
                   std::string(60, '[') + std::string(60, ']') + "}}";
  CHECK(readError(dir, stFile(ok, std::string(4, '\0'))) == "(no error)");
}

// Each check of the header parser at the byte where it fails: what JSON
// allows but a safetensors header must not have (a byte order mark, NUL
// bytes, leading zeros, fractions, literals, integers outside int64,
// duplicate keys at any depth) and a syntax error in every position.
TEST_CASE("read errors: every check of the header parser, at its byte") {
  TempDir dir;
  auto err = [&](const std::string& json) { return readError(dir, stFile(json, "")); };
  const std::string pre = "m.safetensors: malformed header: ";
  CHECK(err("\xef""\xbb""\xbf""{}") ==
        pre + "expected a value at byte 0 ('\\xef\\xbb\\xbf{}')");
  CHECK(err(std::string("{\"a\":\x00""}", 7)) ==
        pre + "expected a value at byte 5 ('\\x00}')");
  CHECK(err(std::string("{\"a\":1,\x00""}", 9)) ==
        pre + "expected a string key at byte 7 ('\\x00}')");
  CHECK(err(std::string("{\x00""}", 3)) ==
        pre + "expected a string key at byte 1 ('\\x00}')");
  CHECK(err(std::string("{\"a\"\x00"":1}", 8)) ==
        pre + "expected ':' after key 'a' at byte 4 ('\\x00:1}')");
  CHECK(err(std::string("{\"a\":1}\x00""x", 9)) ==
        pre + "unexpected text after the JSON object at byte 7 ('\\x00x')");
  CHECK(err(std::string("{\"a\":[1\x00""]}", 10)) ==
        pre + "expected ',' or ']' in an array at byte 7 ('\\x00]}')");
  CHECK(err("{\"a\":-01}") ==
        pre + "leading zeros are not allowed in JSON numbers at byte 6 ('01}')");
  CHECK(err("{\"a\":00}") ==
        pre + "leading zeros are not allowed in JSON numbers at byte 5 ('00}')");
  CHECK(err("{\"a\":0 1}") ==
        pre + "expected ',' or '}' in an object at byte 7 ('1}')");
  CHECK(err("{\"a\":[0-1]}") ==
        pre + "expected ',' or ']' in an array at byte 7 ('-1]}')");
  CHECK(err("{\"a\":[01.5]}") ==
        pre + "leading zeros are not allowed in JSON numbers at byte 6 ('01.5]}')");
  CHECK(err("{\"a\":1.}") ==
        pre + "only integers are allowed (no fractions or exponents) at byte 5 ('1.}')");
  CHECK(err("{\"a\":1e}") ==
        pre + "only integers are allowed (no fractions or exponents) at byte 5 ('1e}')");
  CHECK(err("{\"a\":1e+}") ==
        pre + "only integers are allowed (no fractions or exponents) at byte 5 ('1e+}')");
  CHECK(err("{\"a\":-x}") ==
        pre + "expected a digit at byte 6 ('x}')");
  CHECK(err("{\"a\":-}") ==
        pre + "expected a digit at byte 6 ('}')");
  CHECK(err("{\"a\":1e999}") ==
        pre + "only integers are allowed (no fractions or exponents) at byte 5 ('1e999}')");
  CHECK(err("{\"a\":-9223372036854775809}") ==
        pre + "integer 9223372036854775809 is out of range at byte 5 ('-9223372036854775809...')");
  CHECK(err("{\"a\":9223372036854775808}") ==
        pre + "integer 9223372036854775808 is out of range at byte 5 ('9223372036854775808}')");
  CHECK(err("{\"a\":9223372036854775807,\"b\":-9223372036854775808}") ==
        pre + "tensor 'a': expected an object, found an integer");
  CHECK(err("{\"a\":tru}") ==
        pre + "unsupported JSON value (a safetensors header holds only objects, arrays, strings and integers) at byte 5 ('tru}')");
  CHECK(err("{\"a\":falsy}") ==
        pre + "unsupported JSON value (a safetensors header holds only objects, arrays, strings and integers) at byte 5 ('falsy}')");
  CHECK(err("{\"a\":x}") ==
        pre + "expected a value at byte 5 ('x}')");
  CHECK(err("{tru}") ==
        pre + "expected a string key at byte 1 ('tru}')");
  CHECK(err("{\"a\" \"b}") ==
        pre + "expected ':' after key 'a' at byte 5 ('\"b}')");
  CHECK(err("{\"a\":1 \"b}") ==
        pre + "expected ',' or '}' in an object at byte 7 ('\"b}')");
  CHECK(err("{\"a\":1:2}") ==
        pre + "expected ',' or '}' in an object at byte 6 (':2}')");
  CHECK(err("{\"a\",1}") ==
        pre + "expected ':' after key 'a' at byte 4 (',1}')");
  CHECK(err("{\"a\":[1:2]}") ==
        pre + "expected ',' or ']' in an array at byte 7 (':2]}')");
  CHECK(err("{\"a\":[1,,2]}") ==
        pre + "expected a value at byte 8 (',2]}')");
  CHECK(err("{,}") ==
        pre + "expected a string key at byte 1 (',}')");
  CHECK(err("{\"a\":{\"b\":{}}, }") ==
        pre + "expected a string key at byte 15 ('}')");
  CHECK(err(" {} {}") ==
        pre + "unexpected text after the JSON object at byte 4 ('{}')");
  CHECK(err("{}]") ==
        pre + "unexpected text after the JSON object at byte 2 (']')");
  CHECK(err("[1,2] ") ==
        pre + "expected a JSON object, found an array");
  CHECK(err("\"x\" y") ==
        pre + "unexpected text after the JSON object at byte 4 ('y')");
  CHECK(err("{\"a\\u00zz\":1}") ==
        pre + "invalid \\u escape at byte 5 ('00zz\":1}')");
  CHECK(err("{\"a\\u0\":1}") ==
        pre + "invalid \\u escape at byte 5 ('0\":1}')");
  CHECK(err("{\"\\ud800\\u00\":1}") ==
        pre + "invalid \\u escape at byte 10 ('00\":1}')");
  CHECK(err("{\"\\ud800\\x\":1}") ==
        pre + "unpaired surrogate in a \\u escape at byte 2 ('\\ud800\\x\":1}')");
  CHECK(err("{\"\\ud800\":1}") ==
        pre + "unpaired surrogate in a \\u escape at byte 2 ('\\ud800\":1}')");
  CHECK(err("{\"\\ud800") ==
        pre + "unpaired surrogate in a \\u escape at byte 2 ('\\ud800')");
  CHECK(err("{\"\\ud800\\") ==
        pre + "unpaired surrogate in a \\u escape at byte 2 ('\\ud800\\')");
  CHECK(err("{\"a\":\"x\\") ==
        pre + "unterminated string at byte 5 ('\"x\\')");
  CHECK(err("{\"a\\") ==
        pre + "invalid escape in a string at byte 3 ('\\')");
  CHECK(err("{\"a\":\"\\u12") ==
        pre + "invalid \\u escape at byte 8 ('12')");
  CHECK(err("{\"k\":\"\\u0041\\n\\/\"}") ==
        pre + "tensor 'k': expected an object, found a string");
  CHECK(err("{\"a\":1,\"b\":{\"a\":2},\"a\":3}") ==
        pre + "duplicate key 'a' at byte 19 ('\"a\":3}')");
  CHECK(err("{\"b\":{\"x\":1,\"x\":2}}") ==
        pre + "duplicate key 'x' at byte 12 ('\"x\":2}}')");
  std::string deepObject;
  for (int i = 0; i < 70; ++i) deepObject += "{\"k\":";
  CHECK(err(deepObject) == pre + "nesting deeper than 64 levels at byte 320 ('{\"k\":{\"k\":{\"k\":{\"k\":...')");
  CHECK(err("{\"a\":" + std::string(400, '9') + "}") ==
        pre + "integer 999999999999999999999999999999... is out of range at byte 5 ('99999999999999999999...')");
}

TEST_CASE("read errors: header structure, dtypes, shapes and offsets") {
  TempDir dir;
  auto err = [&](const std::string& json, const std::string& data) { return readError(dir, stFile(json, data)); };
  auto entry = [](const std::string& name, const std::string& dtype, const std::string& shape, int64_t b, int64_t e) {
    return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" +
           std::to_string(b) + "," + std::to_string(e) + "]}";
  };
  const std::string m = "m.safetensors: ";
  std::string d8(8, '\0');

  CHECK(err("{\"__metadata__\":[]}", "") ==
        m + "malformed header: '__metadata__' must be an object, found an array");
  CHECK(err("{\"__metadata__\":{\"k\":1}}", "") ==
        m + "malformed header: '__metadata__' value for 'k' must be a string, found an integer");
  CHECK(err("{\"w\":3}", "") == m + "malformed header: tensor 'w': expected an object, found an integer");
  CHECK(err("{\"w\":{\"shape\":[],\"data_offsets\":[0,4]}}", "") == m + "malformed header: tensor 'w': missing 'dtype'");
  CHECK(err("{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", "") == m + "malformed header: tensor 'w': missing 'shape'");
  CHECK(err("{\"w\":{\"dtype\":\"F32\",\"shape\":[]}}", "") == m + "malformed header: tensor 'w': missing 'data_offsets'");
  CHECK(err("{\"w\":{\"dtype\":4,\"shape\":[],\"data_offsets\":[0,4]}}", "") ==
        m + "malformed header: tensor 'w': 'dtype' must be a string, found an integer");
  CHECK(err("{\"w\":{\"dtype\":\"F32\",\"shape\":{},\"data_offsets\":[0,4]}}", "") ==
        m + "malformed header: tensor 'w': 'shape' must be an array, found an object");
  CHECK(err("{" + entry("w", "F32", "[\"2\"]", 0, 8) + "}", d8) ==
        m + "malformed header: tensor 'w': 'shape' must hold integers, found a string");
  CHECK(err("{" + entry("w", "F32", "[-2]", 0, 8) + "}", d8) ==
        m + "malformed header: tensor 'w': negative dimension in shape [-2]");
  CHECK(err("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", d8) ==
        m + "malformed header: tensor 'w': 'data_offsets' must be an array of two integers [begin, end]");
  CHECK(err("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,9]}}", d8) ==
        m + "malformed header: tensor 'w': 'data_offsets' must be an array of two integers [begin, end]");

  // dtypes
  CHECK(err("{" + entry("w", "F16", "[4]", 0, 8) + "}", d8) ==
        m + "tensor 'w' has dtype 'F16', which GSL does not read (it reads F32, I32, BOOL and BF16)");
  CHECK(err("{" + entry("w", "f32", "[2]", 0, 8) + "}", d8) ==
        m + "tensor 'w' has dtype 'f32', which GSL does not read (it reads F32, I32, BOOL and BF16)");

  // shape and offsets inconsistent with the dtype
  CHECK(err("{" + entry("w", "F32", "[2,3]", 0, 20) + "}", std::string(20, '\0')) ==
        m + "tensor 'w': dtype F32 and shape [2, 3] need 24 bytes but data_offsets [0, 20] span 20");
  CHECK(err("{" + entry("w", "BOOL", "[]", 0, 4) + "}", std::string(4, '\0')) ==
        m + "tensor 'w': dtype BOOL and shape [] need 1 bytes but data_offsets [0, 4] span 4");
  CHECK(err("{" + entry("w", "F32", "[0,5]", 0, 4) + "}", std::string(4, '\0')) ==
        m + "tensor 'w': dtype F32 and shape [0, 5] need 0 bytes but data_offsets [0, 4] span 4");
  CHECK(err("{" + entry("w", "F32", "[4611686018427387904,4]", 0, 4) + "}", std::string(4, '\0')) ==
        m + "tensor 'w': shape [4611686018427387904, 4] is too large (its byte size overflows)");

  // offsets out of range
  CHECK(err("{" + entry("w", "F32", "[1]", 8, 4) + "}", d8) ==
        m + "tensor 'w': data_offsets [8, 4] are reversed (begin > end)");
  CHECK(err("{" + entry("w", "F32", "[1]", -4, 0) + "}", d8) ==
        m + "tensor 'w': negative data_offsets [-4, 0]");

  // overlaps and gaps
  CHECK(err("{" + entry("a", "F32", "[2]", 0, 8) + "," + entry("b", "F32", "[2]", 4, 12) + "}", std::string(12, '\0')) ==
        m + "tensors 'a' (bytes 0..8) and 'b' (bytes 4..12) overlap");
  CHECK(err("{" + entry("a", "F32", "[2]", 0, 8) + "," + entry("b", "F32", "[2]", 0, 8) + "}", d8) ==
        m + "tensors 'a' (bytes 0..8) and 'b' (bytes 0..8) overlap");
  CHECK(err("{" + entry("a", "F32", "[1]", 0, 4) + "," + entry("b", "F32", "[1]", 8, 12) + "}", std::string(12, '\0')) ==
        m + "bytes 4..8 of the data section belong to no tensor (between 'a' and 'b')");
  CHECK(err("{" + entry("b", "F32", "[1]", 4, 8) + "}", d8) ==
        m + "bytes 0..4 of the data section belong to no tensor (before 'b')");

  // truncated data
  std::string w0 = entry("w0", "F32", "[256]", 0, 1024), w1 = entry("w1", "F32", "[256]", 1024, 2048);
  CHECK(err("{" + w0 + "," + w1 + "}", std::string(1500, '\0')) ==
        m + "truncated: tensor 'w1' needs bytes 1024..2048 but the data section has 1500");
  CHECK(err("{" + entry("w", "I32", "[1]", 0, 4) + "}", "") ==
        m + "truncated: tensor 'w' needs bytes 0..4 but the data section has 0");
  CHECK(err("{" + entry("w", "I32", "[1]", 9223372036854775803LL, 9223372036854775807LL) + "}", "") ==
        m + "bytes 0..9223372036854775803 of the data section belong to no tensor (before 'w')");

  // trailing bytes
  CHECK(err("{" + entry("w", "I32", "[1]", 0, 4) + "}", d8) ==
        m + "4 unexpected bytes after the last tensor (the data section has 8 bytes, the tensors end at 4)");
  CHECK(err("{}", "x") == m + "1 unexpected bytes after the last tensor (the data section has 1 bytes, the "
                                 "tensors end at 0)");

  // zero-size tensors sit anywhere in the tiling
  CHECK(err("{" + entry("e", "F32", "[0]", 4, 4) + "," + entry("a", "F32", "[1]", 0, 4) + "," +
                entry("z", "BOOL", "[2,0]", 0, 0) + "," + entry("b", "F32", "[1]", 4, 8) + "}",
            d8) == "(no error)");
}

TEST_CASE("hostile input: every truncation and random corruption gives a CheckpointError or a valid read") {
  TempDir dir;
  std::string p = dir / "good.safetensors";
  writeSafetensors(p,
                   {{"w", Tensor::fromF32({3, 2}, {1, 2, 3, 4, 5, 6})},
                    {"i", Tensor::fromI32({2}, {-1, 1})},
                    {"b", boolTensor({2}, {0, 1})}},
                   {{"meta", "data \"x\""}});
  const std::string good = readFile(p);
  std::string q = dir / "bad.safetensors";
  int errors = 0, reads = 0;
  auto attempt = [&](const std::string& bytes) {
    writeFile(q, bytes);
    try {
      std::map<std::string, std::string> meta;
      auto ts = readSafetensors(q, &meta);
      ++reads;
    } catch (const CheckpointError& e) {
      ++errors;
      CHECK(std::string(e.what()).rfind(q + ": ", 0) == 0);
    }
  };
  for (size_t n = 0; n < good.size(); ++n) attempt(good.substr(0, n));
  CHECK(errors == (int)good.size());  // every proper prefix is an error
  uint64_t s = 0x9E3779B97F4A7C15ULL;
  auto next = [&]() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  };
  for (int it = 0; it < 3000; ++it) {
    std::string b = good;
    int flips = 1 + (int)(next() % 4);
    for (int k = 0; k < flips; ++k) {
      size_t at = (size_t)(next() % b.size());
      if (it % 3 == 0 && at < 8) at += 8;  // mostly corrupt the header text
      b[at] = (char)(next() & 0xff);
    }
    attempt(b);
  }
  CHECK(errors + reads == (int)good.size() + 3000);
  CHECK(reads > 0);  // flips inside float data still read
}

TEST_CASE("atomic writes: a failed or interrupted write leaves the existing checkpoint untouched") {
  TempDir dir;
  std::string p = dir / "ckpt.safetensors";
  std::vector<NamedTensor> old = {{"w", Tensor::fromF32({2}, {1.5f, 2.5f})}};
  writeSafetensors(p, old, {{"step", "1"}});
  const std::string oldBytes = readFile(p);
  std::vector<NamedTensor> big = {{"w", Tensor(TensorType{DType::F32, {1 << 18}})}};  // 1 MiB

  SUBCASE("the temp file cannot be created") {
    std::string tmp = p + ".tmp." + std::to_string((long)getpid());
    REQUIRE(mkdir(tmp.c_str(), 0755) == 0);  // a folder in the temp file's way
    try {
      writeSafetensors(p, big, {});
      FAIL("expected a CheckpointError");
    } catch (const CheckpointError& e) {
      CHECK(std::string(e.what()) ==
            p + ": cannot write: cannot create the temporary file '" + tmp + "': Is a directory");
    }
    CHECK(readFile(p) == oldBytes);
    rmdir(tmp.c_str());
  }

  SUBCASE("the folder is read-only (skipped as root, who may write anyway)") {
    if (geteuid() != 0) {
      REQUIRE(chmod(dir.path.c_str(), 0555) == 0);
      CHECK_THROWS_AS(writeSafetensors(p, big, {}), CheckpointError);
      chmod(dir.path.c_str(), 0755);
      CHECK(readFile(p) == oldBytes);
    }
  }

  SUBCASE("the folder does not exist") {
    std::string q = dir / "missing/ckpt.safetensors";
    try {
      writeSafetensors(q, old, {});
      FAIL("expected a CheckpointError");
    } catch (const CheckpointError& e) {
      CHECK(std::string(e.what()) == q + ": cannot write: No such file or directory");
    }
  }

  SUBCASE("the rename fails: the temp file is removed") {
    std::string q = dir / "adir";
    REQUIRE(mkdir(q.c_str(), 0755) == 0);
    writeFile(q + "/x", "keep");  // rename over a non-empty folder fails
    CHECK_THROWS_WITH_AS(writeSafetensors(q, old, {}), (q + ": cannot write: Is a directory").c_str(),
                         CheckpointError);
    CHECK(readFile(q + "/x") == "keep");
  }
  CHECK(readFile(p) == oldBytes);
}

TEST_CASE("atomic writes: a write error or a crash in the middle of writing leaves the old checkpoint") {
  TempDir dir;
  std::string p = dir / "ckpt.safetensors";
  std::vector<NamedTensor> old = {{"w", Tensor::fromF32({2}, {1.5f, 2.5f})}};
  writeSafetensors(p, old, {{"step", "1"}});
  const std::string oldBytes = readFile(p);
  std::vector<NamedTensor> big = {{"w", Tensor(TensorType{DType::F32, {1 << 18}})}};  // 1 MiB

  // A write error (file size limit, SIGXFSZ ignored) and a crash in the
  // middle of writing (SIGXFSZ kills the process), each in a child process.
  for (bool crash : {false, true}) {
    CAPTURE(crash);
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    std::cout.flush();
    std::fflush(nullptr);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      quietChild();
      close(fds[0]);
      std::signal(SIGXFSZ, crash ? SIG_DFL : SIG_IGN);
      struct rlimit core = {0, 0};
      setrlimit(RLIMIT_CORE, &core);
      struct rlimit fsize = {4096, 4096};
      setrlimit(RLIMIT_FSIZE, &fsize);
      std::string msg;
      try {
        writeSafetensors(p, big, {{"step", "2"}});
        msg = "no error";
      } catch (const CheckpointError& e) {
        msg = e.what();
      }
      ssize_t w = write(fds[1], msg.data(), msg.size());
      (void)w;
      _exit(3);
    }
    close(fds[1]);
    std::string msg;
    char buf[512];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof buf)) > 0) msg.append(buf, (size_t)n);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    std::string tmp = p + ".tmp." + std::to_string((long)pid);
    struct stat st;
    if (crash) {
      CHECK(WIFSIGNALED(status));
      CHECK(WTERMSIG(status) == SIGXFSZ);
      // The crash left a partial temp file, never a partial checkpoint.
      REQUIRE(stat(tmp.c_str(), &st) == 0);
      CHECK(st.st_size == 4096);
      CHECK_THROWS_AS(readSafetensors(tmp, nullptr), CheckpointError);
      unlink(tmp.c_str());
    } else {
      CHECK(WIFEXITED(status));
      CHECK(msg == p + ": cannot write: File too large");
      CHECK(stat(tmp.c_str(), &st) != 0);  // removed
    }
    CHECK(readFile(p) == oldBytes);
    std::map<std::string, std::string> meta;
    auto back = readSafetensors(p, &meta);
    REQUIRE(back.size() == 1);
    CHECK(sameBits(back[0].value, old[0].value));
    CHECK(meta.at("step") == "1");
  }
}

TEST_CASE("writeSafetensors aborts with an internal error on duplicate names") {
  TempDir dir;
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  std::cout.flush();
  std::fflush(nullptr);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    quietChild();
    std::signal(SIGABRT, SIG_DFL);  // undo doctest's handler: just abort
    struct rlimit core = {0, 0};
    setrlimit(RLIMIT_CORE, &core);
    dup2(fds[1], 2);
    close(fds[0]);
    writeSafetensors(dir / "d.safetensors", {{"w", Tensor::scalarF32(1)}, {"w", Tensor::scalarF32(2)}}, {});
    _exit(0);  // not reached
  }
  close(fds[1]);
  std::string err;
  char buf[512];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) err.append(buf, (size_t)n);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGABRT);
  CHECK(err.find("internal error: writeSafetensors: tensor name 'w' is used twice") != std::string::npos);
  CHECK(dir.list().empty());
}
