#include "ir/ShardRules.h"

#include <algorithm>
#include <map>

#include "support/Diagnostics.h"

namespace gsl::ir {

namespace {

struct Builder {
  DimLabels L;
  int next = 0;
  int fresh() { return next++; }
  int freshUnsplittable() {
    int l = next++;
    L.unsplittable.insert(l);
    return l;
  }
};

// Result dims 0..r-1 get labels 0..r-1; operand dims align from the right
// (NumPy broadcasting); a size-1 operand dim broadcast to a larger result
// dim gets its own unsplittable label.
void broadcastLabels(Builder& b, const Op& op) {
  const Shape& rs = op.result->type.shape;
  for (size_t d = 0; d < rs.size(); ++d) b.L.result.push_back(b.fresh());
  for (Value* v : op.operands) {
    std::vector<int> ls;
    const Shape& s = v->type.shape;
    size_t off = rs.size() - s.size();
    for (size_t d = 0; d < s.size(); ++d) {
      if (s[d] == 1 && rs[off + d] != 1) ls.push_back(b.freshUnsplittable());
      else ls.push_back(b.L.result[off + d]);
    }
    b.L.operands.push_back(ls);
  }
}

// Same labels on the (single) operand and result, with `axes` unsplittable.
void sameLabels(Builder& b, const Op& op, const std::vector<int64_t>& unsplit) {
  for (int d = 0; d < op.result->type.rank(); ++d) b.L.result.push_back(b.fresh());
  for (auto a : unsplit) b.L.unsplittable.insert(b.L.result[a]);
  for (size_t i = 0; i < op.operands.size(); ++i) b.L.operands.push_back(b.L.result);
}

void matmulLabels(Builder& b, const Op& op) {
  const Shape &sa = op.operands[0]->type.shape, &sb = op.operands[1]->type.shape;
  const Shape& rs = op.result->type.shape;
  bool aVec = sa.size() == 1, bVec = sb.size() == 1;
  size_t batch = rs.size() - (aVec ? 0 : 1) - (bVec ? 0 : 1);
  std::vector<int> batchL;
  for (size_t d = 0; d < batch; ++d) batchL.push_back(b.fresh());
  int m = b.fresh(), k = b.fresh(), n = b.fresh();
  auto side = [&](const Shape& s, bool vec, bool isA) {
    std::vector<int> ls;
    size_t nb = vec ? 0 : s.size() - 2;
    for (size_t d = 0; d < nb; ++d) {
      size_t rd = batch - nb + d;
      ls.push_back(s[d] == 1 && rs[rd] != 1 ? b.freshUnsplittable() : batchL[rd]);
    }
    if (isA) {
      if (!vec) ls.push_back(m);
      ls.push_back(k);
    } else {
      ls.push_back(k);
      if (!vec) ls.push_back(n);
    }
    return ls;
  };
  b.L.operands.push_back(side(sa, aVec, true));
  b.L.operands.push_back(side(sb, bVec, false));
  b.L.result = batchL;
  if (!aVec) b.L.result.push_back(m);
  if (!bVec) b.L.result.push_back(n);
  b.L.partialSum = true;
}

void einsumLabels(Builder& b, const Op& op) {
  const EinsumSpec& es = op.attrs.getEinsum("spec");
  std::map<char, int> lab;
  auto get = [&](char c) {
    auto it = lab.find(c);
    if (it != lab.end()) return it->second;
    return lab[c] = b.fresh();
  };
  for (const auto& in : es.inputs) {
    std::vector<int> ls;
    for (char c : in) {
      ls.push_back(get(c));
      if (std::count(in.begin(), in.end(), c) > 1) b.L.unsplittable.insert(get(c));  // diagonal
    }
    b.L.operands.push_back(ls);
  }
  for (char c : es.output) b.L.result.push_back(get(c));
  b.L.partialSum = true;
}

void reduceLabels(Builder& b, const Op& op, bool partial) {
  const auto& axes = op.attrs.getInts("axis");
  bool keep = op.attrs.has("keepdims") && op.attrs.getBool("keepdims");
  std::vector<int> in;
  for (int d = 0; d < op.operands[0]->type.rank(); ++d) {
    bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
    int l = b.fresh();
    if (reduced && !partial) b.L.unsplittable.insert(l);
    in.push_back(l);
    if (!reduced) b.L.result.push_back(l);
    else if (keep) b.L.result.push_back(b.freshUnsplittable());
  }
  b.L.operands.push_back(in);
  b.L.partialSum = partial;
}

// Reshape: dims are matched in groups of equal element count. In a group,
// only the major-most input dim and the major-most output dim share a label
// (splitting the major dim of a merged group keeps blocks contiguous); the
// other dims of a group are unsplittable.
void reshapeLabels(Builder& b, const Op& op) {
  const Shape &in = op.operands[0]->type.shape, &out = op.result->type.shape;
  std::vector<int> li(in.size()), lo(out.size());
  size_t i = 0, o = 0;
  while (i < in.size() || o < out.size()) {
    // Size-1 dims form their own groups.
    if (i < in.size() && in[i] == 1) {
      li[i++] = b.freshUnsplittable();
      continue;
    }
    if (o < out.size() && out[o] == 1) {
      lo[o++] = b.freshUnsplittable();
      continue;
    }
    if (i >= in.size() || o >= out.size()) break;
    size_t i0 = i, o0 = o;
    int64_t pi = in[i++], po = out[o++];
    while (pi != po) {
      if (pi < po) pi *= in[i++];
      else po *= out[o++];
    }
    int shared = b.fresh();
    li[i0] = shared;
    lo[o0] = shared;
    for (size_t k = i0 + 1; k < i; ++k) li[k] = b.freshUnsplittable();
    for (size_t k = o0 + 1; k < o; ++k) lo[k] = b.freshUnsplittable();
  }
  b.L.operands.push_back(li);
  b.L.result = lo;
}

}  // namespace

// ---------------------------------------------------------------- the rules

DimLabels shardSource(const Op& op) {
  Builder b;
  for (int d = 0; d < op.result->type.rank(); ++d) b.L.result.push_back(b.fresh());
  return b.L;
}

DimLabels shardBroadcasting(const Op& op) {
  Builder b;
  broadcastLabels(b, op);
  return b.L;
}

DimLabels shardMatMul(const Op& op) {
  Builder b;
  matmulLabels(b, op);
  return b.L;
}

DimLabels shardEinsum(const Op& op) {
  Builder b;
  einsumLabels(b, op);
  return b.L;
}

DimLabels shardPartialReduce(const Op& op) {
  Builder b;
  reduceLabels(b, op, true);
  return b.L;
}

DimLabels shardReduce(const Op& op) {
  Builder b;
  reduceLabels(b, op, false);
  return b.L;
}

DimLabels shardArgMax(const Op& op) {
  Builder b;
  int64_t ax = op.attrs.getInt("axis");
  std::vector<int> in;
  for (int d = 0; d < op.operands[0]->type.rank(); ++d) {
    int l = d == ax ? b.freshUnsplittable() : b.fresh();
    in.push_back(l);
    if (d != ax) b.L.result.push_back(l);
  }
  b.L.operands.push_back(in);
  return b.L;
}

DimLabels shardAlongAxis(const Op& op) {
  Builder b;
  sameLabels(b, op, {op.attrs.getInt("axis")});
  return b.L;
}

DimLabels shardAlongAxes(const Op& op) {
  Builder b;
  sameLabels(b, op, op.attrs.getInts("axis"));
  return b.L;
}

DimLabels shardReshape(const Op& op) {
  Builder b;
  reshapeLabels(b, op);
  return b.L;
}

DimLabels shardTranspose(const Op& op) {
  Builder b;
  const auto& perm = op.attrs.getInts("perm");
  std::vector<int> in;
  for (int d = 0; d < op.operands[0]->type.rank(); ++d) in.push_back(b.fresh());
  for (auto p : perm) b.L.result.push_back(in[p]);
  b.L.operands.push_back(in);
  return b.L;
}

DimLabels shardOneHot(const Op& op) {
  Builder b;
  std::vector<int> in;
  for (int d = 0; d < op.operands[0]->type.rank(); ++d) in.push_back(b.fresh());
  b.L.operands.push_back(in);
  b.L.result = in;
  b.L.result.push_back(b.freshUnsplittable());
  return b.L;
}

DimLabels shardTake(const Op& op) {
  // The table's row dim is contracted: split, each rank gathers the ids in
  // its row range (zeros elsewhere) and the partial results sum to the
  // whole (a vocab-parallel embedding; partitionTake).
  Builder b;
  b.L.partialSum = true;
  std::vector<int> table{b.fresh()}, idx;
  for (int d = 0; d < op.operands[1]->type.rank(); ++d) idx.push_back(b.fresh());
  b.L.result = idx;
  for (int d = 1; d < op.operands[0]->type.rank(); ++d) {
    table.push_back(b.fresh());
    b.L.result.push_back(table.back());
  }
  b.L.operands = {table, idx};
  return b.L;
}

DimLabels shardRandom(const Op& op) {
  // The seed is a replicated scalar; the result may be split (each rank
  // keeps its block of the global stream).
  Builder b;
  for (int d = 0; d < op.result->type.rank(); ++d) b.L.result.push_back(b.fresh());
  b.L.operands.push_back({});
  return b.L;
}

DimLabels shardDropout(const Op& op) {
  // Elementwise on x; the key (step and block offsets) is read whole by
  // every rank (partitionDropout adds the rank's offsets to it).
  Builder b;
  for (int d = 0; d < op.result->type.rank(); ++d) b.L.result.push_back(b.fresh());
  b.L.operands.push_back(b.L.result);
  if (op.operands.size() > 1) b.L.operands.push_back({b.freshUnsplittable()});
  return b.L;
}

DimLabels dimLabels(const Op& op) {
  const OpInfo& info = op.info();
  GSL_ASSERT(info.shard, std::string("op '") + info.mnemonic +
                             "' has no sharding rule (it only exists in per-rank programs)");
  return info.shard(op);
}

}  // namespace gsl::ir
