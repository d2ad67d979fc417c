// The on-disk object store of the compile cache (backend/jit/ObjectCache.h):
// round trip, invalid entries (corrupt, truncated, foreign) deleted and
// reported, the size bound, size parsing. The whole cache through `gsl
// run` is tested by tests/cache/cache_test.sh.
#include <doctest/doctest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "backend/jit/ObjectCache.h"

using namespace gsl::backend;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/gsl-objcache-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
};

const std::string kKeyA = "0123456789abcdef0123456789abcdef";
const std::string kKeyB = "fedcba9876543210fedcba9876543210";

std::string readAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void writeAll(const fs::path& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << s;
}

}  // namespace

TEST_CASE("object store: a stored object loads back; a missing one is a miss") {
  TempDir d;
  ObjectStore st(d.path.string() + "/sub", 1 << 20);
  std::string obj;
  CHECK(st.load(kKeyA, obj) == ObjectStore::Found::Missing);
  const std::string payload("\x7f" "ELF some object bytes\0with a zero", 34);
  st.store(kKeyA, payload);
  CHECK(st.load(kKeyA, obj) == ObjectStore::Found::Hit);
  CHECK(obj == payload);
  CHECK(st.load(kKeyB, obj) == ObjectStore::Found::Missing);
}

TEST_CASE("object store: corrupt, truncated and foreign entries are invalid and deleted") {
  TempDir d;
  ObjectStore st(d.path.string(), 1 << 20);
  const std::string payload(1000, 'x');
  const fs::path a = d.path / (kKeyA + ".o"), b = d.path / (kKeyB + ".o");
  std::string obj;

  st.store(kKeyA, payload);
  std::string bytes = readAll(a);
  bytes[bytes.size() / 2] ^= 0x5a;
  writeAll(a, bytes);
  CHECK(st.load(kKeyA, obj) == ObjectStore::Found::Invalid);
  CHECK_FALSE(fs::exists(a));

  st.store(kKeyA, payload);
  bytes = readAll(a);
  writeAll(a, bytes.substr(0, bytes.size() - 1));
  CHECK(st.load(kKeyA, obj) == ObjectStore::Found::Invalid);
  writeAll(a, bytes.substr(0, 20));  // shorter than the header
  CHECK(st.load(kKeyA, obj) == ObjectStore::Found::Invalid);

  st.store(kKeyA, payload);
  fs::copy_file(a, b);  // B's name, A's header
  CHECK(st.load(kKeyB, obj) == ObjectStore::Found::Invalid);
  CHECK(st.load(kKeyA, obj) == ObjectStore::Found::Hit);
  CHECK(obj == payload);
}

TEST_CASE("object store: the least recently used entries go over the bound") {
  TempDir d;
  const std::string payload(1000, 'y');
  ObjectStore st(d.path.string(), 2500);  // two entries (header included) fit
  std::string keys[3] = {kKeyA, kKeyB, "00000000000000000000000000000001"};
  st.store(keys[0], payload);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  st.store(keys[1], payload);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::string obj;
  REQUIRE(st.load(keys[0], obj) == ObjectStore::Found::Hit);  // now the newest
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  st.store(keys[2], payload);
  CHECK(st.load(keys[1], obj) == ObjectStore::Found::Missing);
  CHECK(st.load(keys[0], obj) == ObjectStore::Found::Hit);
  CHECK(st.load(keys[2], obj) == ObjectStore::Found::Hit);
}

TEST_CASE("object store: cache sizes") {
  CHECK(parseCacheSize("4096") == 4096u);
  CHECK(parseCacheSize("3K") == 3072u);
  CHECK(parseCacheSize("512M") == 512ull << 20);
  CHECK(parseCacheSize("1G") == 1ull << 30);
  CHECK_FALSE(parseCacheSize(""));
  CHECK_FALSE(parseCacheSize("G"));
  CHECK_FALSE(parseCacheSize("1T"));
  CHECK_FALSE(parseCacheSize("12MB"));
  CHECK_FALSE(parseCacheSize("99999999999999999999"));
}

TEST_CASE("object store: the default version names this binary's build id") {
  // The test binary is linked like gsl (with a GNU build id), so the
  // version carries it: a rebuilt binary keys its objects apart.
  const std::string v = gsl::backend::defaultCacheVersion();
  const std::string prefix = "gsl 0.1 build ";
  REQUIRE(v.rfind(prefix, 0) == 0);
  const std::string id = v.substr(prefix.size());
  CHECK(id.size() >= 16);
  CHECK(id.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(gsl::backend::CompileCacheConfig{}.version == v);
}
