#include "ir/Module.h"

#include "support/Diagnostics.h"
#include <cmath>

namespace gsl::ir {

std::string formatDouble(double v);  // Attr.cpp

std::string ParamInit::str() const {
  switch (kind) {
    case Zeros: return "zeros";
    case Ones: return "ones";
    case Normal: return "normal(" + formatDouble(a) + ")";
    case Uniform: return "uniform(" + formatDouble(a) + ", " + formatDouble(b) + ")";
    case Glorot: return stacked ? "glorot(stacked = " + std::to_string(stacked) + ")" : "glorot";
  }
  return "?";
}

double LrSchedule::at(int64_t t) const {
  double step = (double)t;
  if (warmup > 0 && t < warmup) return peak * step / (double)warmup;
  switch (kind) {
    case Constant: return peak;
    case Linear:
    case Cosine: {
      if (t >= total) return end;
      double p = (step - (double)warmup) / (double)(total - warmup);
      if (kind == Linear) return peak + (end - peak) * p;
      return end + (peak - end) * 0.5 * (1.0 + std::cos(M_PI * p));
    }
    case Rsqrt: return peak * std::sqrt((double)warmup / step);
  }
  return peak;
}

std::string LrSchedule::str() const {
  static const char* names[] = {"constant", "linear_decay", "cosine_decay", "rsqrt_decay"};
  std::string r = std::string(names[kind]) + "(peak=" + formatDouble(peak) + ", warmup=" + std::to_string(warmup);
  if (kind == Linear || kind == Cosine) r += ", total=" + std::to_string(total) + ", end=" + formatDouble(end);
  return r + ")";
}

std::string Optimizer::str() const {
  static const char* names[] = {"sgd", "adam", "adamw", "adafactor"};
  std::string r = std::string(names[kind]) + "(";
  bool first = true;
  for (const auto& [k, v] : hp) {
    r += (first ? "" : ", ") + k + "=" + (k == "lr" && !lr.isConstant() ? lr.str() : formatDouble(v));
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

std::vector<int64_t> blocksPerDim(const Module& m, const TensorType& t, const std::optional<Sharding>& s) {
  std::vector<int64_t> n(t.shape.size(), 1);
  if (!s) return n;
  const Mesh* mesh = nullptr;
  for (size_t d = 0; d < n.size() && d < s->dims.size(); ++d) {
    if (s->dims[d].empty()) continue;
    if (!mesh) mesh = m.findMesh(s->mesh);
    GSL_ASSERT(mesh, "localShape: sharding " + s->str() + " names no mesh of the module");
    for (const auto& a : s->dims[d]) {
      GSL_ASSERT(mesh->axisIndex(a) >= 0, "localShape: mesh '" + mesh->name + "' has no axis '" + a + "'");
      n[d] *= mesh->axisSize(a);
    }
  }
  return n;
}

Shape localShape(const Module& m, const TensorType& t, const std::optional<Sharding>& s) {
  std::vector<int64_t> n = blocksPerDim(m, t, s);
  Shape r = t.shape;
  // A dim its blocks do not divide is padded (GSPMD): every rank holds
  // ceil(size / blocks) rows, the last ranks' blocks end in padding.
  for (size_t d = 0; d < r.size(); ++d) r[d] = (r[d] + n[d] - 1) / n[d];
  return r;
}

std::vector<int64_t> paddingPerDim(const Module& m, const TensorType& t, const std::optional<Sharding>& s) {
  std::vector<int64_t> n = blocksPerDim(m, t, s);
  for (size_t d = 0; d < n.size(); ++d) n[d] = (t.shape[d] + n[d] - 1) / n[d] * n[d] - t.shape[d];
  return n;
}

bool isPadded(const Module& m, const TensorType& t, const std::optional<Sharding>& s) {
  for (int64_t p : paddingPerDim(m, t, s))
    if (p) return true;
  return false;
}

Shape globalShape(const Module& m, const TensorType& local, const std::optional<Sharding>& s) {
  std::vector<int64_t> n = blocksPerDim(m, local, s);
  Shape r = local.shape;
  for (size_t d = 0; d < r.size(); ++d) r[d] *= n[d];
  return r;
}

}  // namespace gsl::ir
