// The on-disk object store of the compile cache; see ObjectCache.h.
#include "backend/jit/ObjectCache.h"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <llvm/ADT/ArrayRef.h>
#include <llvm/Support/xxhash.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

namespace gsl::backend {

namespace fs = std::filesystem;

namespace {

CompileCacheConfig& config() {
  static CompileCacheConfig c;
  return c;
}

constexpr char kMagic[8] = {'G', 'S', 'L', 'O', 'B', 'J', '\0', '\1'};
constexpr size_t kKeyLen = 32;
constexpr size_t kHeader = sizeof kMagic + kKeyLen + 8 + 8;

uint64_t checksum(std::string_view bytes) {
  return llvm::xxh3_64bits(llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}

void putU64(std::string& s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s.push_back(char((v >> (8 * i)) & 0xff));
}

uint64_t getU64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t((unsigned char)p[i]) << (8 * i);
  return v;
}

}  // namespace

void setCompileCacheConfig(const CompileCacheConfig& c) { config() = c; }
const CompileCacheConfig& compileCacheConfig() { return config(); }

namespace {
// The NT_GNU_BUILD_ID note of the loaded object that contains `addr`, as
// hex; empty when that object has none.
std::string buildIdOf(const void* addr) {
  struct Search {
    uintptr_t addr;
    std::string hex;
  } s{reinterpret_cast<uintptr_t>(addr), {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        auto& s = *static_cast<Search*>(data);
        bool contains = false;
        for (int i = 0; i < info->dlpi_phnum && !contains; ++i) {
          const auto& ph = info->dlpi_phdr[i];
          uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
          contains = ph.p_type == PT_LOAD && s.addr >= lo && s.addr < lo + ph.p_memsz;
        }
        if (!contains) return 0;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const auto& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_NOTE) continue;
          const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
          const char* end = p + ph.p_memsz;
          while (p + sizeof(ElfW(Nhdr)) <= end) {
            const auto* n = reinterpret_cast<const ElfW(Nhdr)*>(p);
            const char* name = p + sizeof(ElfW(Nhdr));
            const char* desc = name + ((n->n_namesz + 3) & ~3u);
            if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0 &&
                desc + n->n_descsz <= end) {
              static const char* digits = "0123456789abcdef";
              for (uint32_t k = 0; k < n->n_descsz; ++k) {
                auto b = static_cast<unsigned char>(desc[k]);
                s.hex += digits[b >> 4];
                s.hex += digits[b & 15];
              }
              return 1;
            }
            p = desc + ((n->n_descsz + 3) & ~3u);
          }
        }
        return 1;
      },
      &s);
  return s.hex;
}
}  // namespace

std::string defaultCacheVersion() {
  static const std::string v = [] {
    std::string id = buildIdOf(reinterpret_cast<const void*>(&buildIdOf));
    return id.empty() ? std::string("gsl 0.1") : "gsl 0.1 build " + id;
  }();
  return v;
}

std::string defaultCompileCacheDir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/gsl";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/gsl";
  return "";
}

std::optional<uint64_t> parseCacheSize(const std::string& s) {
  if (s.empty()) return std::nullopt;
  size_t i = 0;
  uint64_t v = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    if (v > (UINT64_MAX - 9) / 10) return std::nullopt;
    v = v * 10 + uint64_t(s[i++] - '0');
  }
  if (i == 0) return std::nullopt;
  int shift = 0;
  if (i < s.size()) {
    switch (s[i++]) {
      case 'K': case 'k': shift = 10; break;
      case 'M': case 'm': shift = 20; break;
      case 'G': case 'g': shift = 30; break;
      default: return std::nullopt;
    }
  }
  if (i != s.size() || (shift && v > (UINT64_MAX >> shift))) return std::nullopt;
  return v << shift;
}

ObjectStore::ObjectStore(std::string dir, uint64_t maxBytes) : dir_(std::move(dir)), maxBytes_(maxBytes) {}

std::string ObjectStore::path(const std::string& key, const char* ext) const { return dir_ + "/" + key + ext; }

bool ObjectStore::ensureDir() {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  return fs::is_directory(dir_, ec);
}

ObjectStore::Found ObjectStore::load(const std::string& key, std::string& object) {
  const std::string p = path(key, ".o");
  std::ifstream in(p, std::ios::binary);
  if (!in) return Found::Missing;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  bool ok = bytes.size() >= kHeader && std::memcmp(bytes.data(), kMagic, sizeof kMagic) == 0 &&
            key.size() == kKeyLen && bytes.compare(sizeof kMagic, kKeyLen, key) == 0;
  if (ok) {
    const char* h = bytes.data() + sizeof kMagic + kKeyLen;
    uint64_t size = getU64(h), sum = getU64(h + 8);
    std::string_view payload(bytes.data() + kHeader, bytes.size() - kHeader);
    ok = size == payload.size() && checksum(payload) == sum;
    if (ok) {
      object.assign(payload);
      ::utimensat(AT_FDCWD, p.c_str(), nullptr, 0);  // most recently used
      return Found::Hit;
    }
  }
  std::error_code ec;
  fs::remove(p, ec);
  return Found::Invalid;
}

void ObjectStore::store(const std::string& key, std::string_view object) {
  if (!ensureDir()) return;
  std::string bytes(kMagic, sizeof kMagic);
  bytes += key;
  putU64(bytes, object.size());
  putU64(bytes, checksum(object));
  bytes.append(object);
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = path(key, "") + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return;
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + off, bytes.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    off += size_t(n);
  }
  bool ok = off == bytes.size() && ::fsync(fd) == 0;
  ok = ::close(fd) == 0 && ok;
  if (!ok || ::rename(tmp.c_str(), path(key, ".o").c_str()) != 0) {
    ::unlink(tmp.c_str());
    return;
  }
  evict();
}

ObjectStore::Lock::~Lock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

ObjectStore::Lock ObjectStore::lock(const std::string& key) {
  if (!ensureDir()) return Lock(-1);
  int fd = ::open(path(key, ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Lock(-1);
  while (::flock(fd, LOCK_EX) != 0 && errno == EINTR) {
  }
  return Lock(fd);
}

void ObjectStore::evict() {
  struct Entry {
    fs::path path;
    fs::file_time_type mtime;
    uint64_t size;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() != ".o" || !it->is_regular_file(ec)) continue;
    std::error_code e1, e2;
    uint64_t size = it->file_size(e1);
    auto mtime = it->last_write_time(e2);
    if (e1 || e2) continue;
    entries.push_back({it->path(), mtime, size});
    total += size;
  }
  if (total <= maxBytes_) return;
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.mtime < b.mtime; });
  for (const Entry& e : entries) {
    if (total <= maxBytes_) break;
    std::error_code e1;
    if (fs::remove(e.path, e1)) total -= e.size;
    // The entry's lock file goes too when nobody holds it (a racing
    // process that still opens the old file only compiles once more).
    fs::path lockPath = e.path;
    lockPath.replace_extension(".lock");
    int fd = ::open(lockPath.c_str(), O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
      if (::flock(fd, LOCK_EX | LOCK_NB) == 0) ::unlink(lockPath.c_str());
      ::close(fd);
    }
  }
}

}  // namespace gsl::backend
