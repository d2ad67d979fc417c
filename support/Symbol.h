// An interned name: one pointer into a process-wide table of strings, so
// that comparing or hashing a mesh or axis name (ir::Sharding) compares a
// pointer instead of text. The table only grows; a Symbol stays valid for
// the life of the process, on every thread.
//
// Made from text explicitly (`Symbol("data")`); compared with another
// Symbol by identity, with text by its characters (no interning). Ordered
// by its text, so sets and sorts of Symbols list names as before.
#pragma once
#include <compare>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace gsl {

class Symbol {
 public:
  Symbol();  // the empty name ""
  explicit Symbol(std::string_view text);
  explicit Symbol(const std::string& text) : Symbol(std::string_view(text)) {}
  explicit Symbol(const char* text) : Symbol(std::string_view(text)) {}

  const std::string& str() const { return *text_; }
  operator const std::string&() const { return *text_; }
  bool empty() const { return text_->empty(); }
  size_t size() const { return text_->size(); }
  const char* c_str() const { return text_->c_str(); }

  friend bool operator==(Symbol a, Symbol b) { return a.text_ == b.text_; }
  friend bool operator==(Symbol a, std::string_view b) { return *a.text_ == b; }
  friend bool operator==(Symbol a, const std::string& b) { return *a.text_ == b; }
  friend bool operator==(Symbol a, const char* b) { return *a.text_ == b; }
  friend std::strong_ordering operator<=>(Symbol a, Symbol b) {
    return a.text_ == b.text_ ? std::strong_ordering::equal : *a.text_ <=> *b.text_;
  }

  friend std::string operator+(const std::string& a, Symbol b) { return a + *b.text_; }
  friend std::string operator+(const char* a, Symbol b) { return a + *b.text_; }
  friend std::string operator+(Symbol a, const std::string& b) { return *a.text_ + b; }
  friend std::string operator+(Symbol a, const char* b) { return *a.text_ + b; }

  size_t hash() const { return std::hash<const void*>()(text_); }

 private:
  const std::string* text_;
};

}  // namespace gsl

template <>
struct std::hash<gsl::Symbol> {
  size_t operator()(gsl::Symbol s) const { return s.hash(); }
};
