#include "passes/CostModel.h"

#include <algorithm>
#include <map>
#include <set>

namespace gsl::passes {

using namespace ir;

static uint64_t bytesOf(const TensorType& t) { return (uint64_t)t.byteSize(); }

static uint64_t opFlops(const Op& op) {
  uint64_t out = (uint64_t)op.result->type.numElements();
  switch (op.info().cls) {
    case OpClass::Unary:
    case OpClass::Binary:
    case OpClass::Ternary: return op.kind == OpKind::Copy ? 0 : out;
    case OpClass::Reduction: return (uint64_t)op.operands[0]->type.numElements();
    case OpClass::Normalization: return 5 * out;
    case OpClass::Contraction: {
      if (op.kind == OpKind::MatMul) {
        const Shape& a = op.operands[0]->type.shape;
        return 2 * out * (uint64_t)a.back();
      }
      const EinsumSpec& es = op.attrs.getEinsum("spec");
      std::map<char, int64_t> size;
      for (size_t i = 0; i < es.inputs.size(); ++i)
        for (size_t d = 0; d < es.inputs[i].size(); ++d) size[es.inputs[i][d]] = op.operands[i]->type.shape[d];
      uint64_t all = 1;
      for (auto& [c, n] : size) all *= (uint64_t)n;
      return 2 * all;
    }
    default: return 0;
  }
}

// The m, n, k and batch count of a contraction's products (an einsum's
// letters: in both operands and the result = batch; in one operand and
// the result = m or n; in no result = k). False for an einsum of other
// than two operands.
static bool gemmDims(const Op& op, int64_t& m, int64_t& n, int64_t& k, int64_t& batch) {
  const Shape& out = op.result->type.shape;
  if (op.kind == OpKind::MatMul) {
    const Shape& a = op.operands[0]->type.shape;
    k = a.empty() ? 1 : a.back();
    n = out.empty() ? 1 : out.back();
    m = out.size() >= 2 && a.size() >= 2 ? out[out.size() - 2] : 1;
    const int64_t all = op.result->type.numElements();
    batch = m * n > 0 ? all / (m * n) : 0;
    return true;
  }
  const EinsumSpec& es = op.attrs.getEinsum("spec");
  if (es.inputs.size() != 2) return false;
  std::map<char, int64_t> size;
  for (size_t i = 0; i < 2; ++i)
    for (size_t d = 0; d < es.inputs[i].size(); ++d) size[es.inputs[i][d]] = op.operands[i]->type.shape[d];
  m = n = k = batch = 1;
  for (auto [c, s] : size) {
    const bool inA = es.inputs[0].find(c) != std::string::npos, inB = es.inputs[1].find(c) != std::string::npos,
               inOut = es.output.find(c) != std::string::npos;
    if (inOut && inA && inB) batch *= s;
    else if (inOut && inA) m *= s;
    else if (inOut) n *= s;
    else k *= s;
  }
  return true;
}

double opSeconds(const Module& mod, const Op& op, const MachineModel& machine) {
  (void)mod;
  const uint64_t flops = opFlops(op);
  if (op.info().cls == OpClass::Contraction) {
    int64_t m = 0, n = 0, k = 0, batch = 0;
    const GemmClass c = gemmDims(op, m, n, k, batch) ? gemmClassOf(m, n, k) : GemmClass::Small;
    return (double)flops / machine.gemmFlopsPerS[(int)c] + machine.opOverheadS;
  }
  switch (op.info().cls) {
    case OpClass::Unary:
    case OpClass::Binary:
    case OpClass::Ternary:
    case OpClass::Reduction:
    case OpClass::Normalization:
    case OpClass::DataMovement:
    case OpClass::Random: {
      // A copy of the global program is an annotation, a reshape a view.
      if (op.kind == OpKind::Copy || op.kind == OpKind::Reshape) return 0;
      double s = (double)flops / machine.elementwiseFlopsPerS;
      if (machine.memoryBytesPerS > 0) {
        uint64_t moved = bytesOf(op.result->type);
        for (const Value* v : op.operands) moved += bytesOf(v->type);
        const bool inCache = moved <= MachineModel::kCacheBytes && machine.cacheBytesPerS > 0;
        s = std::max(s, (double)moved / (inCache ? machine.cacheBytesPerS : machine.memoryBytesPerS));
      }
      return s + machine.opOverheadS;
    }
    default: return 0;
  }
}

Cost estimateCost(const Module& m, const Function& f, const MachineModel& machine) {
  Cost c;
  c.callSeconds = machine.callOverheadS;
  std::set<std::string> params;
  std::map<const Value*, size_t> lastUse;
  for (size_t i = 0; i < f.ops.size(); ++i)
    for (Value* v : f.ops[i]->operands) lastUse[v] = i;
  for (Value* r : f.results) lastUse[r] = f.ops.size();
  uint64_t live = 0;
  for (Value* a : f.args) live += bytesOf(a->type);
  c.peakActivationBytes = live;
  for (size_t i = 0; i < f.ops.size(); ++i) {
    const Op& op = *f.ops[i];
    c.flops += opFlops(op);  // 0 for a loop
    (op.info().cls == OpClass::Contraction ? c.gemmSeconds : c.otherSeconds) += opSeconds(m, op, machine);
    if (op.body) {
      // A loop: its body's flops and collectives once per iteration; what
      // its body holds beyond its arguments (they are the loop's operands,
      // already live here or params) on top of the values live here and the
      // loop's results.
      const Cost b = estimateCost(m, *op.body, machine);
      uint64_t bodyArgs = 0;
      for (const Value* a : op.body->args) bodyArgs += bytesOf(a->type);
      const uint64_t trip = (uint64_t)op.attrs.getInt("trip");
      c.addTimes(b, trip);
      for (const Value* r : op.results) live += bytesOf(r->type);
      c.peakActivationBytes = std::max(c.peakActivationBytes, live + (b.peakActivationBytes - bodyArgs));
    } else if (op.kind == OpKind::Param) {
      if (params.insert(op.attrs.getString("name")).second) c.paramBytes += bytesOf(op.result->type);
    } else {
      live += bytesOf(op.result->type);
    }
    if (VolumeRule volume = op.info().volume) {
      // The group size: all_reduce keeps no `n` attr, its mesh axes give it.
      uint64_t n = op.attrs.has("n") ? (uint64_t)op.attrs.getInt("n") : 1;
      if (!op.attrs.has("n")) {
        const Mesh* mesh = m.findMesh(op.attrs.getString("mesh"));
        if (mesh)
          for (auto a : op.attrs.getInts("axes")) n *= (uint64_t)mesh->axes[a].size;
      }
      auto& cc = c.collectives[op.kind];
      const uint64_t sent = volume(n, bytesOf(op.operands[0]->type));
      cc.calls += 1;
      cc.bytes += sent;
      c.collectiveSeconds += machine.collectiveSeconds(op.kind, 1, sent);
    }
    c.peakActivationBytes = std::max(c.peakActivationBytes, live);
    // Free operands (and the result, if unused) after their last use.
    std::set<const Value*> freed;
    for (Value* v : op.operands)
      if (lastUse[v] == i && freed.insert(v).second && !(v->def && v->def->kind == OpKind::Param))
        live -= bytesOf(v->type);
    for (const Value* r : op.results)
      if (!lastUse.count(r) && op.kind != OpKind::Param) live -= bytesOf(r->type);
  }
  return c;
}

void Cost::addTimes(const Cost& b, uint64_t n) {
  flops += b.flops * n;
  gemmSeconds += b.gemmSeconds * (double)n;
  otherSeconds += b.otherSeconds * (double)n;
  collectiveSeconds += b.collectiveSeconds * (double)n;
  for (const auto& [k, v] : b.collectives) {
    collectives[k].calls += v.calls * n;
    collectives[k].bytes += v.bytes * n;
  }
}

nlohmann::ordered_json costJson(const Cost& c) {
  nlohmann::ordered_json collectives = nlohmann::ordered_json::object();
  for (const auto& [kind, v] : c.collectives) collectives[ir::opName(kind)] = {{"calls", v.calls}, {"bytes", v.bytes}};
  return {{"flops", c.flops},
          {"param_bytes", c.paramBytes},
          {"peak_activation_bytes", c.peakActivationBytes},
          {"collectives", std::move(collectives)},
          {"predicted_seconds",
           {{"gemm", c.gemmSeconds},
            {"other", c.otherSeconds},
            {"call", c.callSeconds},
            {"collectives", c.collectiveSeconds},
            {"total", c.seconds()}}}};
}

}  // namespace gsl::passes
