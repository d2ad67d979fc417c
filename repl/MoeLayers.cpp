// :cost's MoE layers: found by their dispatch and combine einsums, with
// their capacity, tensors and all_to_all bytes.
#include "repl/MoeLayers.h"

#include <cstdio>
#include <functional>
#include <set>

#include "ir/Einsum.h"
#include "ir/Loop.h"
#include "repl/Lookup.h"
#include "repl/Text.h"

namespace gsl::repl {

using ir::Op;
using ir::OpKind;
using ir::Value;

namespace {

// An einsum of two operands: its spec's operand and result letters.
struct Spec {
  std::string in[2], out;
};

bool parseSpec(const Op& op, Spec& s) {
  if (op.kind != OpKind::Einsum || op.operands.size() != 2 || !op.attrs.has("spec")) return false;
  const ir::EinsumSpec& e = op.attrs.getEinsum("spec");
  if (e.inputs.size() != 2) return false;
  s.in[0] = e.inputs[0];
  s.in[1] = e.inputs[1];
  s.out = e.output;
  return true;
}

bool distinct(const std::string& s) { return std::set<char>(s.begin(), s.end()).size() == s.size(); }

// The operand that is the [G, S, E, C] tensor of a dispatch einsum
// (gsec, gsm -> egcm), or -1.
int dispatchOperand(const Op& op) {
  Spec s;
  if (!parseSpec(op, s)) return -1;
  for (int t = 0; t < 2; ++t) {
    const std::string& T = s.in[t];
    const std::string& X = s.in[1 - t];
    if (T.size() == 4 && X.size() == 3 && s.out.size() == 4 && distinct(T + X[2]) && X[0] == T[0] &&
        X[1] == T[1] && s.out == std::string{T[2], T[0], T[3], X[2]})
      return t;
  }
  return -1;
}

// The operand that is the [G, S, E, C] tensor of a combine einsum
// (gsec, egcm -> gsm), or -1.
int combineOperand(const Op& op) {
  Spec s;
  if (!parseSpec(op, s)) return -1;
  for (int t = 0; t < 2; ++t) {
    const std::string& T = s.in[t];
    const std::string& Y = s.in[1 - t];
    if (T.size() == 4 && Y.size() == 4 && s.out.size() == 3 && distinct(T + Y[3]) &&
        Y == std::string{T[2], T[0], T[3], Y[3]} && s.out == std::string{T[0], T[1], Y[3]})
      return t;
  }
  return -1;
}

// A dispatch or combine einsum: the function (body) holding it, the loops
// around it (outermost first), and which operand is the [G, S, E, C] tensor.
struct Site {
  const Op* op = nullptr;
  const ir::Function* fn = nullptr;
  std::vector<const Op*> loops;
  int tensor = 0;
};

void collect(const ir::Function& f, std::vector<const Op*>& loops, std::vector<Site>& dispatches,
             std::vector<Site>& combines) {
  for (const auto& op : f.ops) {
    if (int t = dispatchOperand(*op); t >= 0) dispatches.push_back({op.get(), &f, loops, t});
    else if (int t = combineOperand(*op); t >= 0) combines.push_back({op.get(), &f, loops, t});
    if (op->body) {
      loops.push_back(op.get());
      collect(*op->body, loops, dispatches, combines);
      loops.pop_back();
    }
  }
}

bool movesOnly(OpKind k) { return k == OpKind::Reshape || k == OpKind::Copy || k == OpKind::Transpose; }

// The all_to_alls that take a dispatch einsum's result (through reshapes
// and copies) to the experts.
std::vector<const Op*> afterDispatch(const Site& d) {
  std::set<const Value*> chain{d.op->result};
  std::vector<const Op*> found;
  bool after = false;
  for (const auto& op : d.fn->ops) {
    if (op.get() == d.op) {
      after = true;
      continue;
    }
    if (!after || op->operands.empty() || !chain.count(op->operands[0])) continue;
    if (op->kind == OpKind::AllToAll) found.push_back(op.get());
    if (op->kind == OpKind::AllToAll || movesOnly(op->kind)) chain.insert(op->result);
  }
  return found;
}

// The all_to_alls that bring the experts' outputs back to a combine einsum.
std::vector<const Op*> beforeCombine(const Site& c) {
  std::vector<const Op*> found;
  for (const Value* v = c.op->operands[1 - c.tensor];
       v->def && (v->def->kind == OpKind::AllToAll || movesOnly(v->def->kind)); v = v->def->operands[0])
    if (v->def->kind == OpKind::AllToAll) found.insert(found.begin(), v->def);
  return found;
}

// What one rank sends for collective `op` (as passes/CostModel counts it).
uint64_t sentBytes(const ir::Module& m, const Op& op) {
  uint64_t n = 1;
  if (op.attrs.has("n")) {
    n = (uint64_t)op.attrs.getInt("n");
  } else if (const ir::Mesh* mesh = m.findMesh(op.attrs.getString("mesh"))) {
    for (auto a : op.attrs.getInts("axes")) n *= (uint64_t)mesh->axes[a].size;
  }
  return op.info().volume ? op.info().volume(n, (uint64_t)op.operands[0]->type.byteSize()) : 0;
}

int64_t tripOf(const std::vector<const Op*>& loops) {
  int64_t t = 1;
  for (const Op* l : loops) t *= ir::LoopInfo(*l).trip;
  return t;
}

std::string typeBytes(const ir::TensorType& t) { return t.str() + ": " + thousands((uint64_t)t.byteSize()) + " B"; }

std::string calls(const std::vector<const Op*>& ops, const ir::Module& m, uint64_t& bytes) {
  bytes = 0;
  for (const Op* op : ops) bytes += sentBytes(m, *op);
  return std::to_string(ops.size()) + (ops.size() == 1 ? " call, " : " calls, ") + thousands(bytes) + " B";
}

// The function a dispatch einsum was written in and its caller: the
// call path of its result without the let's own name ("layer_pair.moe_layer_stats").
std::string callerText(const Site& d) {
  const auto& paths = d.fn->names.callPaths(d.op->result);
  if (paths.empty()) return "";
  std::string p = paths.back();  // the longest (outermost) path
  const size_t dot = p.rfind('.');
  if (dot == std::string::npos) return "";
  p = p.substr(0, dot);
  // At most the last two calls: the layer function and its caller.
  size_t cut = p.rfind('.');
  if (cut != std::string::npos) cut = p.rfind('.', cut - 1);
  return cut == std::string::npos ? p : p.substr(cut + 1);
}

}  // namespace

int64_t countMoeLayers(const ir::Function& f) {
  std::vector<const Op*> loops;
  std::vector<Site> d, c;
  collect(f, loops, d, c);
  return (int64_t)d.size();
}

std::string moeLayersText(const Build& b, const ir::Module& m, const ir::Function& global, const ir::Function& local,
                          int64_t forwardLayers) {
  std::vector<const Op*> loops;
  std::vector<Site> ld, lc, gd, gc;
  collect(local, loops, ld, lc);
  collect(global, loops, gd, gc);
  size_t n = std::min(ld.size(), lc.size());
  if (forwardLayers >= 0) n = std::min(n, (size_t)forwardLayers);
  if (n == 0) return "";
  // The global program's sites give the whole tensors and the names; they
  // are the local ones in the same order (the partitioner keeps the order).
  const bool haveGlobal = gd.size() >= n && gc.size() >= n;
  std::string out = "MoE layers, found by their dispatch einsum (gsec,gsm->egcm) and combine einsum (gsec,egcm->gsm):\n";
  uint64_t forwardBytes = 0, forwardCalls = 0;
  for (size_t k = 0; k < n; ++k) {
    const Site& d = ld[k];
    const Site& c = lc[k];
    const Site& gdk = haveGlobal ? gd[k] : d;
    const Site& gck = haveGlobal ? gc[k] : c;
    const ir::TensorType dispatch = gdk.op->operands[gdk.tensor]->type;
    const ir::TensorType combine = gck.op->operands[gck.tensor]->type;
    const ir::TensorType tokens = gdk.op->operands[1 - gdk.tensor]->type;
    const int64_t G = dispatch.shape[0], S = dispatch.shape[1], E = dispatch.shape[2], C = dispatch.shape[3];
    const int64_t trip = tripOf(d.loops);
    std::string head = "  layer " + std::to_string(k + 1);
    const std::string caller = callerText(gdk);
    if (!caller.empty()) head += ": " + caller;
    if (!gdk.loops.empty()) head += (caller.empty() ? ": in " : ", in ") + loopText(b, *gdk.loops.back());
    if (trip > 1) head += ": " + std::to_string(trip) + " layers (one per iteration), each:";
    out += head + "\n";
    char line[200];
    std::snprintf(line, sizeof line,
                  "    %lld experts, %lld groups of %lld tokens, capacity C = %lld tokens per expert and group "
                  "(capacity factor C E / S = %.2f), width %lld\n",
                  (long long)E, (long long)G, (long long)S, (long long)C, (double)(C * E) / (double)S,
                  (long long)tokens.shape[2]);
    out += line;
    out += "    dispatch tensor " + typeBytes(dispatch) + ", this rank's block " +
           typeBytes(d.op->operands[d.tensor]->type) + "\n";
    out += "    combine tensor " + typeBytes(combine) + ", this rank's block " +
           typeBytes(c.op->operands[c.tensor]->type) + "\n";
    uint64_t db = 0, cb = 0;
    const std::vector<const Op*> da = afterDispatch(d), ca = beforeCombine(c);
    if (da.empty() && ca.empty()) {
      out += "    all_to_all: none (the tokens do not move between ranks)\n";
    } else {
      const std::string dt = calls(da, m, db), ct = calls(ca, m, cb);
      out += "    all_to_all sent by this rank: dispatch " + dt + "; combine " + ct + "\n";
    }
    forwardBytes += (db + cb) * (uint64_t)trip;
    forwardCalls += (da.size() + ca.size()) * (uint64_t)trip;
  }
  if (forwardLayers >= 0) {
    // A training step: the all_to_alls of its backward pass, not split by layer.
    uint64_t bytes = 0, count = 0;
    std::function<void(const ir::Function&, uint64_t)> all = [&](const ir::Function& f, uint64_t times) {
      for (const auto& op : f.ops) {
        if (op->kind == OpKind::AllToAll) bytes += sentBytes(m, *op) * times, count += times;
        if (op->body) all(*op->body, times * (uint64_t)ir::LoopInfo(*op).trip);
      }
    };
    all(local, 1);
    if (count > forwardCalls)
      out += "  the backward pass: " + std::to_string(count - forwardCalls) + " more all_to_all calls, " +
             thousands(bytes - forwardBytes) + " B sent (the layers' gradients, not split by layer)\n";
  }
  return out;
}

}  // namespace gsl::repl
