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

#include <nlohmann/json.hpp>

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


std::string inQuotes(std::string_view s) { return "'" + excerpt(s) + "'"; }

// ------------------------------------------------------------------ JSON

// The header is parsed by nlohmann-json (its SAX interface) into an
// ordered_json tree, with the strict checks the safetensors reference makes
// and messages that name the byte where the header goes wrong:
//   "<path>: malformed header: <what> at byte K ('<the text there>')".
// The library finds the syntax errors; this handler adds what JSON allows
// but a safetensors header must not have (fractions, true/false/null,
// integers outside int64, duplicate keys, nesting deeper than kMaxDepth)
// and words every error as the reader always has. Positions are tracked
// here, token by token, from the events the library delivers: each token
// starts after the previous one, whitespace and the one separator (':' or
// ',') the parser accepted in between.
using Json = nlohmann::ordered_json;

const char* kindName(const Json& v) {
  if (v.is_object()) return "an object";
  if (v.is_array()) return "an array";
  if (v.is_string()) return "a string";
  if (v.is_number_integer()) return "an integer";
  return "a value";
}

class HeaderSax : public nlohmann::json_sax<Json> {
 public:
  HeaderSax(const std::string& path, std::string_view s) : path_(path), s_(s) {}

  // Parses the whole header. Throws CheckpointError on any error.
  Json parse() {
    // The library skips a UTF-8 byte order mark; JSON text for safetensors
    // must not have one.
    if (s_.substr(0, 3) == "\xEF\xBB\xBF") badAt("expected a value", 0);
    bool ok = nlohmann::json::sax_parse(s_.begin(), s_.end(), this);
    GSL_ASSERT(ok, "checkpoint header: the JSON parser stopped without an error");
    // The library ends its input at a NUL byte: text after the root value
    // is still refused.
    if (size_t at = skipSpace(end_); at < s_.size()) badAt("unexpected text after the JSON object", at);
    return std::move(root_);
  }

  bool null() override { unsupported(); }
  bool boolean(bool) override { unsupported(); }
  bool number_integer(number_integer_t v) override { return integer(v); }
  bool number_unsigned(number_unsigned_t v) override {
    if (v > (number_unsigned_t)std::numeric_limits<int64_t>::max()) outOfRange(tokenStart());
    return integer((int64_t)v);
  }
  bool number_float(number_float_t, const string_t& text) override {
    size_t at = tokenStart();
    leadingZero(at);
    if (text.find_first_of(".eE") != std::string::npos) onlyIntegers(at);
    outOfRange(at);  // an integer too large for the library's integers
  }
  bool string(string_t& v) override {
    size_t at = tokenStart();
    put(Json(std::move(v)), stringEnd(at));
    return true;
  }
  bool binary(binary_t&) override { return false; }  // not produced by the JSON parser
  bool start_object(std::size_t) override { return open(Json::object()); }
  bool start_array(std::size_t) override { return open(Json::array()); }
  bool key(string_t& k) override {
    size_t at = tokenStart();
    if (!frames_.back().keys.insert(k).second) badAt("duplicate key " + inQuotes(k), at);
    key_ = std::move(k);
    end_ = stringEnd(at);
    last_ = Event::Key;
    return true;
  }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }

  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) override {
    size_t at = tokenStart();
    // Where the library stopped: the byte it could not take (s_.size() for
    // the end of the header).
    size_t stop = std::min(position > 0 ? position - 1 : 0, s_.size());
    switch (context()) {
      case Context::End: badAt("unexpected text after the JSON object", at);
      case Context::Colon: badAt("expected ':' after key " + inQuotes(key_), at);
      case Context::ObjectNext: badAt("expected ',' or '}' in an object", at);
      case Context::ArrayNext: badAt("expected ',' or ']' in an array", at);
      case Context::Key:
        if (at < s_.size() && s_[at] == '"') badString(at, stop, ex);
        badAt("expected a string key", at);
      case Context::Value: break;
    }
    char c = at < s_.size() ? s_[at] : '\0';
    if (at < s_.size() && c == '"') badString(at, stop, ex);
    if (at < s_.size() && (c == '-' || (c >= '0' && c <= '9'))) {
      if (ex.id == 406) {  // a number the library cannot hold (1e999, 400 digits)
        std::string_view num = numberText(at);
        if (num.find_first_of(".eE") != std::string_view::npos) onlyIntegers(at);
        outOfRange(at);
      }
      if (c == '-' && stop == at + 1) badAt("expected a digit", stop);
      onlyIntegers(at);  // "1.", "1e", "1e+": an unfinished fraction or exponent
    }
    if (c == 't' || c == 'f' || c == 'n') unsupported();
    badAt("expected a value", at);
  }

 private:
  enum class Event { None, Open, Key, Value };
  enum class Context { Value, Key, Colon, ObjectNext, ArrayNext, End };
  struct Frame {
    Json* node;
    std::set<std::string> keys;  // objects: the keys seen
  };

  const std::string& path_;
  std::string_view s_;
  Json root_;
  std::vector<Frame> frames_;
  std::string key_;          // the last key read
  size_t end_ = 0;           // where the last token delivered ends
  Event last_ = Event::None;

  [[noreturn]] void badAt(const std::string& m, size_t at) const {
    std::string where = " at the end of the header";
    if (at < s_.size()) {
      std::string_view rest = s_.substr(at);
      while (!rest.empty() && rest.back() == ' ') rest.remove_suffix(1);  // the padding
      where = " at byte " + std::to_string(at);
      if (!rest.empty()) where += " ('" + excerpt(rest, 20) + "')";
    }
    fail(path_, "malformed header: " + m + where);
  }
  [[noreturn]] void unsupported() const {
    badAt("unsupported JSON value (a safetensors header holds only objects, arrays, strings and integers)",
          tokenStart());
  }
  [[noreturn]] void onlyIntegers(size_t at) const {
    badAt("only integers are allowed (no fractions or exponents)", at);
  }
  [[noreturn]] void outOfRange(size_t at) const {
    std::string_view digits = numberText(at);
    if (!digits.empty() && digits[0] == '-') digits.remove_prefix(1);
    badAt("integer " + excerpt(digits, 30) + " is out of range", at);
  }
  // "0" or "-0" followed by a digit: the library reads it as two numbers.
  void leadingZero(size_t at) const {
    size_t z = at < s_.size() && s_[at] == '-' ? at + 1 : at;
    if (z + 1 < s_.size() && s_[z] == '0' && s_[z + 1] >= '0' && s_[z + 1] <= '9')
      badAt("leading zeros are not allowed in JSON numbers", z);
  }

  static bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
  size_t skipSpace(size_t i) const {
    while (i < s_.size() && isSpace(s_[i])) ++i;
    return i;
  }
  // What the parser expects at the next token.
  Context context() const {
    if (frames_.empty()) return last_ == Event::None ? Context::Value : Context::End;
    bool object = frames_.back().node->is_object();
    bool comma = peekAfterEnd() == ',';
    switch (last_) {
      case Event::Open: return object ? Context::Key : Context::Value;
      case Event::Key: return peekAfterEnd() == ':' ? Context::Value : Context::Colon;
      default:
        if (object) return comma ? Context::Key : Context::ObjectNext;
        return comma ? Context::Value : Context::ArrayNext;
    }
  }
  char peekAfterEnd() const {
    size_t i = skipSpace(end_);
    return i < s_.size() ? s_[i] : '\0';
  }
  // Where the token being delivered (or refused) starts.
  size_t tokenStart() const {
    size_t i = skipSpace(end_);
    bool separator = !frames_.empty() && i < s_.size() &&
                     ((last_ == Event::Key && s_[i] == ':') || (last_ == Event::Value && s_[i] == ','));
    return separator ? skipSpace(i + 1) : i;
  }
  // The end of the string token at `at` (the library has checked it).
  size_t stringEnd(size_t at) const {
    size_t i = at + 1;
    while (i < s_.size() && s_[i] != '"') i += s_[i] == '\\' ? 2 : 1;
    return std::min(i + 1, s_.size());
  }
  // The number token at `at`, by JSON's number grammar: -? digits, then an
  // optional fraction and exponent (as far as they go).
  std::string_view numberText(size_t at) const {
    size_t i = at;
    auto digits = [&] {
      while (i < s_.size() && s_[i] >= '0' && s_[i] <= '9') ++i;
    };
    if (i < s_.size() && s_[i] == '-') ++i;
    digits();
    if (i < s_.size() && s_[i] == '.') ++i, digits();
    if (i < s_.size() && (s_[i] == 'e' || s_[i] == 'E')) {
      ++i;
      if (i < s_.size() && (s_[i] == '+' || s_[i] == '-')) ++i;
      digits();
    }
    return s_.substr(at, i - at);
  }

  bool integer(int64_t v) {
    size_t at = tokenStart();
    leadingZero(at);
    put(Json(v), at + numberText(at).size());
    return true;
  }
  // Adds a value to the container being read (or makes it the root).
  Json* put(Json v, size_t end) {
    end_ = end;
    last_ = Event::Value;
    if (frames_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Json& top = *frames_.back().node;
    if (top.is_object()) return &(top[key_] = std::move(v));
    top.push_back(std::move(v));
    return &top.back();
  }
  bool open(Json empty) {
    size_t at = tokenStart();
    if (frames_.size() >= (size_t)kMaxDepth)
      badAt("nesting deeper than " + std::to_string(kMaxDepth) + " levels", at);
    Json* node = put(std::move(empty), at + 1);
    frames_.push_back({node, {}});
    last_ = Event::Open;
    return true;
  }
  bool close() {
    end_ = tokenStart() + 1;
    frames_.pop_back();
    last_ = Event::Value;
    return true;
  }

  // A string the library refused; `stop` is where it stopped.
  [[noreturn]] void badString(size_t at, size_t stop, const nlohmann::detail::exception& ex) const {
    std::string_view what = ex.what();
    auto says = [&](std::string_view m) { return what.find(m) != std::string_view::npos; };
    if (says("control character")) badAt("control character in a string (must be escaped)", stop);
    if (says("forbidden character after backslash")) {
      if (stop >= s_.size()) badAt("unterminated string", at);
      badAt("invalid escape in a string", stop - 1);
    }
    if (says("must be followed by 4 hex digits")) {
      size_t u = stop;  // back over the hex digits read, to the 'u'
      while (u > at && std::isxdigit((unsigned char)s_[u - 1])) --u;
      badAt(s_.size() - u < 4 ? "truncated \\u escape" : "invalid \\u escape", u);
    }
    auto escapeAt = [&](size_t back) {
      return stop >= back && s_[stop - back] == '\\' && s_[stop - back + 1] == 'u';
    };
    if (says("must be followed by U+DC00..U+DFFF")) {
      // At the byte after the high surrogate, after "\" there, or after a
      // whole "\uXXXX" that is no low surrogate.
      for (size_t back : {6, 7, 11})
        if (escapeAt(back)) badAt("unpaired surrogate in a \\u escape", stop - back);
    }
    if (says("must follow U+D800..U+DBFF") && escapeAt(5))
      badAt("unpaired surrogate in a \\u escape", stop - 5);
    if (stop >= s_.size()) badAt("unterminated string", at);
    // Not expected (the header was checked to be UTF-8): the library's words.
    std::string reason(what.substr(what.find("invalid string")));
    badAt(reason.substr(0, reason.find(';')), at);
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
    {"BF16", DType::BF16, 2},  // safetensors' bfloat16: the upper 16 bits of an f32
};
const DTypeInfo& infoOf(DType d) {
  for (const auto& i : kDTypes)
    if (i.dtype == d) return i;
  GSL_ASSERT(false, "checkpoint: unknown dtype");
  return kDTypes[0];
}

std::string shapeText(const std::vector<int64_t>& s) { return ir::shapeStr(s); }

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

SafetensorsWriter::SafetensorsWriter(const std::string& path, std::vector<Entry> layout,
                                     const std::map<std::string, std::string>& metadata)
    : path_(path), layout_(std::move(layout)) {
  std::set<std::string> names;
  for (const Entry& e : layout_) {
    GSL_ASSERT(e.name != "__metadata__", "writeSafetensors: '__metadata__' is reserved and cannot name a tensor");
    GSL_ASSERT(names.insert(e.name).second, "writeSafetensors: tensor name '" + e.name + "' is used twice");
    GSL_ASSERT(e.type.sizeFits(), "writeSafetensors: tensor '" + e.name + "' is too large");
    if (invalidUtf8At(e.name) != std::string_view::npos)
      fail(path, "cannot write: tensor name " + inQuotes(e.name) + " is not valid UTF-8");
  }
  for (const auto& [k, v] : metadata) {
    if (invalidUtf8At(k) != std::string_view::npos)
      fail(path, "cannot write: metadata key " + inQuotes(k) + " is not valid UTF-8");
    if (invalidUtf8At(v) != std::string_view::npos)
      fail(path, "cannot write: metadata value for " + inQuotes(k) + " is not valid UTF-8");
  }

  // Header JSON, compact, in the order serde_json writes it: the metadata,
  // then the tensors in order.
  Json json = Json::object();
  if (!metadata.empty()) {
    Json& meta = json["__metadata__"] = Json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
  }
  uint64_t offset = 0;
  for (const Entry& e : layout_) {
    const DTypeInfo& di = infoOf(e.type.dtype);
    uint64_t bytes = (uint64_t)e.type.numElements() * di.size;
    json[e.name] = Json{{"dtype", di.name}, {"shape", e.type.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string header = json.dump();
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
  tmp_ = path + ".tmp." + std::to_string((long)::getpid());
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd_ < 0 && (errno == ENOENT || errno == ENOTDIR)) fail(path, "cannot write: " + errnoText(errno));
  if (fd_ < 0)
    fail(path, "cannot write: cannot create the temporary file '" + tmp_ + "': " + errnoText(errno));
  guard_ = std::make_unique<TempFileGuard>(tmp_);  // a forced exit (second Ctrl-C) removes it
  write(prefix.data(), prefix.size());
  // TEST-ONLY (GSL_TEST_FAULT=checkpoint_pause_ms=N): a window in which the
  // temp file exists, for the interrupt tests.
  if (int ms = testFaults().checkpointPauseMs) {
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < until && !interruptRequested())
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

SafetensorsWriter::~SafetensorsWriter() { abandon(); }

void SafetensorsWriter::abandon() {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_.c_str());
}

// Writes in pieces of at most 64 MiB, polling for an interrupt between
// them: an interrupt (support/Interrupt.h) abandons the write, the temp
// file goes, an older file at `path` stays as it was.
void SafetensorsWriter::write(const char* data, size_t n) {
  constexpr size_t kPiece = size_t(64) << 20;
  for (size_t off = 0; off < n; off += kPiece) {
    if (interruptRequested()) {
      abandon();
      throw Interrupted();
    }
    if (int err = writeAll(fd_, data + off, std::min(kPiece, n - off))) {
      abandon();
      fail(path_, "cannot write: " + errnoText(err));
    }
  }
}

void SafetensorsWriter::put(const backend::Tensor& t) {
  GSL_ASSERT(fd_ >= 0 && next_ < layout_.size(), "SafetensorsWriter: put after the last tensor or a failure");
  const Entry& e = layout_[next_++];
  GSL_ASSERT(t.defined() && t.type() == e.type, "writeSafetensors: tensor '" + e.name + "' is not " + e.type.str());
  int64_t count = t.size();
  if (count == 0) return;
  if (t.dtype() == DType::Bool) {
    const int32_t* src = t.i32();
    std::vector<char> bools((size_t)count);
    for (int64_t i = 0; i < count; ++i) bools[(size_t)i] = src[i] != 0 ? 1 : 0;
    write(bools.data(), bools.size());
  } else {
    // f32, i32 and bf16 are stored as little-endian; the host is
    // little-endian (x86-64, AArch64).
    write(static_cast<const char*>(t.raw()), t.bytes());
  }
}

void SafetensorsWriter::commit() {
  GSL_ASSERT(fd_ >= 0 && next_ == layout_.size(), "SafetensorsWriter: commit before every tensor was put");
  if (interruptRequested()) {
    abandon();
    throw Interrupted();
  }
  if (::fsync(fd_) != 0) {
    int err = errno;
    abandon();
    fail(path_, "cannot write: " + errnoText(err));
  }
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp_.c_str());
    fail(path_, "cannot write: " + errnoText(err));
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp_.c_str());
    fail(path_, "cannot write: " + errnoText(err));
  }
  // Make the rename itself durable; failing here leaves a complete file.
  int dfd = ::open(folderOf(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void writeSafetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::vector<SafetensorsWriter::Entry> layout;
  for (const NamedTensor& nt : tensors) {
    GSL_ASSERT(nt.value.defined(), "writeSafetensors: tensor '" + nt.name + "' has no data");
    layout.push_back({nt.name, nt.value.type()});
  }
  SafetensorsWriter w(path, std::move(layout), metadata);
  for (const NamedTensor& nt : tensors) w.put(nt.value);
  w.commit();
}

// ------------------------------------------------------------------ read

namespace {

struct Entry {
  std::string name;
  const DTypeInfo* dtype = nullptr;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

const Json* member(const Json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

Entry parseEntry(const std::string& path, const std::string& name, const Json& v) {
  std::string who = "tensor " + inQuotes(name);
  auto malformed = [&](const std::string& m) { fail(path, "malformed header: " + who + ": " + m); };
  if (!v.is_object()) malformed(std::string("expected an object, found ") + kindName(v));
  Entry e;
  e.name = name;

  const Json* dt = member(v, "dtype");
  const Json* sh = member(v, "shape");
  const Json* off = member(v, "data_offsets");
  if (!dt) malformed("missing 'dtype'");
  if (!sh) malformed("missing 'shape'");
  if (!off) malformed("missing 'data_offsets'");

  if (!dt->is_string()) malformed(std::string("'dtype' must be a string, found ") + kindName(*dt));
  const std::string& dtype = dt->get_ref<const std::string&>();
  for (const auto& i : kDTypes)
    if (dtype == i.name) e.dtype = &i;
  if (!e.dtype)
    fail(path, who + " has dtype " + inQuotes(dtype) +
                   ", which GSL does not read (it reads F32, I32, BOOL and BF16)");

  if (!sh->is_array()) malformed(std::string("'shape' must be an array, found ") + kindName(*sh));
  for (const Json& d : *sh) {
    if (!d.is_number_integer()) malformed(std::string("'shape' must hold integers, found ") + kindName(d));
    e.shape.push_back(d.get<int64_t>());
  }
  for (int64_t d : e.shape)
    if (d < 0) malformed("negative dimension in shape " + shapeText(e.shape));

  if (!off->is_array() || off->size() != 2 || !(*off)[0].is_number_integer() || !(*off)[1].is_number_integer())
    malformed("'data_offsets' must be an array of two integers [begin, end]");
  int64_t b = (*off)[0].get<int64_t>(), en = (*off)[1].get<int64_t>();
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

// Opens `path` into `f` and reads its header: the entries (checked to tile
// the data section exactly) and the metadata.
struct Header {
  std::vector<Entry> entries;
  uint64_t dataStart = 0;
};

Header readHeader(const std::string& path, Fd& f, std::map<std::string, std::string>* metadata) {
  if (metadata) metadata->clear();
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
  Json root = HeaderSax(path, header).parse();
  if (!root.is_object())
    fail(path, std::string("malformed header: expected a JSON object, found ") + kindName(root));

  std::vector<Entry> entries;
  for (const auto& [key, v] : root.items()) {
    if (key == "__metadata__") {
      if (!v.is_object())
        fail(path, std::string("malformed header: '__metadata__' must be an object, found ") + kindName(v));
      for (const auto& [mk, mv] : v.items()) {
        if (!mv.is_string())
          fail(path, "malformed header: '__metadata__' value for " + inQuotes(mk) + " must be a string, found " +
                         kindName(mv));
        if (metadata) (*metadata)[mk] = mv.get<std::string>();
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
      fail(path, "tensors " + inQuotes(prev->name) + " (bytes " + range(prev->begin, prev->end) +
                     ") and " + inQuotes(e->name) + " (bytes " + range(e->begin, e->end) + ") overlap");
    if (e->begin > covered)
      fail(path, "bytes " + range(covered, e->begin) + " of the data section belong to no tensor (" +
                     (prev ? "between " + inQuotes(prev->name) + " and " + inQuotes(e->name)
                           : "before " + inQuotes(e->name)) +
                     ")");
    if (e->end > dataSize)
      fail(path, "truncated: tensor " + inQuotes(e->name) + " needs bytes " + range(e->begin, e->end) +
                     " but the data section has " + std::to_string(dataSize));
    covered = e->end;
    prev = e;
  }
  if (covered < dataSize)
    fail(path, std::to_string(dataSize - covered) + " unexpected bytes after the last tensor (the data "
               "section has " + std::to_string(dataSize) + " bytes, the tensors end at " +
               std::to_string(covered) + ")");
  return {std::move(entries), dataStart};
}

}  // namespace

std::vector<NamedTensor> readSafetensors(const std::string& path,
                                         std::map<std::string, std::string>* metadata) {
  Fd f;
  const auto [entries, dataStart] = readHeader(path, f, metadata);
  auto range = [](uint64_t a, uint64_t b) { return std::to_string(a) + ".." + std::to_string(b); };
  std::vector<NamedTensor> out;
  out.reserve(entries.size());
  std::vector<char> bytes;
  for (const Entry& e : entries) {
    Tensor t(backend::TensorType{e.dtype->dtype, e.shape});
    size_t nbytes = (size_t)(e.end - e.begin);
    auto truncated = [&]() {
      fail(path, "truncated: tensor " + inQuotes(e.name) + " needs bytes " + range(e.begin, e.end) +
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

std::vector<std::string> safetensorsNames(const std::string& path) {
  Fd f;
  std::vector<std::string> names;
  for (const Entry& e : readHeader(path, f, nullptr).entries) names.push_back(e.name);
  return names;
}

}  // namespace gsl::runtime
