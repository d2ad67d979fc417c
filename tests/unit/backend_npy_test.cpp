// backend/Npy: round trips, numpy's exact header layout, error messages.
#include <doctest/doctest.h>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>
#include <string>

#include "backend/Npy.h"

using namespace gsl::backend;

namespace {

// A fresh temp dir per test case, removed (with its files) at the end.
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/gsl_npy_test.XXXXXX";
    char* p = mkdtemp(tmpl);
    REQUIRE(p);
    path = p;
  }
  ~TempDir() { removeTree(path); }
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

std::string le16(uint32_t v) { return std::string{(char)(v & 0xff), (char)((v >> 8) & 0xff)}; }
std::string le32(uint32_t v) {
  return std::string{(char)(v & 0xff), (char)((v >> 8) & 0xff), (char)((v >> 16) & 0xff),
                     (char)((v >> 24) & 0xff)};
}

// A .npy v1.0 file with the given header dict text (padded as numpy does) and data.
std::string npyV1(const std::string& dict, const std::string& data) {
  std::string h = dict;
  while ((10 + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  return std::string("\x93NUMPY\x01\x00", 8) + le16((uint32_t)h.size()) + h + data;
}

std::string errorOf(const std::string& path) {
  try {
    readNpy(path);
  } catch (const NpyError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string floats(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

}  // namespace

TEST_CASE("npy: round trip of every dtype and a scalar") {
  TempDir dir;
  Tensor f = Tensor::fromF32({2, 3}, {1.5f, -2.0f, 0.0f, 3.25f, 1e-30f, -7.0f});
  Tensor i = Tensor::fromI32({4}, {1, -2, 2147483647, -2147483647 - 1});
  Tensor b(TensorType{DType::Bool, {2, 2}});
  b.i32()[0] = 1;
  b.i32()[3] = 1;
  Tensor s = Tensor::scalarF32(42.5f);
  Tensor e(TensorType{DType::F32, {0, 3}});
  Tensor r3 = Tensor::fromI32({1, 2, 1}, {5, 6});
  for (auto& [name, t] : std::vector<std::pair<std::string, Tensor>>{
           {"f.npy", f}, {"i.npy", i}, {"b.npy", b}, {"s.npy", s}, {"e.npy", e}, {"r3.npy", r3}}) {
    CAPTURE(name);
    writeNpy(dir / name, t);
    Tensor u = readNpy(dir / name);
    CHECK(u.type() == t.type());
    REQUIRE(u.size() == t.size());
    for (int64_t k = 0; k < t.size(); ++k) CHECK(u.at(k) == t.at(k));
    std::string bytes = readFile(dir / name);
    // Data starts at a multiple of 64 bytes, the header ends with '\n'.
    size_t hl = (unsigned char)bytes[8] | ((unsigned char)bytes[9] << 8);
    CHECK((10 + hl) % 64 == 0);
    CHECK(bytes[10 + hl - 1] == '\n');
    CHECK(bytes.size() == 10 + hl + (size_t)t.size() * (t.dtype() == DType::Bool ? 1 : 4));
  }
  // No temp files are left behind.
  CHECK(dir.list().size() == 6);
  // Overwriting an existing file works (rename replaces it).
  writeNpy(dir / "f.npy", s);
  CHECK(readNpy(dir / "f.npy").item() == 42.5);
}

TEST_CASE("npy: byte-exact header of a small file") {
  TempDir dir;
  Tensor f = Tensor::fromF32({2, 3}, {1, 2, 3, 4, 5, 6});
  writeNpy(dir / "x.npy", f);
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  std::string header = dict + std::string(128 - 10 - dict.size() - 1, ' ') + "\n";
  REQUIRE(header.size() == 118);
  std::string expected = std::string("\x93NUMPY\x01\x00", 8) + std::string("\x76\x00", 2) + header +
                         floats({1, 2, 3, 4, 5, 6});
  CHECK(readFile(dir / "x.npy") == expected);

  // Shapes (5,) and () and bool's descr, as numpy writes them.
  Tensor v = Tensor::fromI32({5}, {1, 2, 3, 4, 5});
  writeNpy(dir / "v.npy", v);
  CHECK(readFile(dir / "v.npy").substr(10, 60) ==
        "{'descr': '<i4', 'fortran_order': False, 'shape': (5,), }   ");
  writeNpy(dir / "s.npy", Tensor::scalarBool(true));
  std::string sb = readFile(dir / "s.npy");
  CHECK(sb.substr(10, 58) == "{'descr': '|b1', 'fortran_order': False, 'shape': (), }   ");
  CHECK(sb.size() == 129);
  CHECK(sb.back() == '\x01');
}

TEST_CASE("npy: reads versions 2.0 and 3.0 and numpy's variants") {
  TempDir dir;
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n";
  for (char major : {'\x02', '\x03'}) {
    std::string bytes = std::string("\x93NUMPY", 6) + major + '\0' + le32((uint32_t)dict.size()) + dict +
                        floats({1.0f, -1.0f});
    writeFile(dir / "v.npy", bytes);
    Tensor t = readNpy(dir / "v.npy");
    CHECK(t.shape() == gsl::ir::Shape{2});
    CHECK(t.at(1) == -1.0);
  }
  // Keys in another order, double quotes, no trailing comma, Python 2 longs.
  writeFile(dir / "w.npy", npyV1("{\"shape\": (1L, 2L), \"fortran_order\": False, \"descr\": \"<i4\"}",
                                 le32(7) + le32(8)));
  Tensor w = readNpy(dir / "w.npy");
  CHECK(w.type() == TensorType{DType::I32, {1, 2}});
  CHECK(w.at(1) == 8);
  // Bool bytes other than 0/1 read as true.
  writeFile(dir / "b.npy", npyV1("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }",
                                 std::string("\x00\x01\x07", 3)));
  Tensor b = readNpy(dir / "b.npy");
  CHECK(b.dtype() == DType::Bool);
  CHECK(b.at(0) == 0);
  CHECK(b.at(1) == 1);
  CHECK(b.at(2) == 1);
}

TEST_CASE("npy: error messages") {
  TempDir dir;
  const std::string p = dir / "x.npy";
  auto expectErr = [&](const std::string& bytes, const std::string& what) {
    writeFile(p, bytes);
    CHECK(errorOf(p) == p + ": " + what);
  };
  const std::string okData = floats({1, 2, 3, 4, 5, 6});
  CHECK(errorOf(dir / "missing.npy") == dir / "missing.npy: no such file");
  CHECK(errorOf(dir.path) == dir.path + ": is a directory");
  CHECK(errorOf("/dev/null") == "/dev/null: not a regular file");
  expectErr("hello world, not numpy", "not a .npy file (bad magic)");
  expectErr("", "not a .npy file (bad magic)");
  expectErr(npyV1("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", std::string(16, '\0')),
            "unsupported dtype '<f8' (GSL reads f32 '<f4', i32 '<i4' and bool '|b1')");
  expectErr(npyV1("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", std::string(8, '\0')),
            "unsupported dtype '>f4' (GSL reads f32 '<f4', i32 '<i4' and bool '|b1')");
  expectErr(npyV1("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", okData),
            "Fortran-order arrays are not supported");
  expectErr(npyV1("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", okData.substr(0, 8)),
            "truncated: header says 24 bytes of data, file has 8");
  expectErr(std::string("\x93NUMPY\x02\x00", 8) + le32(0xffffffffu) + "{}",
            "header length 4294967295 is larger than the file");
  expectErr(std::string("\x93NUMPY\x01\x00", 8) + le16(500) + "{'descr': '<f4'",
            "header length 500 is larger than the file");
  expectErr(std::string("\x93NUMPY\x01", 7), "truncated: the file ends inside the .npy preamble");
  expectErr(std::string("\x93NUMPY\x09\x00", 8) + le16(2) + "{}",
            "unsupported .npy format version 9.0 (GSL reads 1.0, 2.0 and 3.0)");
  expectErr(npyV1("{'descr': '<f4', 'fortran_order': False}", ""), "malformed header: missing 'shape'");
  expectErr(npyV1("{'descr': '<f4', 'fortran_order': False, 'shape': 6}", okData),
            "malformed header: expected a tuple for 'shape' at '6}'");
  expectErr(npyV1("{'descr': '<f4', 'fortran_order': Nope, 'shape': (6,)}", okData),
            "malformed header: expected True or False at 'Nope, 'shape': (6,)}'");
  expectErr(npyV1("not a dict", ""), "malformed header: expected '{' at the start of 'not a dict'");
  expectErr(npyV1("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", okData),
            "malformed header: negative dimension in shape (2, -3)");
  expectErr(npyV1("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", okData),
            "shape (4294967296, 4294967296) is too large (its byte size overflows 64 bits)");
  expectErr(npyV1("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", okData),
            "malformed header: dimension 99999999999999999999 is too large");
  expectErr(npyV1("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000,), }", okData),
            "truncated: header says 4000000000000 bytes of data, file has 24");
  expectErr(npyV1("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", okData),
            "unsupported dtype '[('a', '<f4')]' (GSL reads f32 '<f4', i32 '<i4' and bool '|b1')");

  // Writing into a folder that does not exist; onto a directory.
  Tensor t = Tensor::scalarF32(1);
  std::string out = dir / "out/y.npy";
  std::string werr;
  try {
    writeNpy(out, t);
  } catch (const NpyError& e) {
    werr = e.what();
  }
  CHECK(werr == out + ": cannot write: No such file or directory");
  mkdir((dir / "d").c_str(), 0755);
  werr.clear();
  try {
    writeNpy(dir / "d", t);
  } catch (const NpyError& e) {
    werr = e.what();
  }
  CHECK(werr == dir / "d: cannot write: Is a directory");
  // A failed write leaves no temp file behind.
  for (const auto& n : dir.list()) CHECK(n.find(".tmp.") == std::string::npos);
}

TEST_CASE("npy: hostile inputs never crash") {
  TempDir dir;
  const std::string p = dir / "h.npy";
  std::string base = npyV1("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", floats({1, 2, 3, 4, 5, 6}));
  uint64_t s = 88172645463325252ULL;
  auto rnd = [&]() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  };
  int ok = 0, errors = 0;
  for (size_t n = 0; n <= base.size(); ++n) {
    writeFile(p, base.substr(0, n));
    try {
      readNpy(p);
      ++ok;
    } catch (const NpyError&) {
      ++errors;
    }
  }
  for (int iter = 0; iter < 2000; ++iter) {
    std::string t = base;
    for (int e = 0; e < 3; ++e) t[rnd() % t.size()] = (char)(rnd() & 0xff);
    writeFile(p, t);
    try {
      Tensor r = readNpy(p);
      ++ok;
      CHECK(r.size() <= 24);
    } catch (const NpyError& e) {
      ++errors;
      CHECK(std::string(e.what()).rfind(p + ": ", 0) == 0);
    }
  }
  CHECK(ok > 0);
  CHECK(errors > 0);
}

TEST_CASE("npy: float64 and int64 converted when asked, with an error naming the index of a value that does not fit") {
  TempDir dir;
  auto f64 = [](std::initializer_list<double> v) {
    std::string s(v.size() * 8, '\0');
    std::memcpy(s.data(), std::data(v), s.size());
    return s;
  };
  auto i64 = [](std::initializer_list<int64_t> v) {
    std::string s(v.size() * 8, '\0');
    std::memcpy(s.data(), std::data(v), s.size());
    return s;
  };
  const std::string p = dir / "d.npy";
  writeFile(p, npyV1("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }", f64({0.1, -2.5, 1e30, -0.0})));
  CHECK(errorOf(p) == p + ": unsupported dtype '<f8' (GSL reads f32 '<f4', i32 '<i4' and bool '|b1')");
  Tensor d = readNpy(p, true);
  CHECK(d.type() == TensorType{DType::F32, {2, 2}});
  CHECK(d.f32()[0] == 0.1f);  // rounded once, to nearest
  CHECK(d.f32()[1] == -2.5f);
  CHECK(d.f32()[2] == 1e30f);
  writeFile(p, npyV1("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", f64({1.0, 2.0, -1e300})));
  try {
    readNpy(p, true);
    FAIL("no error");
  } catch (const NpyError& e) {
    CHECK(std::string(e.what()) == p + ": float64 value -1e+300 at index 2 does not fit in f32");
  }
  const std::string q = dir / "l.npy";
  writeFile(q, npyV1("{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", i64({3, -2147483648LL, 2147483647LL})));
  Tensor l = readNpy(q, true);
  CHECK(l.type() == TensorType{DType::I32, {3}});
  CHECK(l.i32()[0] == 3);
  CHECK(l.i32()[1] == -2147483647 - 1);
  writeFile(q, npyV1("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", i64({0, 2147483648LL})));
  try {
    readNpy(q, true);
    FAIL("no error");
  } catch (const NpyError& e) {
    CHECK(std::string(e.what()) == q + ": int64 value 2147483648 at index 1 does not fit in i32");
  }
  // A dtype neither read nor converted says both.
  writeFile(q, npyV1("{'descr': '<i2', 'fortran_order': False, 'shape': (2,), }", std::string(4, '\0')));
  try {
    readNpy(q, true);
    FAIL("no error");
  } catch (const NpyError& e) {
    CHECK(std::string(e.what()) ==
          q + ": unsupported dtype '<i2' (GSL reads f32 '<f4', i32 '<i4' and bool '|b1', and converts float64 '<f8' and int64 '<i8')");
  }
}
