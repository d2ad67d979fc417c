// Every op of the op table, run by the JIT and by the reference
// interpreter (the numeric oracle) on the same inputs and compared.
#include <doctest/doctest.h>

#include <algorithm>
#include <limits>

#include "backend/jit/BufferPlan.h"
#include "jit_test_util.h"

using namespace jittest;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

// Special f32 values plus ordinary ones.
Tensor specials() {
  return f32({12}, {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, -2.5f, 1e-4f, -3e-3f, 50.0f, -90.0f, kInf, kNaN});
}

}  // namespace

// ================================================================ sources

TEST_CASE("jit: param, constant, copy") {
  Tensor w = randF32({3, 4});
  KernelContext ctx;
  ctx.param = [&](const std::string& name) -> const Tensor& {
    REQUIRE(name == "w");
    return w;
  };
  Builder b;
  Value* x = b.arg(randF32({3, 4}, -1, 1, 9));
  Value* p = b.typed(OpKind::Param, attrs({{"name", std::string("w")}}), w.type());
  Value* c = b.constant(2.5, {DType::F32, {3, 4}});
  Value* ci = b.constant(-3.9, {DType::I32, {3}});
  Value* cbig = b.constant(1e12, {DType::I32, {2}});
  Value* cb = b.constant(2.0, {DType::Bool, {}});
  Value* cp = b.op(OpKind::Copy, {p});
  Value* sum = b.op(OpKind::Add, {b.op(OpKind::Mul, {p, x}), c});  // param read in place, constant inlined
  Value* mm = b.op(OpKind::MatMul, {p, b.op(OpKind::Transpose, {x}, attrs({{"perm", Ints{1, 0}}}))});
  auto r = b.check({p, c, ci, cbig, cb, cp, sum, mm}, ctx);
  // Results never alias the param store.
  w.f32()[0] = 100;
  CHECK(r[0].f32()[0] != 100);
}

TEST_CASE("jit: random_uniform matches the interpreter bit for bit") {
  for (uint64_t global : {0ull, 1ull, 12345ull}) {
    KernelContext ctx;
    ctx.seed = global;
    Builder b;
    Value* s = b.arg(Tensor::scalarI32(7));
    Value* r = b.op(OpKind::RandomUniform, {s}, attrs({{"shape", Ints{4, 33}}}));
    Tensor t = b.check1(r, ctx);
    for (int64_t i = 0; i < t.size(); ++i) REQUIRE(t.f32()[i] == uniformAt(global, randomOpStream(7), (uint64_t)i));
  }
}

TEST_CASE("jit: iota matches the interpreter along every axis") {
  for (int64_t axis : {0, 1, 2}) {
    Builder b;
    Value* r = b.op(OpKind::Iota, {}, attrs({{"shape", Ints{3, 5, 4}}, {"axis", axis}}));
    Value* s = b.op(OpKind::Iota, {}, attrs({{"shape", Ints{7}}, {"axis", int64_t(0)}}));
    b.check({r, s}, {});
  }
}

TEST_CASE("jit: dropout matches the interpreter bit for bit") {
  KernelContext ctx;
  ctx.seed = 42;
  Builder b;
  Value* x = b.arg(randF32({9, 13}, -3, 3));
  Value* key = b.arg(i32({3}, {7, 9, 26}));  // a block at rows 9.., cols 26.. of [30, 39]
  Value* d = b.op(OpKind::Dropout, {x, key}, attrs({{"p", 0.35}, {"site", int64_t(3)}, {"shape", Ints{30, 39}}}));
  Value* id = b.op(OpKind::Dropout, {x}, attrs({{"p", 0.35}}));
  Value* both = b.op(OpKind::Add, {d, id});
  auto r = b.check({d, id, both}, ctx);
  int64_t zeros = 0;
  for (int64_t i = 0; i < r[0].size(); ++i) zeros += r[0].f32()[i] == 0;
  CHECK(zeros > 0);
  CHECK(zeros < r[0].size());
}

// ================================================================ unary

TEST_CASE("jit: unary f32 ops") {
  Tensor x = randF32({5, 37}, -4, 4);
  Tensor pos = randF32({5, 37}, 0.01f, 20, 5);
  Tensor small = randF32({64}, -0.2f, 0.2f, 6);  // tanh's series branch
  for (OpKind k : {OpKind::Neg, OpKind::Exp, OpKind::Tanh, OpKind::Relu, OpKind::Gelu, OpKind::Erf, OpKind::GeluExact,
                   OpKind::Sigmoid, OpKind::Abs, OpKind::Copy}) {
    checkOp(k, {x});
    checkOp(k, {specials()});
    checkOp(k, {small});
  }
  for (OpKind k : {OpKind::Log, OpKind::Sqrt, OpKind::Rsqrt}) {
    checkOp(k, {pos});
    checkOp(k, {specials()});
  }
}

// gelu is x / (1 + e^-2u) in the JIT and 0.5 x (1 + tanh u) in the
// interpreter: every f32 step of 1/256 over [-16, 16] (the negative tail,
// where the interpreter's 1 + tanh u cancels and then is 0), and the far
// range where x^3 and e^-2u overflow. exp and tanh (their polynomials by
// FMA) over the same points.
TEST_CASE("jit: gelu, exp and tanh over a dense range") {
  std::vector<float> v;
  for (int i = -16 * 256; i <= 16 * 256; ++i) v.push_back((float)i / 256.0f);
  for (float big : {20.0f, 45.0f, 87.0f, 88.5f, 89.0f, 1e5f, 1e13f, 1e20f, 3e38f}) {
    v.push_back(big);
    v.push_back(-big);
  }
  Tensor x = f32({(int64_t)v.size()}, v);
  for (OpKind k : {OpKind::Gelu, OpKind::Exp, OpKind::Tanh}) checkOp(k, {x});
}

TEST_CASE("jit: unary i32 and bool ops") {
  Tensor x = i32({6}, {0, 5, -7, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), -1});
  for (OpKind k : {OpKind::Neg, OpKind::Relu, OpKind::Abs, OpKind::Copy}) checkOp(k, {x});
  checkOp(OpKind::Not, {randBool({3, 5})});
}

TEST_CASE("jit: cast between every pair of dtypes") {
  Tensor fx = f32({10}, {0.0f, -0.0f, 1.9f, -1.9f, 3e9f, -3e9f, kNaN, kInf, -kInf, 0.5f});
  Tensor ix = i32({5}, {0, 1, -1, 123456789, std::numeric_limits<int32_t>::min()});
  Tensor bx = randBool({7});
  for (DType to : {DType::F32, DType::I32, DType::Bool}) {
    INFO("to " << ir::dtypeName(to));
    checkOp(OpKind::Cast, {fx}, attrs({{"dtype", to}}));
    checkOp(OpKind::Cast, {ix}, attrs({{"dtype", to}}));
    checkOp(OpKind::Cast, {bx}, attrs({{"dtype", to}}));
  }
}

// ================================================================ binary

TEST_CASE("jit: binary f32 ops with broadcasting") {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{4, 5}, {4, 5}}, {{3, 1, 5}, {4, 5}}, {{5}, {2, 3, 5}}, {{}, {3, 4}}, {{2, 1}, {1, 7}}, {{6, 1, 3}, {1}}};
  for (auto& [sa, sb] : shapes) {
    Tensor a = randF32(sa, -3, 3, 11), b = randF32(sb, -3, 3, 12);
    Tensor bpos = randF32(sb, 0.5f, 3, 13);
    for (OpKind k : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div, OpKind::Mod, OpKind::Maximum,
                     OpKind::Minimum, OpKind::Eq, OpKind::Ne, OpKind::Lt, OpKind::Le, OpKind::Gt, OpKind::Ge}) {
      INFO(ir::opName(k) << " " << ir::shapeStr(sa) << " " << ir::shapeStr(sb));
      checkOp(k, {a, b});
      checkOp(k, {b, a});
    }
    checkOp(OpKind::Pow, {randF32(sa, 0.1f, 3, 14), b});
    checkOp(OpKind::Mod, {a, bpos});
  }
  // NaN, infinities, signed zeros, exact ties.
  Tensor s = specials(), t = f32({12}, {0.0f, 0.0f, 1.0f, 2.0f, -0.5f, 2.5f, kNaN, 1e-4f, -kInf, 3.0f, 2.0f, 1.0f});
  for (OpKind k : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div, OpKind::Pow, OpKind::Mod, OpKind::Maximum,
                   OpKind::Minimum, OpKind::Eq, OpKind::Ne, OpKind::Lt, OpKind::Le, OpKind::Gt, OpKind::Ge}) {
    INFO(ir::opName(k));
    checkOp(k, {s, t});
    checkOp(k, {t, s});
  }
}

TEST_CASE("jit: binary i32 and bool ops") {
  Tensor a = randI32({3, 1, 6}, -20, 20, 21), b = randI32({4, 6}, -5, 5, 22);
  Tensor edge = i32({8}, {0, -1, 1, 7, -7, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), 3});
  Tensor edge2 = i32({8}, {0, 0, -1, -1, 2, -1, 2, -4});
  for (OpKind k : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Mod, OpKind::FloorDiv, OpKind::Maximum, OpKind::Minimum, OpKind::Eq,
                   OpKind::Ne, OpKind::Lt, OpKind::Le, OpKind::Gt, OpKind::Ge, OpKind::Pow}) {
    INFO(ir::opName(k));
    checkOp(k, {a, b});
    checkOp(k, {edge, edge2});
    checkOp(k, {edge2, edge});
  }
  for (OpKind k : {OpKind::And, OpKind::Or, OpKind::Eq, OpKind::Ne})
    checkOp(k, {randBool({2, 1, 5}, 31), randBool({3, 5}, 32)});
}

TEST_CASE("jit: where with three-way broadcasting") {
  checkOp(OpKind::Where, {randBool({4, 1}), randF32({3, 4, 5}), randF32({5}, -1, 1, 7)});
  checkOp(OpKind::Where, {randBool({2, 3}), randI32({2, 3}), randI32({}, 0, 5, 8)});
  checkOp(OpKind::Where, {randBool({6}), randBool({6}, 9), randBool({1}, 10)});
}

// ================================================================ contractions

TEST_CASE("jit: matmul, big, odd and batched") {
  const std::vector<std::vector<Shape>> cases = {
      {{129, 257}, {257, 65}},       // odd sizes, Eigen
      {{7, 5}, {5, 3}},              // generated loops
      {{3, 17, 33}, {33, 9}},        // batch x matrix
      {{4, 40, 50}, {4, 50, 30}},    // batched
      {{2, 1, 4, 5}, {3, 5, 6}},     // broadcast batch dims
      {{8}, {8, 3}},                 // 1-D left
      {{3, 8}, {8}},                 // 1-D right
      {{300}, {300}},                // dot product
      {{2, 70, 1}, {1, 90}},         // K = 1
      {{64, 64}, {64, 64}},
      {{40, 700}, {700, 50}},        // K blocks (and a remainder block)
      {{256, 256}, {256, 256}},      // packed A and B panels
      {{1, 300}, {300, 40}},         // M = 1
      {{600, 300}, {300, 200}},      // L2 blocks of A's rows (and a remainder block)
      {{530, 700}, {700, 100}},      // L2 blocks, K blocks, an edge column panel
      {{401, 700}, {700, 803}},      // BLIS order: edge rows, K blocks, an edge column block and panel
  };
  for (auto& c : cases) {
    INFO(ir::shapeStr(c[0]) << " @ " << ir::shapeStr(c[1]));
    checkContraction(OpKind::MatMul, c);
  }
}

TEST_CASE("jit: einsum specs") {
  const std::vector<std::pair<std::string, std::vector<Shape>>> cases = {
      {"gsm,me->gse", {{2, 24, 16}, {16, 12}}},
      {"gsm,me->gse", {{4, 64, 48}, {48, 40}}},  // via Eigen
      {"gsec,gsm->egcm", {{2, 10, 3, 4}, {2, 10, 6}}},
      {"gsec,gsm->egcm", {{2, 40, 8, 5}, {2, 40, 36}}},
      {"ij->ji", {{5, 7}}},
      {"ij->", {{5, 7}}},
      {"ij,jk,kl->il", {{3, 4}, {4, 5}, {5, 2}}},
      {"ij,jk", {{6, 4}, {4, 5}}},  // implicit output
      {"bhqd,bhkd->bhqk", {{2, 3, 40, 16}, {2, 3, 40, 16}}},
      {"bhqk,bhkd->bqhd", {{2, 3, 40, 40}, {2, 3, 40, 16}}},
      {"ij,ij->", {{9, 9}, {9, 9}}},
      {"ij,ij->ij", {{9, 9}, {9, 9}}},
      {"ij,jk->i", {{4, 5}, {5, 6}}},  // summed in one operand only
      {"ii->i", {{5, 5}}},             // diagonal
      {"ji,jk->ik", {{70, 50}, {70, 60}}},  // transposed A
      {"ji,jk->ik", {{64, 48}, {64, 32}}},  // transposed A, copied by 16 x 16 tiles in registers
      {"ij,kj->ki", {{50, 70}, {60, 70}}},  // column-major result
      {"aibj,bjc->aic", {{3, 40, 4, 10}, {4, 10, 50}}},
      {"iaj,jb->bai", {{30, 2, 40}, {40, 3}}},  // result copied out
      {"bij,bjk->bik", {{1, 100, 80}, {1, 80, 90}}},
      {"ji,jk->ki", {{70, 50}, {70, 60}}},  // kernel on C^T = B^T A^T
      {"ij,kj->ki", {{5, 6}, {4, 6}}},      // small, no contiguous rows: dot loops
      {"pqk,kr->prq", {{3, 4, 5}, {5, 6}}},  // M labels split in the result: copied out
      {"bqd,bkd->bqk", {{3, 50, 20}, {3, 60, 20}}},  // B^T: packed panels of B
      {"bqd,bkd->bqk", {{2, 400, 40}, {2, 300, 40}}},  // B^T, packed A, L2 blocks, edge panel
      {"bqd,bkd->bqk", {{1, 450, 40}, {1, 500, 40}}},  // B^T, BLIS order, edge column block
      {"bnqh,nhd->bqd", {{2, 3, 30, 8}, {3, 8, 50}}},  // A copied, B^T
      {"bqd,nhd->bnqh", {{2, 30, 50}, {3, 8, 50}}},    // B^T, C copied out
      {"kij,kl->lij", {{40, 6, 7}, {40, 50}}},         // A^T B, C^T = B^T A^T
      {"bij,bjk->ikb", {{3, 50, 20}, {3, 20, 60}}},    // batch label innermost: C in temp space
      {"ij,j->i", {{70, 60}, {60}}},                   // matrix-vector, A^T packed
  };
  for (auto& [spec, shapes] : cases) {
    INFO(spec);
    checkContraction(OpKind::Einsum, shapes, attrs({{"spec", ir::einsumSpec(spec, shapes.size())}}));
  }
}

// ================================================================ reductions

TEST_CASE("jit: sum, mean, max, min over axes, with keepdims") {
  Tensor x = randF32({4, 5, 6}, -3, 3, 51);
  const std::vector<std::optional<Ints>> axesList = {std::nullopt, Ints{0}, Ints{1}, Ints{2}, Ints{0, 2},
                                                     Ints{1, 2},   Ints{-1}, Ints{0, 1}, Ints{}};
  for (OpKind k : {OpKind::Sum, OpKind::Mean, OpKind::Max, OpKind::Min})
    for (bool keep : {false, true})
      for (auto& axes : axesList) {
        AttrMap at = attrs({{"keepdims", keep}});
        if (axes) at.set("axis", *axes);
        INFO(ir::opName(k) << " keepdims " << keep << " axes " << (axes ? ir::shapeStr(*axes) : "all"));
        checkOp(k, {x}, at);
        if (k != OpKind::Mean) checkOp(k, {randI32({4, 5, 6}, -50, 50, 52)}, at);
      }
  // NaN sticks in max/min.
  checkOp(OpKind::Max, {specials()}, attrs({{"axis", Ints{0}}}));
  checkOp(OpKind::Min, {f32({2, 3}, {1, kNaN, 3, -kInf, 5, 6})}, attrs({{"axis", Ints{1}}}));
  checkOp(OpKind::Sum, {randF32({100000}, -1, 1, 53)});
  checkOp(OpKind::Sum, {Tensor::scalarF32(2.5f)});
}

TEST_CASE("jit: argmax with ties and NaN") {
  checkOp(OpKind::ArgMax, {randF32({6, 7, 8})}, attrs({{"axis", int64_t(1)}}));
  checkOp(OpKind::ArgMax, {randF32({6, 7, 8})}, attrs({{"axis", int64_t(-1)}}));
  checkOp(OpKind::ArgMax, {randI32({9, 4}, 0, 3)}, attrs({{"axis", int64_t(0)}}));  // ties: first
  checkOp(OpKind::ArgMax, {f32({2, 4}, {1, kNaN, 5, kNaN, 2, 2, -kInf, 1})}, attrs({{"axis", int64_t(1)}}));
  checkOp(OpKind::ArgMax, {f32({1}, {3})}, attrs({{"axis", int64_t(0)}}));
}

// ================================================================ normalisations

TEST_CASE("jit: softmax and log_softmax along an axis") {
  for (OpKind k : {OpKind::Softmax, OpKind::LogSoftmax})
    for (int64_t axis : {0, 1, 2, -1}) {
      INFO(ir::opName(k) << " axis " << axis);
      checkOp(k, {randF32({3, 17, 5}, -8, 8)}, attrs({{"axis", axis}}));
    }
  checkOp(OpKind::Softmax, {f32({4}, {1000.0f, -1000.0f, 0.0f, 999.0f})}, attrs({{"axis", int64_t(0)}}));
  checkOp(OpKind::LogSoftmax, {f32({4}, {1000.0f, -1000.0f, 0.0f, 999.0f})}, attrs({{"axis", int64_t(0)}}));
}

TEST_CASE("jit: layer_norm over trailing and inner axes") {
  for (Ints axes : {Ints{-1}, Ints{1, 2}, Ints{0}, Ints{0, 2}, Ints{1}}) {
    INFO("axes " << ir::shapeStr(axes));
    checkOp(OpKind::LayerNorm, {randF32({4, 6, 33}, -2, 5)}, attrs({{"axis", axes}, {"eps", 1e-5}}));
  }
  checkOp(OpKind::LayerNorm, {randF32({8, 16})}, attrs({{"axis", Ints{-1}}, {"eps", 0.1}}));
}

TEST_CASE("jit: cumsum inclusive and exclusive") {
  for (bool ex : {false, true})
    for (int64_t axis : {0, 1, 2}) {
      INFO("exclusive " << ex << " axis " << axis);
      checkOp(OpKind::CumSum, {randF32({4, 9, 5})}, attrs({{"axis", axis}, {"exclusive", ex}}));
      checkOp(OpKind::CumSum, {randI32({4, 9, 5})}, attrs({{"axis", axis}, {"exclusive", ex}}));
    }
}

// ================================================================ data movement

TEST_CASE("jit: reshape, transpose, slice, concat, broadcast") {
  checkOp(OpKind::Reshape, {randF32({4, 6})}, attrs({{"shape", Ints{2, -1, 3}}}));
  checkOp(OpKind::Transpose, {randF32({3, 4, 5})}, attrs({{"perm", Ints{2, 0, 1}}}));
  checkOp(OpKind::Transpose, {randI32({70, 90})}, attrs({{"perm", Ints{1, 0}}}));
  checkOp(OpKind::Transpose, {randF32({3, 4})});  // default: reversed
  checkOp(OpKind::Transpose, {randI32({64, 48})}, attrs({{"perm", Ints{1, 0}}}));  // 16 x 16 tiles
  checkOp(OpKind::Transpose, {randF32({2, 32, 3, 48})}, attrs({{"perm", Ints{3, 0, 2, 1}}}));
  checkOp(OpKind::Transpose, {randF32({32, 5, 16})}, attrs({{"perm", Ints{2, 1, 0}}}));  // tiles, in registers
  checkOp(OpKind::Slice, {randF32({6, 5})}, attrs({{"axis", int64_t(0)}, {"start", int64_t(1)}, {"end", int64_t(4)}}));
  checkOp(OpKind::Slice, {randF32({6, 5})}, attrs({{"axis", int64_t(1)}, {"start", int64_t(-3)}, {"end", int64_t(5)}}));
  checkOp(OpKind::Slice, {randI32({2, 6, 5})}, attrs({{"axis", int64_t(1)}, {"start", int64_t(2)}, {"end", int64_t(3)}}));
  checkOp(OpKind::Concat, {randF32({2, 3}), randF32({4, 3}, -1, 1, 5), randF32({1, 3}, -1, 1, 6)},
          attrs({{"axis", int64_t(0)}}));
  checkOp(OpKind::Concat, {randI32({2, 3, 2}), randI32({2, 1, 2}, 0, 9, 7)}, attrs({{"axis", int64_t(1)}}));
  checkOp(OpKind::Concat, {randBool({2, 2}), randBool({2, 3}, 8)}, attrs({{"axis", int64_t(-1)}}));
  checkOp(OpKind::Broadcast, {randF32({3, 1})}, attrs({{"shape", Ints{2, 3, 4}}}));
  checkOp(OpKind::Broadcast, {randI32({})}, attrs({{"shape", Ints{5}}}));

  // Views: a reshape and a leading slice read in place, then used.
  Builder b;
  Value* x = b.arg(randF32({6, 8}));
  Value* r = b.op(OpKind::Reshape, {x}, attrs({{"shape", Ints{12, 4}}}));
  Value* s = b.op(OpKind::Slice, {r}, attrs({{"axis", int64_t(0)}, {"start", int64_t(2)}, {"end", int64_t(5)}}));
  Value* e = b.op(OpKind::Exp, {s});
  Value* t = b.op(OpKind::Transpose, {r}, attrs({{"perm", Ints{1, 0}}}));
  b.check({e, t, r});
}

TEST_CASE("jit: one_hot and take") {
  checkOp(OpKind::OneHot, {i32({2, 3}, {0, 4, -1, 2, 5, 1})}, attrs({{"n", int64_t(5)}}));
  checkOp(OpKind::OneHot, {i32({}, {2})}, attrs({{"n", int64_t(3)}}));
  checkOp(OpKind::Take, {randF32({10, 7}), i32({2, 3}, {0, 9, 3, 3, 1, 8})});
  checkOp(OpKind::Take, {randF32({10, 40}), i32({4}, {9, 0, 5, 5})});  // rows copied with memcpy
  checkOp(OpKind::Take, {randI32({6}), i32({3}, {5, 0, 2})});          // rank-1 table
  checkOp(OpKind::Take, {randF32({5, 2, 3}), i32({}, {4})});
}

TEST_CASE("jit: take reports an index out of range like the interpreter") {
  for (int32_t bad : {7, -1, 5}) {
    Builder b;
    Value* tab = b.arg(randF32({5, 3}));
    Value* idx = b.arg(i32({3}, {1, bad, 0}));
    SourceLoc loc{0, 12, 7};
    ir::TensorType rt{DType::F32, {3, 3}};
    Value* r = b.f.append(OpKind::Take, {tab, idx}, {}, rt, loc)->result;
    b.f.results = {b.op(OpKind::Exp, {r})};
    std::string expect = "take: index " + std::to_string(bad) + " is out of range for a table of 5 rows";
    bool thrown = false;
    try {
      makeJitEngine({}, testOptions())->call(b.f, b.args);
    } catch (const RuntimeError& e) {
      thrown = true;
      CHECK(std::string(e.what()) == expect);
      CHECK(e.loc.line == 12);
      CHECK(e.loc.col == 7);
    }
    CHECK(thrown);
    // The interpreter says the same.
    try {
      interpret(b.f, b.args, {});
      CHECK(false);
    } catch (const RuntimeError& e) {
      CHECK(std::string(e.what()) == expect);
    }
  }
}

// A transpose read only by GEMMs is folded into them (BufferPlan::strided):
// no copy, the GEMM reads its operand with the permuted strides. The
// backward pass's dy @ transpose(w) and transpose(x) @ dy, einsums of a
// transposed operand, and a transpose with another reader (copied).
// Whether the options let a transpose fold into a contraction of kind k:
// the generated kernel runs it (not GSL_JIT_GEMM=eigen) and neither op is
// sent to the reference kernel (GSL_JIT_FALLBACK).
static bool foldable(OpKind k) {
  const JitOptions& o = testOptions();
  auto fallback = [&](OpKind x) { return std::find(o.fallbackOps.begin(), o.fallbackOps.end(), x) != o.fallbackOps.end(); };
  return o.gemm != JitOptions::GemmCode::Eigen && !fallback(k) && !fallback(OpKind::Transpose);
}

TEST_CASE("jit: matmul and einsum reading transposes folded into them") {
  struct Case {
    Shape a, b;
    bool transA, transB;
  };
  const std::vector<Case> cases = {
      {{64, 96}, {80, 96}, false, true},    // dy @ w^T: B read through packed panels
      {{96, 64}, {96, 80}, true, false},    // x^T @ dy: A by columns
      {{96, 64}, {80, 96}, true, true},     // both
      {{7, 33}, {5, 33}, false, true},      // small: loops, not folded
      {{300, 200}, {130, 200}, false, true},  // K blocks, edge panels
  };
  for (const Case& c : cases) {
    const std::string what =
        ir::shapeStr(c.a) + (c.transA ? "^T" : "") + " @ " + ir::shapeStr(c.b) + (c.transB ? "^T" : "");
    INFO(what);
    for (bool ints : {true, false}) {
      Builder b;
      Value* x = b.arg(ints ? randIntF32(c.a, -4, 4, 21) : randF32(c.a, -2, 2, 22));
      Value* y = b.arg(ints ? randIntF32(c.b, -4, 4, 23) : randF32(c.b, -2, 2, 24));
      Value* xa = c.transA ? b.op(OpKind::Transpose, {x}, attrs({{"perm", Ints{1, 0}}})) : x;
      Value* yb = c.transB ? b.op(OpKind::Transpose, {y}, attrs({{"perm", Ints{1, 0}}})) : y;
      Value* mm = b.op(OpKind::MatMul, {xa, yb});
      Value* r = b.op(OpKind::Tanh, {mm});
      b.check1(r, {}, /*normwise=*/!ints);
      const backend::jit::BufferPlan p = backend::jit::planBuffers(b.f, testOptions());
      const bool big = c.a[0] * c.a[1] * c.b[0] > testOptions().dotLoopMacs && foldable(OpKind::MatMul);
      if (c.transA) CHECK(p.strided.count(xa) == big);
      if (c.transB) CHECK(p.strided.count(yb) == big);
    }
  }
  // An einsum reading a transposed operand, and a transpose that an
  // elementwise op reads too (materialised, for both).
  Builder b;
  Value* x = b.arg(randF32({48, 40, 2}, -2, 2, 25));
  Value* w = b.arg(randF32({40, 64}, -2, 2, 26));
  Value* xt = b.op(OpKind::Transpose, {x}, attrs({{"perm", Ints{2, 0, 1}}}));  // [2, 48, 40]
  Value* e = b.op(OpKind::Einsum, {xt, w}, attrs({{"spec", ir::einsumSpec("bmk,kn->bmn", 2)}}));
  Value* wt = b.op(OpKind::Transpose, {w}, attrs({{"perm", Ints{1, 0}}}));  // [64, 40]
  Value* m = b.op(OpKind::MatMul, {b.op(OpKind::Reshape, {e}, attrs({{"shape", Ints{96, 64}}})), wt});
  Value* s = b.op(OpKind::Add, {wt, wt});
  b.check({m, s}, {}, /*normwise=*/true);
  const backend::jit::BufferPlan p = backend::jit::planBuffers(b.f, testOptions());
  CHECK(p.strided.count(xt) == foldable(OpKind::Einsum));
  CHECK(p.strided.count(wt) == 0);
}

// dynamic_index reads its row in place (Storage::dynamicRow): a layer's
// weights of a stacked param, read by a matmul, through a transpose folded
// into another, and by an elementwise op; a row that is a result is
// copied. (The index is a loop's counter: out of range is an internal
// error, checked before any reader runs.)
TEST_CASE("jit: dynamic_index rows read in place by matmul and elementwise ops") {
  for (int32_t i : {0, 2, 3}) {
    Builder b;
    Value* w = b.arg(randF32({4, 40, 48}, -1, 1, 31));
    Value* x = b.arg(randF32({64, 40}, -1, 1, 32));
    Value* dy = b.arg(randF32({64, 48}, -1, 1, 33));
    Value* idx = b.arg(i32({}, {i}));
    Value* wl = b.op(OpKind::DynamicIndex, {w, idx});  // [40, 48]
    Value* y = b.op(OpKind::MatMul, {x, wl});
    Value* dx = b.op(OpKind::MatMul, {dy, b.op(OpKind::Transpose, {wl}, attrs({{"perm", Ints{1, 0}}}))});
    Value* s = b.op(OpKind::Mul, {wl, wl});
    Value* row = b.op(OpKind::DynamicIndex, {w, idx});
    b.check({y, dx, s, row}, {}, /*normwise=*/true);
    const backend::jit::BufferPlan p = backend::jit::planBuffers(b.f, testOptions());
    CHECK(p.storage.at(wl).kind == backend::jit::Storage::Alias);
    CHECK(p.storage.at(wl).dynamicRow);
    CHECK(p.storage.at(row).kind == backend::jit::Storage::Output);
  }
}
