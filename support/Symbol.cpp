#include "support/Symbol.h"

#include <mutex>
#include <unordered_set>

namespace gsl {

namespace {
// The table: a node-based set, so an element's address never moves.
struct Table {
  std::mutex mu;
  std::unordered_set<std::string> names;
};
Table& table() {
  static Table* t = new Table;  // never destroyed: Symbols outlive statics
  return *t;
}
const std::string* intern(std::string_view text) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  return &*t.names.emplace(text).first;
}
}  // namespace

Symbol::Symbol() {
  static const std::string* empty = intern("");
  text_ = empty;
}

Symbol::Symbol(std::string_view text) : text_(intern(text)) {}

}  // namespace gsl
