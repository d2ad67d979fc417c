#include "runtime/Checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>
#include <string_view>
#include <thread>
#include <utility>

#include "runtime/TestFaults.h"
#include "support/Diagnostics.h"
#include "support/Interrupt.h"
#include "support/Text.h"

namespace gsl::runtime {

using backend::DType;
using backend::Tensor;

namespace {

constexpr uint64_t kMaxHeaderSize = 100000000;  // the reference's MAX_HEADER_SIZE
constexpr int kMaxDepth = 64;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw CheckpointError(path + ": " + what);
}

std::string errnoText(int err) { return std::strerror(err); }


std::string quoted(std::string_view s) { return "'" + excerpt(s) + "'"; }

// Index of the first byte that is not part of well-formed UTF-8 (RFC 3629:
// no overlong forms, no surrogates, nothing above U+10FFFF), or npos.
size_t invalidUtf8At(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = (unsigned char)s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    unsigned char lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) len = 2;
    else if (c == 0xe0) len = 3, lo = 0xa0;
    else if (c >= 0xe1 && c <= 0xec) len = 3;
    else if (c == 0xed) len = 3, hi = 0x9f;
    else if (c >= 0xee && c <= 0xef) len = 3;
    else if (c == 0xf0) len = 4, lo = 0x90;
    else if (c >= 0xf1 && c <= 0xf3) len = 4;
    else if (c == 0xf4) len = 4, hi = 0x8f;
    else return i;
    if (i + len > s.size()) return i;
    unsigned char c1 = (unsigned char)s[i + 1];
    if (c1 < lo || c1 > hi) return i;
    for (size_t k = 2; k < len; ++k) {
      unsigned char ck = (unsigned char)s[i + k];
      if (ck < 0x80 || ck > 0xbf) return i;
    }
    i += len;
  }
  return std::string_view::npos;
}

// ------------------------------------------------------------------ JSON

struct JValue {
  enum Kind { Object, Array, String, Integer } kind = Integer;
  std::string str;
  int64_t num = 0;
  size_t pos = 0;  // byte offset in the header, for messages
  std::vector<std::pair<std::string, JValue>> members;  // Object, in order
  std::vector<JValue> items;                             // Array
};

const char* kindName(JValue::Kind k) {
  switch (k) {
    case JValue::Object: return "an object";
    case JValue::Array: return "an array";
    case JValue::String: return "a string";
    case JValue::Integer: return "an integer";
  }
  return "a value";
}

// Strict JSON for the subset safetensors headers use. Errors throw
// CheckpointError("<path>: malformed header: ... at byte K").
class JsonParser {
 public:
  JsonParser(const std::string& path, std::string_view s) : path_(path), s_(s) {}

  JValue parseDocument() {
    ws();
    JValue v = value(0);
    ws();
    if (p_ != s_.size()) bad("unexpected text after the JSON object");
    return v;
  }

 private:
  const std::string& path_;
  std::string_view s_;
  size_t p_ = 0;

  [[noreturn]] void bad(const std::string& m) { badAt(m, p_); }
  [[noreturn]] void badAt(const std::string& m, size_t at) {
    std::string where = " at the end of the header";
    if (at < s_.size()) {
      std::string_view rest = s_.substr(at);
      while (!rest.empty() && rest.back() == ' ') rest.remove_suffix(1);  // the padding
      where = " at byte " + std::to_string(at);
      if (!rest.empty()) where += " ('" + excerpt(rest, 20) + "')";
    }
    fail(path_, "malformed header: " + m + where);
  }
  void ws() {
    while (p_ < s_.size() && (s_[p_] == ' ' || s_[p_] == '\t' || s_[p_] == '\n' || s_[p_] == '\r'))
      ++p_;
  }
  bool peek(char c) const { return p_ < s_.size() && s_[p_] == c; }

  JValue value(int depth) {
    if (p_ >= s_.size()) bad("expected a value");
    char c = s_[p_];
    if (c == '{' || c == '[') {
      if (depth >= kMaxDepth) bad("nesting deeper than " + std::to_string(kMaxDepth) + " levels");
      return c == '{' ? object(depth) : array(depth);
    }
    if (c == '"') {
      JValue v;
      v.kind = JValue::String;
      v.pos = p_;
      v.str = string();
      return v;
    }
    if (c == '-' || (c >= '0' && c <= '9')) return integer();
    if (c == 't' || c == 'f' || c == 'n')
      bad("unsupported JSON value (a safetensors header holds only objects, arrays, strings and "
          "integers)");
    bad("expected a value");
  }

  JValue object(int depth) {
    JValue v;
    v.kind = JValue::Object;
    v.pos = p_;
    ++p_;  // '{'
    ws();
    if (peek('}')) {
      ++p_;
      return v;
    }
    std::set<std::string> seen;
    for (;;) {
      ws();
      if (!peek('"')) bad("expected a string key");
      size_t keyPos = p_;
      std::string key = string();
      if (!seen.insert(key).second) badAt("duplicate key " + quoted(key), keyPos);
      ws();
      if (!peek(':')) bad("expected ':' after key " + quoted(key));
      ++p_;
      ws();
      JValue member = value(depth + 1);
      v.members.emplace_back(std::move(key), std::move(member));
      ws();
      if (peek(',')) {
        ++p_;
        continue;
      }
      if (peek('}')) {
        ++p_;
        return v;
      }
      bad("expected ',' or '}' in an object");
    }
  }

  JValue array(int depth) {
    JValue v;
    v.kind = JValue::Array;
    v.pos = p_;
    ++p_;  // '['
    ws();
    if (peek(']')) {
      ++p_;
      return v;
    }
    for (;;) {
      ws();
      v.items.push_back(value(depth + 1));
      ws();
      if (peek(',')) {
        ++p_;
        continue;
      }
      if (peek(']')) {
        ++p_;
        return v;
      }
      bad("expected ',' or ']' in an array");
    }
  }

  JValue integer() {
    JValue v;
    v.kind = JValue::Integer;
    v.pos = p_;
    bool neg = false;
    if (peek('-')) {
      neg = true;
      ++p_;
    }
    if (p_ >= s_.size() || s_[p_] < '0' || s_[p_] > '9') bad("expected a digit");
    size_t start = p_;
    if (s_[p_] == '0' && p_ + 1 < s_.size() && s_[p_ + 1] >= '0' && s_[p_ + 1] <= '9')
      bad("leading zeros are not allowed in JSON numbers");
    uint64_t mag = 0;
    bool overflow = false;
    const uint64_t limit = neg ? (uint64_t)std::numeric_limits<int64_t>::max() + 1
                               : (uint64_t)std::numeric_limits<int64_t>::max();
    while (p_ < s_.size() && s_[p_] >= '0' && s_[p_] <= '9') {
      uint64_t d = (uint64_t)(s_[p_] - '0');
      if (mag > (limit - d) / 10) overflow = true;
      else mag = mag * 10 + d;
      ++p_;
    }
    if (peek('.') || peek('e') || peek('E'))
      badAt("only integers are allowed (no fractions or exponents)", v.pos);
    if (overflow)
      badAt("integer " + excerpt(s_.substr(start, p_ - start), 30) + " is out of range", v.pos);
    v.num = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    return v;
  }

  static int hexDigit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  uint32_t hex4() {
    if (s_.size() - p_ < 4) bad("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      int d = hexDigit(s_[p_ + i]);
      if (d < 0) bad("invalid \\u escape");
      v = v * 16 + (uint32_t)d;
    }
    p_ += 4;
    return v;
  }
  static void appendUtf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += (char)cp;
    } else if (cp < 0x800) {
      out += (char)(0xc0 | (cp >> 6));
      out += (char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += (char)(0xe0 | (cp >> 12));
      out += (char)(0x80 | ((cp >> 6) & 0x3f));
      out += (char)(0x80 | (cp & 0x3f));
    } else {
      out += (char)(0xf0 | (cp >> 18));
      out += (char)(0x80 | ((cp >> 12) & 0x3f));
      out += (char)(0x80 | ((cp >> 6) & 0x3f));
      out += (char)(0x80 | (cp & 0x3f));
    }
  }

  // The header was checked to be UTF-8 already, so raw bytes are copied.
  std::string string() {
    size_t start = p_;
    ++p_;  // '"'
    std::string out;
    for (;;) {
      if (p_ >= s_.size()) badAt("unterminated string", start);
      unsigned char c = (unsigned char)s_[p_];
      if (c == '"') {
        ++p_;
        return out;
      }
      if (c < 0x20) bad("control character in a string (must be escaped)");
      if (c != '\\') {
        out += (char)c;
        ++p_;
        continue;
      }
      ++p_;
      if (p_ >= s_.size()) badAt("unterminated string", start);
      char e = s_[p_];
      switch (e) {
        case '"': out += '"'; ++p_; break;
        case '\\': out += '\\'; ++p_; break;
        case '/': out += '/'; ++p_; break;
        case 'b': out += '\b'; ++p_; break;
        case 'f': out += '\f'; ++p_; break;
        case 'n': out += '\n'; ++p_; break;
        case 'r': out += '\r'; ++p_; break;
        case 't': out += '\t'; ++p_; break;
        case 'u': {
          size_t escPos = p_ - 1;
          ++p_;
          uint32_t cp = hex4();
          if (cp >= 0xd800 && cp <= 0xdbff) {
            if (s_.size() - p_ < 2 || s_[p_] != '\\' || s_[p_ + 1] != 'u')
              badAt("unpaired surrogate in a \\u escape", escPos);
            p_ += 2;
            uint32_t lo = hex4();
            if (lo < 0xdc00 || lo > 0xdfff) badAt("unpaired surrogate in a \\u escape", escPos);
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          } else if (cp >= 0xdc00 && cp <= 0xdfff) {
            badAt("unpaired surrogate in a \\u escape", escPos);
          }
          appendUtf8(out, cp);
          break;
        }
        default:
          --p_;
          bad("invalid escape in a string");
      }
    }
  }
};

// ------------------------------------------------------------------ dtypes

struct DTypeInfo {
  const char* name;
  DType dtype;
  uint64_t size;
};
constexpr DTypeInfo kDTypes[] = {
    {"F32", DType::F32, 4},
    {"I32", DType::I32, 4},
    {"BOOL", DType::Bool, 1},
};
const DTypeInfo& infoOf(DType d) {
  for (const auto& i : kDTypes)
    if (i.dtype == d) return i;
  GSL_ASSERT(false, "checkpoint: unknown dtype");
  return kDTypes[0];
}

std::string shapeText(const std::vector<int64_t>& s) { return ir::shapeStr(s); }

// JSON string literal the way serde_json writes it: escapes '"', '\\' and
// control characters (\b \f \n \r \t, others \u00xx); everything else as is.
void appendJsonString(std::string& out, std::string_view s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += (char)c;
        }
    }
  }
  out += '"';
}

// Writes all of [data, data + n) to fd. Returns 0 or an errno value.
int writeAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, data, std::min(n, (size_t)1 << 30));
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (w == 0) return EIO;
    data += w;
    n -= (size_t)w;
  }
  return 0;
}

// Reads exactly n bytes at `offset`. Returns the bytes read (< n at end of
// file); throws on a read error.
size_t readAt(const std::string& path, int fd, char* dst, size_t n, uint64_t offset) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::pread(fd, dst + got, std::min(n - got, (size_t)1 << 30), (off_t)(offset + got));
    if (r < 0) {
      if (errno == EINTR) continue;
      fail(path, "cannot read: " + errnoText(errno));
    }
    if (r == 0) break;
    got += (size_t)r;
  }
  return got;
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string folderOf(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

// ------------------------------------------------------------------ write

void writeSafetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::set<std::string> names;
  for (const NamedTensor& nt : tensors) {
    GSL_ASSERT(nt.name != "__metadata__",
               "writeSafetensors: '__metadata__' is reserved and cannot name a tensor");
    GSL_ASSERT(names.insert(nt.name).second,
               "writeSafetensors: tensor name '" + nt.name + "' is used twice");
    GSL_ASSERT(nt.value.defined(), "writeSafetensors: tensor '" + nt.name + "' has no data");
    GSL_ASSERT(nt.value.type().sizeFits(), "writeSafetensors: tensor '" + nt.name + "' is too large");
    if (invalidUtf8At(nt.name) != std::string_view::npos)
      fail(path, "cannot write: tensor name " + quoted(nt.name) + " is not valid UTF-8");
  }
  for (const auto& [k, v] : metadata) {
    if (invalidUtf8At(k) != std::string_view::npos)
      fail(path, "cannot write: metadata key " + quoted(k) + " is not valid UTF-8");
    if (invalidUtf8At(v) != std::string_view::npos)
      fail(path, "cannot write: metadata value for " + quoted(k) + " is not valid UTF-8");
  }

  // Header JSON, compact, as serde_json writes it.
  std::string header = "{";
  bool first = true;
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool firstMeta = true;
    for (const auto& [k, v] : metadata) {
      if (!firstMeta) header += ',';
      firstMeta = false;
      appendJsonString(header, k);
      header += ':';
      appendJsonString(header, v);
    }
    header += '}';
    first = false;
  }
  uint64_t offset = 0;
  for (const NamedTensor& nt : tensors) {
    const DTypeInfo& di = infoOf(nt.value.dtype());
    uint64_t bytes = (uint64_t)nt.value.size() * di.size;
    if (!first) header += ',';
    first = false;
    appendJsonString(header, nt.name);
    header += ":{\"dtype\":\"";
    header += di.name;
    header += "\",\"shape\":[";
    const auto& shape = nt.value.shape();
    for (size_t i = 0; i < shape.size(); ++i) {
      if (i) header += ',';
      header += std::to_string(shape[i]);
    }
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + bytes) + "]}";
    offset += bytes;
  }
  header += '}';
  header.append((8 - header.size() % 8) % 8, ' ');
  if (header.size() > kMaxHeaderSize)
    fail(path, "cannot write: the header would be " + std::to_string(header.size()) +
                   " bytes, over the safetensors limit of " + std::to_string(kMaxHeaderSize));

  std::string prefix(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) prefix[i] = (char)((n >> (8 * i)) & 0xff);
  prefix += header;

  // A folder at `path`, or no folder to write into: said plainly, as the
  // .npy writer does (the temp file is not the user's concern then).
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) fail(path, "cannot write: " + errnoText(EISDIR));
  std::string tmp = path + ".tmp." + std::to_string((long)::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0 && (errno == ENOENT || errno == ENOTDIR)) fail(path, "cannot write: " + errnoText(errno));
  if (fd < 0)
    fail(path, "cannot write: cannot create the temporary file '" + tmp + "': " + errnoText(errno));
  TempFileGuard guard(tmp);  // a forced exit (second Ctrl-C) removes it
  auto abandon = [&](int err) {
    ::close(fd);
    ::unlink(tmp.c_str());
    fail(path, "cannot write: " + errnoText(err));
  };
  // An interrupt (support/Interrupt.h) abandons the write: the temp file
  // goes, an older file at `path` stays as it was.
  auto pollInterrupt = [&] {
    if (!interruptRequested()) return;
    ::close(fd);
    ::unlink(tmp.c_str());
    throw Interrupted();
  };
  // Writes in pieces of at most 64 MiB, polling for an interrupt between them.
  auto put = [&](const char* data, size_t n) {
    constexpr size_t kPiece = size_t(64) << 20;
    for (size_t off = 0; off < n; off += kPiece) {
      pollInterrupt();
      if (int err = writeAll(fd, data + off, std::min(kPiece, n - off))) abandon(err);
    }
  };
  put(prefix.data(), prefix.size());
  // TEST-ONLY (GSL_TEST_FAULT=checkpoint_pause_ms=N): a window in which the
  // temp file exists, for the interrupt tests.
  if (int ms = testFaults().checkpointPauseMs) {
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < until && !interruptRequested())
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::vector<char> bools;
  for (const NamedTensor& nt : tensors) {
    int64_t count = nt.value.size();
    if (count == 0) continue;
    if (nt.value.dtype() == DType::Bool) {
      const int32_t* src = nt.value.i32();
      bools.resize((size_t)count);
      for (int64_t i = 0; i < count; ++i) bools[(size_t)i] = src[i] != 0 ? 1 : 0;
      put(bools.data(), bools.size());
    } else {
      // f32 and i32 are stored as little-endian; the host is little-endian
      // (x86-64, AArch64).
      put(static_cast<const char*>(nt.value.raw()), (size_t)count * 4);
    }
  }
  pollInterrupt();
  if (::fsync(fd) != 0) abandon(errno);
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    fail(path, "cannot write: " + errnoText(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    fail(path, "cannot write: " + errnoText(err));
  }
  // Make the rename itself durable; failing here leaves a complete file.
  int dfd = ::open(folderOf(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

// ------------------------------------------------------------------ read

namespace {

struct Entry {
  std::string name;
  const DTypeInfo* dtype = nullptr;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

const JValue* member(const JValue& obj, std::string_view key) {
  for (const auto& [k, v] : obj.members)
    if (k == key) return &v;
  return nullptr;
}

Entry parseEntry(const std::string& path, const std::string& name, const JValue& v) {
  std::string who = "tensor " + quoted(name);
  auto malformed = [&](const std::string& m) { fail(path, "malformed header: " + who + ": " + m); };
  if (v.kind != JValue::Object) malformed(std::string("expected an object, found ") + kindName(v.kind));
  Entry e;
  e.name = name;

  const JValue* dt = member(v, "dtype");
  const JValue* sh = member(v, "shape");
  const JValue* off = member(v, "data_offsets");
  if (!dt) malformed("missing 'dtype'");
  if (!sh) malformed("missing 'shape'");
  if (!off) malformed("missing 'data_offsets'");

  if (dt->kind != JValue::String) malformed(std::string("'dtype' must be a string, found ") + kindName(dt->kind));
  for (const auto& i : kDTypes)
    if (dt->str == i.name) e.dtype = &i;
  if (!e.dtype)
    fail(path, who + " has dtype " + quoted(dt->str) +
                   ", which GSL does not read (it reads F32, I32 and BOOL)");

  if (sh->kind != JValue::Array) malformed(std::string("'shape' must be an array, found ") + kindName(sh->kind));
  for (const JValue& d : sh->items) {
    if (d.kind != JValue::Integer) malformed(std::string("'shape' must hold integers, found ") + kindName(d.kind));
    e.shape.push_back(d.num);
  }
  for (int64_t d : e.shape)
    if (d < 0) malformed("negative dimension in shape " + shapeText(e.shape));

  if (off->kind != JValue::Array || off->items.size() != 2 || off->items[0].kind != JValue::Integer ||
      off->items[1].kind != JValue::Integer)
    malformed("'data_offsets' must be an array of two integers [begin, end]");
  int64_t b = off->items[0].num, en = off->items[1].num;
  std::string offText = "[" + std::to_string(b) + ", " + std::to_string(en) + "]";
  if (b < 0 || en < 0) fail(path, who + ": negative data_offsets " + offText);
  if (b > en) fail(path, who + ": data_offsets " + offText + " are reversed (begin > end)");
  e.begin = (uint64_t)b;
  e.end = (uint64_t)en;

  // Byte size from dtype and shape, checked for overflow.
  // (A zero dimension makes the count 0 whatever the others are.)
  uint64_t count = 1;
  if (std::find(e.shape.begin(), e.shape.end(), 0) != e.shape.end()) {
    count = 0;
  } else {
    for (int64_t d : e.shape) {
      if (count > (uint64_t)std::numeric_limits<int64_t>::max() / 4 / (uint64_t)d)
        fail(path, who + ": shape " + shapeText(e.shape) + " is too large (its byte size overflows)");
      count *= (uint64_t)d;
    }
  }
  uint64_t bytes = count * e.dtype->size;
  if (bytes != e.end - e.begin)
    fail(path, who + ": dtype " + e.dtype->name + " and shape " + shapeText(e.shape) + " need " +
                   std::to_string(bytes) + " bytes but data_offsets " + offText + " span " +
                   std::to_string(e.end - e.begin));
  return e;
}

}  // namespace

std::vector<NamedTensor> readSafetensors(const std::string& path,
                                         std::map<std::string, std::string>* metadata) {
  if (metadata) metadata->clear();
  Fd f;
  // O_NONBLOCK: opening a FIFO must not hang (it is refused below as not a
  // regular file); it changes nothing for regular files.
  f.fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (f.fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) fail(path, "no such file");
    fail(path, "cannot read: " + errnoText(errno));
  }
  struct stat st;
  if (::fstat(f.fd, &st) != 0) fail(path, "cannot read: " + errnoText(errno));
  if (S_ISDIR(st.st_mode)) fail(path, "is a directory");
  if (!S_ISREG(st.st_mode)) fail(path, "not a regular file");
  const uint64_t fileSize = (uint64_t)st.st_size;

  if (fileSize < 8)
    fail(path, "not a safetensors file: it has " + std::to_string(fileSize) +
                   " bytes, fewer than the 8-byte header length");
  unsigned char lenBytes[8];
  if (readAt(path, f.fd, reinterpret_cast<char*>(lenBytes), 8, 0) != 8)
    fail(path, "truncated: the file ends inside the 8-byte header length");
  uint64_t headerLen = 0;
  for (int i = 7; i >= 0; --i) headerLen = (headerLen << 8) | lenBytes[i];
  if (headerLen > fileSize - 8)
    fail(path, "header length " + std::to_string(headerLen) + " is larger than the file (" +
                   std::to_string(fileSize) + " bytes)");
  if (headerLen > kMaxHeaderSize)
    fail(path, "header length " + std::to_string(headerLen) + " is over the safetensors limit of " +
                   std::to_string(kMaxHeaderSize) + " bytes");
  std::string header((size_t)headerLen, '\0');
  if (readAt(path, f.fd, header.data(), header.size(), 8) != header.size())
    fail(path, "truncated: the file ends inside the header");
  const uint64_t dataStart = 8 + headerLen;
  const uint64_t dataSize = fileSize - dataStart;

  if (size_t bad = invalidUtf8At(header); bad != std::string_view::npos)
    fail(path, "malformed header: not valid UTF-8 at byte " + std::to_string(bad));
  JValue root = JsonParser(path, header).parseDocument();
  if (root.kind != JValue::Object)
    fail(path, std::string("malformed header: expected a JSON object, found ") + kindName(root.kind));

  std::vector<Entry> entries;
  for (const auto& [key, v] : root.members) {
    if (key == "__metadata__") {
      if (v.kind != JValue::Object)
        fail(path, std::string("malformed header: '__metadata__' must be an object, found ") +
                       kindName(v.kind));
      for (const auto& [mk, mv] : v.members) {
        if (mv.kind != JValue::String)
          fail(path, "malformed header: '__metadata__' value for " + quoted(mk) +
                         " must be a string, found " + kindName(mv.kind));
        if (metadata) (*metadata)[mk] = mv.str;
      }
      continue;
    }
    entries.push_back(parseEntry(path, key, v));
  }

  // The tensors must tile [0, dataSize) exactly, as the reference requires.
  std::vector<const Entry*> sorted;
  for (const Entry& e : entries) sorted.push_back(&e);
  std::stable_sort(sorted.begin(), sorted.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  auto range = [](uint64_t a, uint64_t b) { return std::to_string(a) + ".." + std::to_string(b); };
  uint64_t covered = 0;
  const Entry* prev = nullptr;
  for (const Entry* e : sorted) {
    if (e->begin < covered)
      fail(path, "tensors " + quoted(prev->name) + " (bytes " + range(prev->begin, prev->end) +
                     ") and " + quoted(e->name) + " (bytes " + range(e->begin, e->end) + ") overlap");
    if (e->begin > covered)
      fail(path, "bytes " + range(covered, e->begin) + " of the data section belong to no tensor (" +
                     (prev ? "between " + quoted(prev->name) + " and " + quoted(e->name)
                           : "before " + quoted(e->name)) +
                     ")");
    if (e->end > dataSize)
      fail(path, "truncated: tensor " + quoted(e->name) + " needs bytes " + range(e->begin, e->end) +
                     " but the data section has " + std::to_string(dataSize));
    covered = e->end;
    prev = e;
  }
  if (covered < dataSize)
    fail(path, std::to_string(dataSize - covered) + " unexpected bytes after the last tensor (the data "
               "section has " + std::to_string(dataSize) + " bytes, the tensors end at " +
               std::to_string(covered) + ")");

  std::vector<NamedTensor> out;
  out.reserve(entries.size());
  std::vector<char> bytes;
  for (const Entry& e : entries) {
    Tensor t(backend::TensorType{e.dtype->dtype, e.shape});
    size_t nbytes = (size_t)(e.end - e.begin);
    auto truncated = [&]() {
      fail(path, "truncated: tensor " + quoted(e.name) + " needs bytes " + range(e.begin, e.end) +
                     " but the file ended early while reading it");
    };
    if (nbytes > 0) {
      if (e.dtype->dtype == DType::Bool) {
        bytes.resize(nbytes);
        if (readAt(path, f.fd, bytes.data(), nbytes, dataStart + e.begin) != nbytes) truncated();
        int32_t* dst = t.i32();
        for (size_t i = 0; i < nbytes; ++i) dst[i] = bytes[i] != 0 ? 1 : 0;
      } else {
        if (readAt(path, f.fd, static_cast<char*>(t.raw()), nbytes, dataStart + e.begin) != nbytes)
          truncated();
      }
    }
    out.push_back(NamedTensor{e.name, std::move(t)});
  }
  return out;
}

}  // namespace gsl::runtime
