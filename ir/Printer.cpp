#include "ir/Printer.h"

#include <sstream>

namespace gsl::ir {

static std::string typeAndSharding(const Value& v) {
  std::string s = v.type.str();
  if (v.sharding) s += " " + v.sharding->str();
  return s;
}

static void printArgs(std::ostringstream& os, const Function& f) {
  os << "(";
  for (size_t i = 0; i < f.args.size(); ++i) {
    if (i) os << ", ";
    os << "%" << f.args[i]->id << ": " << typeAndSharding(*f.args[i]);
  }
  os << ")";
}

// The ops of `f`, each on its own line at `indent`; a loop's body follows
// its op, two spaces deeper, and ends with `yield` and a closing brace.
static void printOps(std::ostringstream& os, const Function& f, const std::string& indent) {
  for (auto& op : f.ops) {
    os << indent;
    for (size_t i = 0; i < op->results.size(); ++i) os << (i ? ", %" : "%") << op->results[i]->id;
    os << " = " << op->info().mnemonic;
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
    os << " :";
    for (size_t i = 0; i < op->results.size(); ++i)
      os << (i ? ", " : " ") << typeAndSharding(*op->results[i]);
    os << (op->body ? " {\n" : "\n");
    if (op->body) {
      const Function& b = *op->body;
      std::string inner = indent + "  ";
      os << inner << "body";
      printArgs(os, b);
      os << ":\n";
      printOps(os, b, inner);
      os << inner << "yield";
      for (size_t i = 0; i < b.results.size(); ++i) os << (i ? ", %" : " %") << b.results[i]->id;
      os << "\n" << indent << "}\n";
    }
  }
}

std::string printFunction(Function& f) {
  f.renumber();
  std::ostringstream os;
  os << "func @" << f.name;
  printArgs(os, f);
  os << " -> (";
  for (size_t i = 0; i < f.results.size(); ++i) {
    if (i) os << ", ";
    os << f.results[i]->type.str();
    if (i < f.resultShardings.size() && f.resultShardings[i]) os << " " << f.resultShardings[i]->str();
  }
  os << ") {\n";
  printOps(os, f, "  ");
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
