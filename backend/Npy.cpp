#include "backend/Npy.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string_view>

#include "support/BF16.h"
#include "support/Interrupt.h"
#include "support/Text.h"

namespace gsl::backend {

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw NpyError(path + ": " + what);
}


// Parser for the header: a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
struct HeaderParser {
  std::string_view s;
  size_t p = 0;
  std::string err;

  void ws() {
    while (p < s.size() && (s[p] == ' ' || s[p] == '\t' || s[p] == '\n' || s[p] == '\r')) ++p;
  }
  bool eat(char c) {
    ws();
    if (p < s.size() && s[p] == c) {
      ++p;
      return true;
    }
    return false;
  }
  bool bad(const std::string& m) {
    if (err.empty()) err = m;
    return false;
  }
  std::string where() const {
    return p < s.size() ? "at '" + excerpt(s.substr(p), 40) + "'" : "at the end of the header";
  }
  bool str(std::string& out) {
    ws();
    if (p >= s.size() || (s[p] != '\'' && s[p] != '"')) return bad("expected a string " + where());
    char q = s[p++];
    out.clear();
    while (p < s.size() && s[p] != q) {
      if (s[p] == '\\' && p + 1 < s.size()) ++p;
      out += s[p++];
    }
    if (p >= s.size()) return bad("unterminated string");
    ++p;
    return true;
  }
  bool boolean(bool& out) {
    ws();
    if (s.substr(p, 4) == "True") {
      p += 4;
      out = true;
      return true;
    }
    if (s.substr(p, 5) == "False") {
      p += 5;
      out = false;
      return true;
    }
    return bad("expected True or False " + where());
  }
  bool integer(int64_t& out) {
    ws();
    size_t start = p;
    bool neg = false;
    if (p < s.size() && (s[p] == '-' || s[p] == '+')) neg = s[p++] == '-';
    if (p >= s.size() || s[p] < '0' || s[p] > '9') return bad("expected an integer " + where());
    uint64_t v = 0;
    bool overflow = false;
    while (p < s.size() && s[p] >= '0' && s[p] <= '9') {
      uint64_t d = (uint64_t)(s[p] - '0');
      if (v > ((uint64_t)std::numeric_limits<int64_t>::max() - d) / 10) overflow = true;
      else v = v * 10 + d;
      ++p;
    }
    if (p < s.size() && (s[p] == 'L' || s[p] == 'l')) ++p;  // Python 2 longs
    if (overflow) return bad("dimension " + excerpt(s.substr(start, p - start)) + " is too large");
    out = neg ? -(int64_t)v : (int64_t)v;
    return true;
  }
  bool shape(std::vector<int64_t>& out) {
    out.clear();
    if (!eat('(')) return bad("expected a tuple for 'shape' " + where());
    if (eat(')')) return true;
    for (;;) {
      int64_t d;
      if (!integer(d)) return false;
      out.push_back(d);
      if (eat(')')) return true;
      if (!eat(',')) return bad("expected ',' or ')' in 'shape' " + where());
      if (eat(')')) return true;
      if (out.size() > 4096) return bad("too many dimensions");
    }
  }
  // Skips a value of a key we do not know (a string, number, bool or tuple).
  bool skipValue() {
    ws();
    if (p < s.size() && (s[p] == '\'' || s[p] == '"')) {
      std::string tmp;
      return str(tmp);
    }
    int depth = 0;
    while (p < s.size()) {
      char c = s[p];
      if (c == '(' || c == '[' || c == '{') ++depth;
      else if (c == ')' || c == ']' || c == '}') {
        if (depth == 0) return true;
        --depth;
      } else if (c == ',' && depth == 0) {
        return true;
      }
      ++p;
    }
    return bad("unterminated value");
  }
};

struct Header {
  std::string descr;
  bool fortran = false;
  std::vector<int64_t> shape;
};

Header parseHeader(const std::string& path, std::string_view text) {
  // numpy pads the dict with spaces and ends it with '\n'.
  while (!text.empty() && (text.back() == ' ' || text.back() == '\n' || text.back() == '\r' ||
                           text.back() == '\t'))
    text.remove_suffix(1);
  HeaderParser hp;
  hp.s = text;
  Header h;
  bool haveDescr = false, haveFortran = false, haveShape = false;
  auto malformed = [&](const std::string& m) { fail(path, "malformed header: " + m); };
  if (!hp.eat('{')) malformed("expected '{' at the start of '" + excerpt(text) + "'");
  for (;;) {
    if (hp.eat('}')) break;
    std::string key;
    if (!hp.str(key)) malformed(hp.err);
    if (!hp.eat(':')) malformed("expected ':' after '" + excerpt(key) + "'");
    bool ok;
    if (key == "descr") {
      hp.ws();
      if (hp.p < text.size() && text[hp.p] != '\'' && text[hp.p] != '"') {
        // A structured dtype (a list of fields): report it as unsupported.
        size_t start = hp.p;
        ok = hp.skipValue();
        h.descr = std::string(text.substr(start, hp.p - start));
      } else {
        ok = hp.str(h.descr);
      }
      haveDescr = true;
    } else if (key == "fortran_order") {
      ok = hp.boolean(h.fortran);
      haveFortran = true;
    } else if (key == "shape") {
      ok = hp.shape(h.shape);
      haveShape = true;
    } else {
      ok = hp.skipValue();
    }
    if (!ok) malformed(hp.err);
    if (hp.eat('}')) break;
    if (!hp.eat(',')) malformed("expected ',' or '}' " + hp.where());
  }
  hp.ws();
  if (hp.p != text.size()) malformed("unexpected text after the dict " + hp.where());
  if (!haveDescr) malformed("missing 'descr'");
  if (!haveFortran) malformed("missing 'fortran_order'");
  if (!haveShape) malformed("missing 'shape'");
  return h;
}

std::string shapeText(const std::vector<int64_t>& s) {
  std::string r = "(";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ", ";
    r += std::to_string(s[i]);
  }
  if (s.size() == 1) r += ",";
  return r + ")";
}

uint32_t readLE(const std::string& d, size_t off, int n) {
  uint32_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | (unsigned char)d[off + i];
  return v;
}

}  // namespace

namespace {
// `path` opened for reading after checking that it is a regular file
// (`st` its stat); the errors are readNpy's ("no such file", "is a
// directory", "not a regular file", "cannot read: ...").
std::FILE* openRegularFile(const std::string& path, struct stat& st) {
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) fail(path, "no such file");
    fail(path, std::string("cannot read: ") + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) fail(path, "is a directory");
  if (!S_ISREG(st.st_mode)) fail(path, "not a regular file");
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) fail(path, std::string("cannot read: ") + std::strerror(errno));
  return f;
}
}  // namespace

Tensor readNpy(const std::string& path, bool convertWide) {
  struct stat st;
  std::FILE* f = openRegularFile(path, st);
  std::string data;
  char buf[1 << 16];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) data.append(buf, got);
  bool readErr = std::ferror(f);
  int readErrno = errno;
  std::fclose(f);
  if (readErr) fail(path, std::string("cannot read: ") + std::strerror(readErrno));

  static const char kMagic[] = "\x93NUMPY";
  if (data.size() < 6 || data.compare(0, 6, kMagic, 6) != 0) fail(path, "not a .npy file (bad magic)");
  if (data.size() < 8) fail(path, "truncated: the file ends inside the .npy preamble");
  int major = (unsigned char)data[6], minor = (unsigned char)data[7];
  size_t lenBytes;
  if (major == 1) lenBytes = 2;
  else if (major == 2 || major == 3) lenBytes = 4;
  else
    fail(path, "unsupported .npy format version " + std::to_string(major) + "." +
                   std::to_string(minor) + " (GSL reads 1.0, 2.0 and 3.0)");
  size_t headerStart = 8 + lenBytes;
  if (data.size() < headerStart) fail(path, "truncated: the file ends inside the .npy preamble");
  uint64_t headerLen = readLE(data, 8, (int)lenBytes);
  if (headerLen > data.size() - headerStart)
    fail(path, "header length " + std::to_string(headerLen) + " is larger than the file");
  std::string_view header(data.data() + headerStart, (size_t)headerLen);
  // Version 1/2 headers are latin-1, version 3 UTF-8; both are ASCII in practice.
  Header h = parseHeader(path, header);

  DType dtype;
  size_t itemSize;
  bool wide = false;  // '<f8' / '<i8' read into f32 / i32
  if (convertWide && (h.descr == "<f8" || h.descr == "<i8")) {
    dtype = h.descr == "<f8" ? DType::F32 : DType::I32;
    itemSize = 8;
    wide = true;
  } else if (h.descr == "<f4") {
    dtype = DType::F32;
    itemSize = 4;
  } else if (h.descr == "<i4") {
    dtype = DType::I32;
    itemSize = 4;
  } else if (h.descr == "|b1") {
    dtype = DType::Bool;
    itemSize = 1;
  } else if (h.descr == "<V2" || h.descr == "|V2" || h.descr.find("bfloat16") != std::string::npos) {
    // ml_dtypes' bfloat16 arrays are saved as 2-byte void ('<V2').
    fail(path, "unsupported dtype '" + excerpt(h.descr) +
                   "': .npy has no bf16 type (GSL writes bf16 tensors as f32 '<f4'); save the array as "
                   "float32 and cast(x, bf16) after load");
  } else {
    fail(path, "unsupported dtype '" + excerpt(h.descr) +
                   "' (GSL reads f32 '<f4', i32 '<i4' and bool '|b1'" +
                   (convertWide ? std::string(", and converts float64 '<f8' and int64 '<i8')") : std::string(")")));
  }
  if (h.fortran) fail(path, "Fortran-order arrays are not supported");

  // Element count and byte size, checked for overflow.
  uint64_t n = 1;
  for (int64_t d : h.shape) {
    if (d < 0) fail(path, "malformed header: negative dimension in shape " + shapeText(h.shape));
    if (d != 0 && n > (uint64_t)std::numeric_limits<int64_t>::max() / 8 / (uint64_t)d)
      fail(path, "shape " + shapeText(h.shape) + " is too large (its byte size overflows 64 bits)");
    n *= (uint64_t)d;
  }
  uint64_t bytes = n * itemSize;
  uint64_t dataStart = headerStart + headerLen;
  uint64_t have = data.size() - dataStart;
  if (have < bytes)
    fail(path, "truncated: header says " + std::to_string(bytes) + " bytes of data, file has " +
                   std::to_string(have));

  Tensor t(TensorType{dtype, h.shape});
  const char* src = data.data() + dataStart;
  if (dtype == DType::Bool) {
    int32_t* dst = t.i32();
    for (uint64_t i = 0; i < n; ++i) dst[i] = src[i] != 0 ? 1 : 0;
  } else if (wide && dtype == DType::F32) {
    float* dst = t.f32();
    for (uint64_t i = 0; i < n; ++i) {
      double v;
      std::memcpy(&v, src + 8 * i, 8);
      if (std::isfinite(v) && std::fabs(v) > (double)std::numeric_limits<float>::max())
        fail(path, "float64 value " + shortest(v) + " at index " + std::to_string(i) + " does not fit in f32");
      dst[i] = (float)v;
    }
  } else if (wide) {
    int32_t* dst = t.i32();
    for (uint64_t i = 0; i < n; ++i) {
      int64_t v;
      std::memcpy(&v, src + 8 * i, 8);
      if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
        fail(path, "int64 value " + std::to_string(v) + " at index " + std::to_string(i) + " does not fit in i32");
      dst[i] = (int32_t)v;
    }
  } else if (n > 0) {
    // Little-endian host assumed (x86-64, AArch64).
    std::memcpy(t.raw(), src, (size_t)bytes);
  }
  return t;
}

NpyLayout readNpyLayout(const std::string& path) {
  struct stat st;
  std::FILE* f = openRegularFile(path, st);
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(f, std::fclose);
  // The preamble (magic, version, header length), then the header alone.
  std::string pre(12, '\0');
  size_t got = std::fread(pre.data(), 1, pre.size(), f);
  pre.resize(got);
  static const char kMagic[] = "\x93NUMPY";
  if (pre.size() < 6 || pre.compare(0, 6, kMagic, 6) != 0) fail(path, "not a .npy file (bad magic)");
  int major = pre.size() > 6 ? (unsigned char)pre[6] : 0;
  size_t lenBytes = major == 1 ? 2 : 4;
  if (pre.size() < 8 + lenBytes) fail(path, "truncated: the file ends inside the .npy preamble");
  if (major < 1 || major > 3)
    fail(path, "unsupported .npy format version " + std::to_string(major) + "." +
                   std::to_string((unsigned char)pre[7]) + " (GSL reads 1.0, 2.0 and 3.0)");
  uint64_t headerStart = 8 + lenBytes, fileSize = (uint64_t)st.st_size;
  uint64_t headerLen = readLE(pre, 8, (int)lenBytes);
  if (headerLen > fileSize - headerStart)
    fail(path, "header length " + std::to_string(headerLen) + " is larger than the file");
  std::string header((size_t)headerLen, '\0');
  bool ok = std::fseek(f, (long)headerStart, SEEK_SET) == 0 &&
            std::fread(header.data(), 1, header.size(), f) == header.size();
  if (!ok) fail(path, "cannot read its header");
  Header h = parseHeader(path, header);
  if (h.fortran) fail(path, "Fortran-order arrays are not supported");
  uint64_t n = 1;
  for (int64_t d : h.shape) {
    if (d < 0) fail(path, "malformed header: negative dimension in shape " + shapeText(h.shape));
    if (d != 0 && n > (uint64_t)std::numeric_limits<int64_t>::max() / 8 / (uint64_t)d)
      fail(path, "shape " + shapeText(h.shape) + " is too large (its byte size overflows 64 bits)");
    n *= (uint64_t)d;
  }
  return {h.descr, h.shape, n, headerStart + headerLen, fileSize - headerStart - headerLen};
}

void writeNpy(const std::string& path, const Tensor& tensor) {
  // .npy has no bf16: a bf16 tensor is written as f32 (exact: widening
  // only appends zero bits).
  Tensor wide;
  if (tensor.defined() && tensor.dtype() == DType::BF16) {
    wide = Tensor(TensorType{DType::F32, tensor.shape()});
    widenBF16(tensor.bf16(), wide.f32(), tensor.size());
  }
  const Tensor& t = wide.defined() ? wide : tensor;
  const char* descr = "<f4";
  if (t.dtype() == DType::I32) descr = "<i4";
  else if (t.dtype() == DType::Bool) descr = "|b1";

  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " +
                       shapeText(t.shape()) + ", }";
  // numpy's layout: magic(6) + version(2) + length(2) + header + padding + '\n',
  // with the data starting at a multiple of 64 bytes.
  size_t hlen = header.size() + 1;
  size_t pad = 64 - ((10 + hlen) % 64);
  header.append(pad, ' ');
  header += '\n';
  if (header.size() > 0xffff) throw NpyError(path + ": cannot write: shape too long for a .npy 1.0 header");

  std::string out;
  out.append("\x93NUMPY", 6);
  out += (char)1;
  out += (char)0;
  out += (char)(header.size() & 0xff);
  out += (char)((header.size() >> 8) & 0xff);
  out += header;
  if (!t.defined()) fail(path, "cannot write: the tensor has no data");
  int64_t n = t.size();
  if (t.dtype() == DType::Bool) {
    const int32_t* s = n ? t.i32() : nullptr;
    for (int64_t i = 0; i < n; ++i) out += (char)(s[i] != 0 ? 1 : 0);
  } else if (n > 0) {
    out.append(static_cast<const char*>(t.raw()), (size_t)n * 4);
  }

  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    fail(path, std::string("cannot write: ") + std::strerror(EISDIR));
  std::string tmp = path + ".tmp." + std::to_string((long)::getpid());
  TempFileGuard guard(tmp);  // a forced exit (second Ctrl-C) removes it
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) fail(path, std::string("cannot write: ") + std::strerror(errno));
  size_t wrote = std::fwrite(out.data(), 1, out.size(), f);
  int err = errno;
  bool ok = wrote == out.size() && std::fflush(f) == 0;
  if (!ok) err = errno;
  if (std::fclose(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    std::remove(tmp.c_str());
    fail(path, std::string("cannot write: ") + std::strerror(err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    std::remove(tmp.c_str());
    fail(path, std::string("cannot write: ") + std::strerror(err));
  }
}

}  // namespace gsl::backend
