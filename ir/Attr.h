// Op attributes: static (compile-time) arguments of an op, such as reduction
// axes, a reshape target or an einsum spec. Kept in a sorted map so the IR
// prints deterministically.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "ir/Type.h"

namespace gsl::ir {

using Attr = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>, DType>;

std::string attrStr(const Attr& a);  // IR text form: 3, 1.5, true, "s", [0, 1], f32

class AttrMap {
 public:
  bool has(const std::string& k) const { return m_.count(k) > 0; }
  void set(const std::string& k, Attr v) { m_[k] = std::move(v); }
  void erase(const std::string& k) { m_.erase(k); }
  const Attr* get(const std::string& k) const;
  // Typed getters; calling one for a missing or mistyped attr is an internal error.
  int64_t getInt(const std::string& k) const;
  double getFloat(const std::string& k) const;
  bool getBool(const std::string& k) const;
  const std::string& getString(const std::string& k) const;
  const std::vector<int64_t>& getInts(const std::string& k) const;
  DType getDType(const std::string& k) const;
  const std::map<std::string, Attr>& all() const { return m_; }
  bool empty() const { return m_.empty(); }
  bool operator==(const AttrMap& o) const { return m_ == o.m_; }

 private:
  std::map<std::string, Attr> m_;
};

}  // namespace gsl::ir
