// Memory sizes for `gsl run --max-memory`: parsing, printing, and the
// machine's available memory.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace gsl::runtime {

// "1000", "512K", "512M", "8G", "1T" (binary multiples: K = 1024; case
// does not matter; an optional trailing "B" or "iB", as in "8GiB"; a
// fraction is allowed with a suffix: "1.5G"). nullopt when malformed or
// over 2^64 - 1.
std::optional<uint64_t> parseByteSize(const std::string& s);

// A size for a message: "512 B", "1.5 KiB", "37.3 GiB" (binary units, one
// decimal above bytes).
std::string formatBytes(uint64_t bytes);

// MemAvailable from /proc/meminfo, in bytes; nullopt when it cannot be read.
std::optional<uint64_t> availableMemory();

}  // namespace gsl::runtime
