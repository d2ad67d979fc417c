// ir/OpTable: every row carries the columns its op needs. A new op that
// leaves a column empty fails here, naming the op and the column, unless
// the row declares the column empty by design (its class or a trait).
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include "ir/Function.h"
#include "ir/OpTable.h"
#include "ir/ShardRules.h"

using namespace gsl::ir;

namespace {

bool differentiableClass(OpClass c) {
  return c != OpClass::Source && c != OpClass::Collective;
}

// What is wrong with one row, one line per problem: "op 'NAME': COLUMN ...".
std::vector<std::string> rowProblems(const OpInfo& o) {
  std::vector<std::string> p;
  auto bad = [&](const char* column, const std::string& why) {
    p.push_back(std::string("op '") + (o.mnemonic ? o.mnemonic : "?") + "': " + column + ": " + why);
  };
  if (!o.mnemonic || !*o.mnemonic) bad("mnemonic", "missing");
  // An op with a body (loop): the passes derive its type, gradient, sharding
  // and partitioning from the body, so the row declares HasBody and has none
  // of those columns; only class Control ops have bodies.
  if (o.has(HasBody) != (o.cls == OpClass::Control))
    bad("traits", "HasBody is declared exactly by the ops of class Control");
  if (o.has(HasBody)) {
    if (o.infer || o.grad || o.shard || o.partition != PartitionRule::None)
      bad("traits", "declared HasBody but has a type, gradient, sharding or partition rule");
    if (o.volume) bad("volume", "an op that is not a collective has a byte volume");
    return p;
  }
  // Type rule: every op but the sources whose type is given (param, constant).
  if (!o.infer && o.cls != OpClass::Source) bad("infer", "no type rule");
  // Gradient rule: every op of a differentiable class, unless declared
  // NotDifferentiable; and a declaration must be true.
  if (differentiableClass(o.cls)) {
    if (!o.grad && !o.has(NotDifferentiable)) bad("grad", "no gradient rule (declare NotDifferentiable if none by design)");
    if (o.grad && o.has(NotDifferentiable)) bad("grad", "has a gradient rule but is declared NotDifferentiable");
  } else {
    if (o.grad) bad("grad", "a source or collective op has a gradient rule");
    if (o.has(NotDifferentiable)) bad("traits", "NotDifferentiable on an op of a class without gradients");
  }
  // Sharding and partition rules: every op of a global function, that is
  // every op but the collectives (made by the partitioner, per-rank only).
  if (o.cls != OpClass::Collective) {
    if (!o.shard) bad("shard", "no sharding rule");
    if (o.partition == PartitionRule::None) bad("partition", "no local-partitioning rule");
  } else {
    if (o.shard) bad("shard", "a collective (per-rank only) has a sharding rule");
    if (o.partition != PartitionRule::None) bad("partition", "a collective (per-rank only) has a partition rule");
  }
  // Byte volume: every collective that communicates; no other op.
  if (o.cls == OpClass::Collective) {
    if (!o.volume && !o.has(NoCommunication)) bad("volume", "a collective without a byte volume (declare NoCommunication if it moves no data)");
    if (o.volume && o.has(NoCommunication)) bad("volume", "has a byte volume but is declared NoCommunication");
  } else {
    if (o.volume) bad("volume", "an op that is not a collective has a byte volume");
    if (o.has(NoCommunication)) bad("traits", "NoCommunication on an op that is not a collective");
  }
  // Literal dtype: a builtin whose type rule takes only f32 operands gives
  // its number literals f32 (checked on the elementwise builtins, whose
  // rule takes one operand of any shape).
  if (o.builtin && o.cls == OpClass::Unary && o.infer && o.args.size() == 1) {
    AttrMap at;
    TensorType out;
    bool takesI32 = o.infer({TensorType{DType::I32, {2}}}, at, out).empty();
    AttrMap at2;
    bool takesF32 = o.infer({TensorType{DType::F32, {2}}}, at2, out).empty();
    if (takesF32 && !takesI32 && o.literal != LiteralDType::F32)
      bad("literal", "takes f32 only, so its literals should be F32");
    if (takesI32 && o.literal == LiteralDType::F32) bad("literal", "takes i32, but its literals are made F32");
  }
  return p;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

}  // namespace

TEST_CASE("every row of the op table has the columns its op needs") {
  std::vector<std::string> all;
  for (const auto& o : allOps()) {
    auto p = rowProblems(o);
    all.insert(all.end(), p.begin(), p.end());
  }
  CHECK_EQ(join(all), "");
}

TEST_CASE("the table is indexed by OpKind and its names are unique") {
  std::set<std::string> mnemonics, builtins;
  for (size_t i = 0; i < allOps().size(); ++i) {
    const OpInfo& o = allOps()[i];
    INFO(o.mnemonic);
    CHECK((size_t)o.kind == i);
    CHECK(&opInfo(o.kind) == &o);
    CHECK(mnemonics.insert(o.mnemonic).second);
    CHECK(lookupMnemonic(o.mnemonic) == &o);
    if (o.builtin) {
      CHECK(builtins.insert(o.builtin).second);
      CHECK(lookupBuiltin(o.builtin) == &o);
    }
  }
}

TEST_CASE("the row check names the op and the column a row lacks") {
  const OpInfo& exp = opInfo(OpKind::Exp);
  REQUIRE(rowProblems(exp).empty());

  OpInfo noGrad = exp;
  noGrad.grad = nullptr;
  CHECK_EQ(join(rowProblems(noGrad)),
           "op 'exp': grad: no gradient rule (declare NotDifferentiable if none by design)\n");
  noGrad.traits = NotDifferentiable;
  CHECK(rowProblems(noGrad).empty());

  OpInfo noShard = exp;
  noShard.shard = nullptr;
  noShard.partition = PartitionRule::None;
  CHECK_EQ(join(rowProblems(noShard)),
           "op 'exp': shard: no sharding rule\nop 'exp': partition: no local-partitioning rule\n");

  OpInfo noType = exp;
  noType.infer = nullptr;
  CHECK_EQ(join(rowProblems(noType)), "op 'exp': infer: no type rule\n");

  OpInfo natural = exp;
  natural.literal = LiteralDType::Natural;
  CHECK_EQ(join(rowProblems(natural)), "op 'exp': literal: takes f32 only, so its literals should be F32\n");

  OpInfo noVolume = opInfo(OpKind::AllGather);
  REQUIRE(rowProblems(noVolume).empty());
  noVolume.volume = nullptr;
  CHECK_EQ(join(rowProblems(noVolume)),
           "op 'all_gather': volume: a collective without a byte volume (declare NoCommunication if it moves no "
           "data)\n");
}

TEST_CASE("the loop row declares HasBody; dynamic_index/dynamic_update have full rows") {
  const OpInfo& loop = opInfo(OpKind::Loop);
  CHECK(loop.cls == OpClass::Control);
  CHECK(loop.has(HasBody));
  CHECK(rowProblems(loop).empty());
  OpInfo typed = loop;
  typed.shard = shardSource;
  CHECK_EQ(join(rowProblems(typed)),
           "op 'loop': traits: declared HasBody but has a type, gradient, sharding or partition rule\n");
  OpInfo undeclared = loop;
  undeclared.traits = NoTraits;
  CHECK_EQ(join(rowProblems(undeclared)),
           "op 'loop': traits: HasBody is declared exactly by the ops of class Control\n"
           "op 'loop': infer: no type rule\n"
           "op 'loop': grad: no gradient rule (declare NotDifferentiable if none by design)\n"
           "op 'loop': shard: no sharding rule\n"
           "op 'loop': partition: no local-partitioning rule\n");
  for (auto k : {OpKind::DynamicIndex, OpKind::DynamicUpdate}) {
    INFO(opName(k));
    const bool hasShard = opInfo(k).shard != nullptr, local = opInfo(k).partition == PartitionRule::Local,
               hasGrad = opInfo(k).grad != nullptr;
    CHECK(hasShard);
    CHECK(local);
    CHECK(hasGrad);
  }
}

TEST_CASE("byte volumes of the collectives (ring algorithm, B = the local input)") {
  const uint64_t B = 4096;
  CHECK(opInfo(OpKind::AllGather).volume(4, B) == 3 * B);
  CHECK(opInfo(OpKind::AllReduce).volume(4, B) == 2 * 3 * B / 4);
  CHECK(opInfo(OpKind::ReduceScatter).volume(4, B) == 3 * B / 4);
  CHECK(opInfo(OpKind::AllToAll).volume(4, B) == 3 * B / 4);
  CHECK(opInfo(OpKind::CollectivePermute).volume(4, B) == B);
  CHECK(!opInfo(OpKind::ShardSlice).volume);
  CHECK(!opInfo(OpKind::PadMask).volume);
  // A group of one sends nothing.
  for (auto k : {OpKind::AllGather, OpKind::AllReduce, OpKind::ReduceScatter, OpKind::AllToAll})
    CHECK(opInfo(k).volume(1, B) == 0);
}

TEST_CASE("dimLabels reads the sharding column") {
  Function f;
  Value* a = f.addArg({DType::F32, {4, 6}});
  Value* b = f.addArg({DType::F32, {6, 8}});
  Op* mm = f.append(OpKind::MatMul, {a, b}, {}, {DType::F32, {4, 8}}, {});
  DimLabels L = dimLabels(*mm);
  REQUIRE(L.operands.size() == 2);
  CHECK(L.operands[0][1] == L.operands[1][0]);  // k, contracted
  CHECK(L.result == std::vector<int>{L.operands[0][0], L.operands[1][1]});
  CHECK(L.partialSum);
  Op* ex = f.append(OpKind::Exp, {mm->result}, {}, {DType::F32, {4, 8}}, {});
  DimLabels E = dimLabels(*ex);
  CHECK(E.operands[0] == E.result);
  CHECK(E.unsplittable.empty());
}

TEST_CASE("type rules of padding: shard_slice rounds up, pad_mask keeps its operand's type") {
  AttrMap at;
  at.set("mesh", std::string("m"));
  at.set("axes", std::vector<int64_t>{0});
  at.set("n", int64_t(3));
  at.set("dim", int64_t(0));
  TensorType out;
  CHECK(inferType(OpKind::ShardSlice, {{DType::F32, {11, 6}}}, at, out) == "");
  CHECK(out == TensorType{DType::F32, {4, 6}});
  CHECK(inferType(OpKind::ShardSlice, {{DType::F32, {12, 6}}}, at, out) == "");
  CHECK(out == TensorType{DType::F32, {4, 6}});
  at.set("size", int64_t(11));
  CHECK(inferType(OpKind::PadMask, {{DType::F32, {4, 6}}}, at, out) == "");
  CHECK(out == TensorType{DType::F32, {4, 6}});
  at.set("size", int64_t(13));  // more than 3 blocks of 4 rows
  CHECK(inferType(OpKind::PadMask, {{DType::F32, {4, 6}}}, at, out) ==
        "pad_mask: size 13 does not fit 3 blocks of dim 0 of f32[4, 6]");
}
