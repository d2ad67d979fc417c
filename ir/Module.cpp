#include "ir/Module.h"

namespace gsl::ir {

std::string formatDouble(double v);  // Attr.cpp

std::string ParamInit::str() const {
  switch (kind) {
    case Zeros: return "zeros";
    case Ones: return "ones";
    case Normal: return "normal(" + formatDouble(a) + ")";
    case Uniform: return "uniform(" + formatDouble(a) + ", " + formatDouble(b) + ")";
    case Glorot: return "glorot";
  }
  return "?";
}

std::string Optimizer::str() const {
  static const char* names[] = {"sgd", "adam", "adafactor"};
  std::string r = std::string(names[kind]) + "(";
  bool first = true;
  for (const auto& [k, v] : hp) {
    r += (first ? "" : ", ") + k + "=" + formatDouble(v);
    first = false;
  }
  return r + ")";
}

const Optimizer* Module::findOptimizer(const std::string& name) const {
  for (const auto& o : optimizers)
    if (o.name == name) return &o;
  return nullptr;
}

const Mesh* Module::findMesh(const std::string& name) const {
  for (const auto& m : meshes)
    if (m.name == name) return &m;
  return nullptr;
}

const Param* Module::findParam(const std::string& name) const {
  for (const auto& p : params)
    if (p.name == name) return &p;
  return nullptr;
}

Function* Module::findFunction(const std::string& name) const {
  for (const auto& f : functions)
    if (f->name == name) return f.get();
  return nullptr;
}

}  // namespace gsl::ir
