// Op attributes: static (compile-time) arguments of an op, such as reduction
// axes, a reshape target or an einsum spec. Kept in a sorted map so the IR
// prints deterministically. Values that IR text writes as strings but the
// compiler reads as something else (an einsum spec, a reduction) are kept
// parsed, in their own alternatives.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ir/Einsum.h"
#include "ir/Type.h"

namespace gsl::ir {

// The reduction of an all_reduce (its `reduce` attr), which the
// communicators run (backend/Communicator.h).
enum class ReduceOp { Sum, Max, Min };

const char* reduceOpName(ReduceOp r);                    // "sum", "max", "min"
std::optional<ReduceOp> parseReduceOp(std::string_view s);  // inverse of reduceOpName

using Attr = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>, DType, EinsumSpec, ReduceOp>;

// IR text form: 3, 1.5, true, "s", [0, 1], f32; an einsum spec and a
// reduction as strings ("ab,bc->ac", "sum").
std::string attrStr(const Attr& a);

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
  const EinsumSpec& getEinsum(const std::string& k) const;
  ReduceOp getReduce(const std::string& k) const;
  const std::map<std::string, Attr>& all() const { return m_; }
  bool empty() const { return m_.empty(); }
  bool operator==(const AttrMap& o) const { return m_ == o.m_; }

 private:
  std::map<std::string, Attr> m_;
};

}  // namespace gsl::ir
