#include "ir/Attr.h"

#include <charconv>

#include "support/Diagnostics.h"

namespace gsl::ir {

std::string formatDouble(double v);

const char* reduceOpName(ReduceOp r) {
  switch (r) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
  }
  return "?";
}

std::optional<ReduceOp> parseReduceOp(std::string_view s) {
  for (ReduceOp r : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min})
    if (s == reduceOpName(r)) return r;
  return std::nullopt;
}

std::string attrStr(const Attr& a) {
  struct V {
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return formatDouble(v); }
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(const std::string& s) const {
      std::string r = "\"";
      for (char c : s) {
        if (c == '"' || c == '\\') r += '\\';
        r += c;
      }
      return r + "\"";
    }
    std::string operator()(const std::vector<int64_t>& v) const { return shapeStr(v); }
    std::string operator()(DType d) const { return dtypeName(d); }
    std::string operator()(const EinsumSpec& e) const { return (*this)(e.text); }
    std::string operator()(ReduceOp r) const { return (*this)(std::string(reduceOpName(r))); }
  };
  return std::visit(V{}, a);
}

// Shortest text that reads back to the same double, always with a '.' or
// exponent so it re-parses as a float.
std::string formatDouble(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // n: inf/nan
  return s;
}

const Attr* AttrMap::get(const std::string& k) const {
  auto it = m_.find(k);
  return it == m_.end() ? nullptr : &it->second;
}

template <class T>
static const T& typed(const AttrMap& m, const std::string& k) {
  const Attr* a = m.get(k);
  GSL_ASSERT(a, "missing attribute '" + k + "'");
  const T* v = std::get_if<T>(a);
  GSL_ASSERT(v, "attribute '" + k + "' has the wrong kind");
  return *v;
}

int64_t AttrMap::getInt(const std::string& k) const { return typed<int64_t>(*this, k); }
double AttrMap::getFloat(const std::string& k) const {
  const Attr* a = get(k);
  if (a && std::holds_alternative<int64_t>(*a)) return (double)std::get<int64_t>(*a);
  return typed<double>(*this, k);
}
bool AttrMap::getBool(const std::string& k) const { return typed<bool>(*this, k); }
const std::string& AttrMap::getString(const std::string& k) const { return typed<std::string>(*this, k); }
const std::vector<int64_t>& AttrMap::getInts(const std::string& k) const {
  return typed<std::vector<int64_t>>(*this, k);
}
DType AttrMap::getDType(const std::string& k) const { return typed<DType>(*this, k); }
const EinsumSpec& AttrMap::getEinsum(const std::string& k) const { return typed<EinsumSpec>(*this, k); }
ReduceOp AttrMap::getReduce(const std::string& k) const { return typed<ReduceOp>(*this, k); }

}  // namespace gsl::ir
