// Test cases for the collective ops, shared by the thread-rank unit tests
// (runtime_comm_test.cpp) and the MPI test program (tests/mpi/).
//
// Each rank's input is a known function of (rank, element index); every
// expected value is computed here directly from that function and a group
// computed independently of backend::collectiveGroup (by filtering all ranks
// on their mesh coordinates), never with the code under test. No test
// framework: checks return "" or a description of what went wrong.
#pragma once
#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/Communicator.h"
#include "backend/Kernels.h"
#include "ir/Function.h"
#include "ir/OpTable.h"

namespace commtest {

using namespace gsl;
using backend::CommStats;
using backend::Tensor;
using ir::AttrMap;
using ir::DType;
using ir::OpKind;
using ir::Shape;
using ir::TensorType;

inline ir::Mesh makeMesh(std::vector<std::pair<std::string, int64_t>> axes) {
  ir::Mesh m;
  m.name = "m";
  for (auto& [n, s] : axes) m.axes.push_back({n, s});
  return m;
}

inline std::vector<int64_t> unravel(int64_t flat, const Shape& s) {
  std::vector<int64_t> idx(s.size());
  for (int d = (int)s.size() - 1; d >= 0; --d) {
    idx[d] = flat % s[d];
    flat /= s[d];
  }
  return idx;
}

inline int64_t ravel(const std::vector<int64_t>& idx, const Shape& s) {
  int64_t f = 0;
  for (size_t d = 0; d < s.size(); ++d) f = f * s[d] + idx[d];
  return f;
}

inline float asF32(int32_t w) {
  float f;
  std::memcpy(&f, &w, 4);
  return f;
}

inline int32_t fromF32(float f) {
  int32_t w;
  std::memcpy(&w, &f, 4);
  return w;
}

// The input of `rank` at flat index i, as a raw 4-byte word. f32 values are
// multiples of 0.25 in [-11, 11], so sums over <= 64 ranks are exact.
inline int32_t word(DType dt, int rank, int64_t i) {
  switch (dt) {
    case DType::F32: return fromF32((float)(((rank * 37 + i * 11) % 89) - 44) * 0.25f);
    case DType::I32: return (int32_t)(rank * 100003 + i * 7 - 50000 * (i % 3));
    case DType::Bool: return (rank + i * 3) % 3 == 0 ? 1 : 0;
  }
  return 0;
}

inline Tensor input(DType dt, const Shape& s, int rank) {
  Tensor t(TensorType{dt, s});
  for (int64_t i = 0; i < t.size(); ++i) static_cast<int32_t*>(t.raw())[i] = word(dt, rank, i);
  return t;
}

// The group of `rank` over `axes`: every rank agreeing with it off `axes`,
// sorted by its coordinates along `axes` (in the listed order).
inline std::vector<int> refGroup(const ir::Mesh& m, const std::vector<int64_t>& axes, int rank, int* index) {
  auto c = m.coords(rank);
  std::vector<std::pair<std::vector<int64_t>, int>> members;
  for (int q = 0; q < m.numDevices(); ++q) {
    auto cq = m.coords(q);
    bool same = true;
    for (size_t a = 0; a < m.axes.size(); ++a)
      if (std::find(axes.begin(), axes.end(), (int64_t)a) == axes.end() && cq[a] != c[a]) same = false;
    if (!same) continue;
    std::vector<int64_t> key;
    for (int64_t a : axes) key.push_back(cq[a]);
    members.push_back({key, q});
  }
  std::sort(members.begin(), members.end());
  std::vector<int> g;
  for (auto& [k, q] : members) {
    if (q == rank) *index = (int)g.size();
    g.push_back(q);
  }
  return g;
}

// Reduces element i of the members' inputs.
inline int32_t reduceRef(DType dt, const std::string& op, const std::vector<int>& g, int64_t i) {
  if (dt == DType::F32) {
    float acc = asF32(word(dt, g[0], i));
    for (size_t m = 1; m < g.size(); ++m) {
      float v = asF32(word(dt, g[m], i));
      acc = op == "sum" ? acc + v : op == "max" ? std::max(acc, v) : std::min(acc, v);
    }
    return fromF32(acc);
  }
  if (dt == DType::Bool) {  // max = or, min = and
    bool acc = op == "min";
    for (int q : g) acc = op == "max" ? (acc || word(dt, q, i)) : (acc && word(dt, q, i));
    return acc ? 1 : 0;
  }
  uint32_t sum = 0;  // i32 sums wrap
  int32_t acc = word(dt, g[0], i);
  for (int q : g) {
    int32_t v = word(dt, q, i);
    sum += (uint32_t)v;
    acc = op == "max" ? std::max(acc, v) : std::min(acc, v);
  }
  return op == "sum" ? (int32_t)sum : acc;
}

inline std::string axesStr(const std::vector<int64_t>& a) {
  std::string s = "[";
  for (size_t i = 0; i < a.size(); ++i) s += (i ? ", " : "") + std::to_string(a[i]);
  return s + "]";
}

// Every ordered selection of distinct mesh axes (including none).
inline std::vector<std::vector<int64_t>> axisLists(int rank) {
  std::vector<std::vector<int64_t>> out;
  std::function<void(std::vector<int64_t>)> rec = [&](std::vector<int64_t> cur) {
    out.push_back(cur);
    for (int64_t a = 0; a < rank; ++a) {
      if (std::find(cur.begin(), cur.end(), a) != cur.end()) continue;
      auto next = cur;
      next.push_back(a);
      rec(next);
    }
  };
  rec({});
  return out;
}

// One collective op on a fresh single-op function over `mesh`, typed by
// ir::inferType, its groups resolved (as passes/ResolveGroups does).
struct OneOp {
  ir::Function f;
  ir::Op* op = nullptr;
  OneOp(const ir::Mesh& mesh, OpKind k, const TensorType& in, AttrMap attrs) {
    ir::Value* x = f.addArg(in);
    TensorType out;
    std::string err = ir::inferType(k, {in}, attrs, out);
    if (!err.empty()) throw std::runtime_error("inferType: " + err);
    op = f.append(k, {x}, std::move(attrs), out);
    op->groups = std::make_shared<const ir::CollectiveGroups>(mesh, op->attrs.getInts("axes"));
  }
};

// Expected output word of `rank` (group g, member index idx) at output
// multi-index u.
using Expect = std::function<int32_t(int rank, const std::vector<int>& g, int idx, std::vector<int64_t> u)>;
// Expected bytes sent by member idx (kind = the op's mnemonic); no entry at
// all for shard_slice.
using ExpectBytes = std::function<uint64_t(int idx)>;

struct Case {
  std::string what;
  std::vector<int64_t> axes;
  DType dt;
  Shape shape;  // of the input
  std::shared_ptr<OneOp> op;
  Expect expect;
  ExpectBytes bytes;  // null: no communication at all
};

inline AttrMap baseAttrs(const std::vector<int64_t>& axes, int64_t n) {
  AttrMap a;
  a.set("mesh", std::string("m"));
  a.set("axes", axes);
  a.set("n", n);
  return a;
}

// Every collective op, in several variants, over every axis list of `mesh`.
inline std::vector<Case> makeCases(const ir::Mesh& mesh) {
  const DType kDTypes[] = {DType::F32, DType::I32, DType::Bool};
  std::vector<Case> cases;
  auto add = [&](std::string what, const std::vector<int64_t>& axes, OpKind k, DType dt, Shape s, AttrMap a,
                 Expect e, ExpectBytes b) {
    auto op = std::make_shared<OneOp>(mesh, k, TensorType{dt, s}, std::move(a));
    cases.push_back({what + " " + ir::dtypeName(dt) + ir::shapeStr(s) + " on " + mesh.str() + " axes " + axesStr(axes),
                     axes, dt, std::move(s), std::move(op), std::move(e), std::move(b)});
  };
  for (const auto& axes : axisLists((int)mesh.axes.size())) {
    int64_t n = 1;
    for (int64_t a : axes) n *= mesh.axes[a].size;

    // all_gather along each dim: the concatenation of the members' blocks.
    for (int64_t d = 0; d < 3; ++d) {
      DType dt = kDTypes[d % 3];
      Shape s = {2, 3, 2};
      AttrMap a = baseAttrs(axes, n);
      a.set("dim", d);
      add("all_gather dim " + std::to_string(d), axes, OpKind::AllGather, dt, s, a,
          [=](int, const std::vector<int>& g, int, std::vector<int64_t> u) {
            int j = (int)(u[d] / s[d]);
            u[d] %= s[d];
            return word(dt, g[j], ravel(u, s));
          },
          [=](int) { return (uint64_t)(n - 1) * 48; });
    }

    // all_reduce: every reduction and dtype (no sum of bool), plus a scalar.
    const std::vector<std::pair<DType, std::string>> reductions = {
        {DType::F32, "sum"}, {DType::F32, "max"}, {DType::F32, "min"}, {DType::I32, "sum"},
        {DType::I32, "max"}, {DType::I32, "min"}, {DType::Bool, "max"}, {DType::Bool, "min"}};
    for (const auto& [dt0, red0] : reductions) {
      DType dt = dt0;
      std::string red = red0;
      for (Shape s : {Shape{3, 5}, Shape{}}) {
        if (s.empty() && dt != DType::F32) continue;
        AttrMap a = baseAttrs(axes, n);
        a.set("reduce", *ir::parseReduceOp(red));
        uint64_t bytes = s.empty() ? 4 : 60;
        add("all_reduce " + red, axes, OpKind::AllReduce, dt, s, a,
            [=](int, const std::vector<int>& g, int, std::vector<int64_t> u) {
              return reduceRef(dt, red, g, ravel(u, s));
            },
            [=](int) { return 2 * (uint64_t)(n - 1) * bytes / n; });
      }
    }

    // reduce_scatter along each dim: block `index` of the sum.
    for (int64_t d = 0; d < 3; ++d) {
      DType dt = d == 1 ? DType::I32 : DType::F32;
      Shape s = {2, 3, 1};
      s[d] = 2 * n;
      AttrMap a = baseAttrs(axes, n);
      a.set("dim", d);
      const int64_t blockDim = s[d] / n;
      int64_t total = s[0] * s[1] * s[2];
      add("reduce_scatter dim " + std::to_string(d), axes, OpKind::ReduceScatter, dt, s, a,
          [=](int, const std::vector<int>& g, int idx, std::vector<int64_t> u) {
            u[d] += idx * blockDim;
            return reduceRef(dt, "sum", g, ravel(u, s));
          },
          [=](int) { return (uint64_t)(n - 1) * 4 * (uint64_t)(total / n); });
    }

    // all_to_all for every (split_dim, concat_dim) pair, equal dims included.
    for (int64_t sd = 0; sd < 3; ++sd)
      for (int64_t cd = 0; cd < 3; ++cd) {
        DType dt = kDTypes[(sd + cd) % 3];
        Shape s = {2, 3, 1};
        s[sd] = 2 * n;
        AttrMap a = baseAttrs(axes, n);
        a.set("split_dim", sd);
        a.set("concat_dim", cd);
        Shape block = s;
        block[sd] /= n;
        int64_t total = s[0] * s[1] * s[2];
        add("all_to_all split " + std::to_string(sd) + " concat " + std::to_string(cd), axes, OpKind::AllToAll, dt, s,
            a,
            [=](int, const std::vector<int>& g, int idx, std::vector<int64_t> u) {
              int i = (int)(u[cd] / block[cd]);  // the member this part came from
              u[cd] %= block[cd];
              u[sd] += idx * block[sd];  // my block of that member's split dim
              return word(dt, g[i], ravel(u, s));
            },
            [=](int) { return (uint64_t)(n - 1) * 4 * (uint64_t)(total / n); });
      }

    // collective_permute: shift, reverse, identity.
    std::vector<std::vector<int64_t>> perms(3, std::vector<int64_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      perms[0][i] = (i + 1) % n;
      perms[1][i] = n - 1 - i;
      perms[2][i] = i;
    }
    for (size_t p = 0; p < perms.size(); ++p) {
      DType dt = kDTypes[p];
      Shape s = {2, 3};
      AttrMap a = baseAttrs(axes, n);
      a.set("perm", perms[p]);
      std::vector<int64_t> perm = perms[p];
      add("collective_permute " + axesStr(perm), axes, OpKind::CollectivePermute, dt, s, a,
          [=](int, const std::vector<int>& g, int idx, std::vector<int64_t> u) {
            return word(dt, g[perm[idx]], ravel(u, s));
          },
          [=](int idx) { return perm[idx] == idx ? 0 : (uint64_t)24; });
    }

    // shard_slice: this rank's block of dim, no communication.
    for (int64_t d = 0; d < 3; ++d) {
      DType dt = kDTypes[(d + 1) % 3];
      Shape s = {2, 3, 1};
      s[d] = 3 * n;
      AttrMap a = baseAttrs(axes, n);
      a.set("dim", d);
      const int64_t blockDim = s[d] / n;
      add("shard_slice dim " + std::to_string(d), axes, OpKind::ShardSlice, dt, s, a,
          [=](int rank, const std::vector<int>&, int idx, std::vector<int64_t> u) {
            u[d] += idx * blockDim;
            return word(dt, rank, ravel(u, s));
          },
          nullptr);
    }

    // shard_slice of a dim n does not divide (3n - 1 rows): blocks of
    // ceil(3n - 1, n) rows, those past the dim's end zeros.
    for (int64_t d = 0; d < 3; ++d) {
      DType dt = kDTypes[d];
      Shape s = {2, 3, 1};
      s[d] = 3 * n - 1;
      AttrMap a = baseAttrs(axes, n);
      a.set("dim", d);
      const int64_t blockDim = (s[d] + n - 1) / n;
      add("padded shard_slice dim " + std::to_string(d), axes, OpKind::ShardSlice, dt, s, a,
          [=](int rank, const std::vector<int>&, int idx, std::vector<int64_t> u) {
            u[d] += idx * blockDim;
            return u[d] >= s[d] ? 0 : word(dt, rank, ravel(u, s));
          },
          nullptr);
    }

    // pad_mask: member idx's block (3 rows) of a dim of 3n - 2 rows; the
    // rows past the end set to `value`, the others kept.
    for (int64_t d = 0; d < 3; ++d) {
      DType dt = kDTypes[(d + 2) % 3];
      Shape s = {2, 3, 1};
      s[d] = 3;
      const int64_t size = 3 * n - 2;
      const double value = dt == DType::F32 ? -2.5 : dt == DType::I32 ? -7.0 : 0.0;
      AttrMap a = baseAttrs(axes, n);
      a.set("dim", d);
      a.set("size", size);
      a.set("value", value);
      add("pad_mask dim " + std::to_string(d), axes, OpKind::PadMask, dt, s, a,
          [=](int rank, const std::vector<int>&, int idx, std::vector<int64_t> u) {
            if (idx * 3 + u[d] < size) return word(dt, rank, ravel(u, s));
            return dt == DType::F32 ? fromF32((float)value) : (int32_t)value;
          },
          nullptr);
    }
  }
  return cases;
}

// Runs nothing: checks `rank`'s output of `c` and the bytes it sent (stats
// of this one call). Returns "" or what is wrong.
inline std::string checkRank(const Case& c, const ir::Mesh& mesh, int rank, const Tensor& out, const CommStats& st) {
  const TensorType& rt = c.op->op->result->type;
  int idx = -1;
  auto g = refGroup(mesh, c.axes, rank, &idx);
  std::string where = c.what + ", rank " + std::to_string(rank) + ": ";
  if (out.type() != rt) return where + "output type " + out.type().str() + ", expected " + rt.str();
  int bad = 0;
  std::string first;
  for (int64_t i = 0; i < out.size(); ++i) {
    int32_t want = c.expect(rank, g, idx, unravel(i, rt.shape));
    int32_t got = static_cast<const int32_t*>(out.raw())[i];
    if (got == want) continue;
    auto show = [&](int32_t w) { return c.dt == DType::F32 ? std::to_string(asF32(w)) : std::to_string(w); };
    if (!bad++) first = "element " + std::to_string(i) + " is " + show(got) + ", expected " + show(want);
  }
  if (bad) return where + std::to_string(bad) + " wrong elements; first: " + first;
  const ir::OpKind kindId = c.op->op->kind;
  const std::string kind = ir::opName(kindId);
  if (!c.bytes) {
    if (!st.calls.empty()) return where + "a local op communicated";
    return "";
  }
  auto it = st.bytesSent.find(kindId);
  uint64_t sent = it == st.bytesSent.end() ? 0 : it->second;
  auto ct = st.calls.find(kindId);
  if (ct == st.calls.end() || ct->second != 1 || st.calls.size() != 1)
    return where + "expected exactly one " + kind + " call in the stats";
  if (sent != c.bytes(idx))
    return where + "stats say " + std::to_string(sent) + " bytes sent, expected " + std::to_string(c.bytes(idx));
  return "";
}

// The stats of the calls between two snapshots.
inline CommStats statsDelta(const CommStats& before, const CommStats& after) {
  CommStats d;
  for (auto& [k, v] : after.calls) {
    auto it = before.calls.find(k);
    uint64_t c = v - (it == before.calls.end() ? 0 : it->second);
    if (!c) continue;
    auto bt = before.bytesSent.find(k);
    auto at = after.bytesSent.find(k);
    d.calls[k] = c;
    d.bytesSent[k] = (at == after.bytesSent.end() ? 0 : at->second) - (bt == before.bytesSent.end() ? 0 : bt->second);
  }
  return d;
}

}  // namespace commtest
