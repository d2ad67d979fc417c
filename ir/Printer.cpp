#include "ir/Printer.h"

#include <sstream>

namespace gsl::ir {

static std::string typeAndSharding(const Value& v) {
  std::string s = v.type.str();
  if (v.sharding) s += " " + v.sharding->str();
  return s;
}

std::string printFunction(Function& f) {
  f.renumber();
  std::ostringstream os;
  os << "func @" << f.name << "(";
  for (size_t i = 0; i < f.args.size(); ++i) {
    if (i) os << ", ";
    os << "%" << f.args[i]->id << ": " << typeAndSharding(*f.args[i]);
  }
  os << ") -> (";
  for (size_t i = 0; i < f.results.size(); ++i) {
    if (i) os << ", ";
    os << f.results[i]->type.str();
    if (i < f.resultShardings.size() && f.resultShardings[i]) os << " " << f.resultShardings[i]->str();
  }
  os << ") {\n";
  for (auto& op : f.ops) {
    os << "  %" << op->result->id << " = " << op->info().mnemonic;
    for (size_t i = 0; i < op->operands.size(); ++i)
      os << (i ? ", %" : " %") << op->operands[i]->id;
    if (!op->attrs.empty()) {
      os << " {";
      bool first = true;
      for (const auto& [k, v] : op->attrs.all()) {
        os << (first ? "" : ", ") << k << " = " << attrStr(v);
        first = false;
      }
      os << "}";
    }
    os << " : " << typeAndSharding(*op->result) << "\n";
  }
  os << "  return";
  for (size_t i = 0; i < f.results.size(); ++i) os << (i ? ", %" : " %") << f.results[i]->id;
  os << "\n}\n";
  return os.str();
}

std::string printModule(Module& m) {
  std::ostringstream os;
  os << "np = " << m.np << "\n";
  for (const auto& mesh : m.meshes) os << mesh.str() << "\n";
  for (const auto& p : m.params) {
    os << "param @" << p.name << " : " << p.type.str();
    if (p.sharding) os << " " << p.sharding->str();
    os << " = " << p.init.str() << "\n";
  }
  for (auto& f : m.functions) os << "\n" << printFunction(*f);
  return os.str();
}

}  // namespace gsl::ir
