// The persistent compile cache (docs/compile-cache.md): object files of
// compiled rank programs on disk, shared by the runs, the ranks (threads or
// MPI processes) and the users of one cache directory.
//
// An entry is one file `<dir>/<key>.o`: a header (magic, format version,
// key, payload size, xxh3 checksum of the payload) and the object file. A
// read checks all of them, so a truncated, corrupt or foreign entry (one
// whose header names another key) is deleted and reported as a miss,
// never loaded. Writes go to a temporary file that is renamed into place,
// so readers see a whole entry or none. A per-key lock file (flock) lets
// one process compile while the others wait for its entry. The directory
// is kept under a size bound by deleting the least recently used entries
// (by mtime; a hit touches its entry).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gsl::backend {

// How `gsl run` configures the cache (set once by the tool before any
// compile; the library default is off, so tests and embedders write no
// files unless they ask to).
// "gsl 0.1" and the GNU build id of the binary that holds the code
// generator, so that a rebuilt gsl (a changed kernel, packing or pipeline)
// never loads objects an older build compiled. A binary linked without a
// build id gets the version string alone.
std::string defaultCacheVersion();

struct CompileCacheConfig {
  bool enabled = false;
  std::string dir;                       // created on first use
  uint64_t maxBytes = uint64_t(1) << 30;  // bound of the directory's entries
  std::string version = defaultCacheVersion();  // part of every key
};

void setCompileCacheConfig(const CompileCacheConfig& c);
const CompileCacheConfig& compileCacheConfig();

// $XDG_CACHE_HOME/gsl, else $HOME/.cache/gsl (empty when neither is set).
std::string defaultCompileCacheDir();

// Parses a size such as 1G, 512M, 4096 (bytes); nullopt when malformed.
std::optional<uint64_t> parseCacheSize(const std::string& s);

class ObjectStore {
 public:
  ObjectStore(std::string dir, uint64_t maxBytes);

  // What load found.
  enum class Found { Hit, Missing, Invalid };
  // The object stored under `key` (32 hex digits). An invalid entry is
  // deleted. A hit refreshes the entry's mtime (LRU).
  Found load(const std::string& key, std::string& object);

  // Stores `object` under `key` atomically, then evicts least recently
  // used entries while the directory holds more than maxBytes. Failures
  // (read-only or full disk) only lose the entry.
  void store(const std::string& key, std::string_view object);

  // Holds the exclusive per-key lock while alive (a no-op when the lock
  // file cannot be created).
  class Lock {
   public:
    explicit Lock(int fd) : fd_(fd) {}
    Lock(Lock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
    Lock(const Lock&) = delete;
    ~Lock();

   private:
    int fd_;
  };
  Lock lock(const std::string& key);

  void evict();

 private:
  std::string path(const std::string& key, const char* ext) const;
  bool ensureDir();
  std::string dir_;
  uint64_t maxBytes_;
};

}  // namespace gsl::backend
