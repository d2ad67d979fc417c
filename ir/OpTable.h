// The op table: every tensor op of GSL is defined once, here, by one row
// (OpInfo). The columns:
//   mnemonic, builtin, args  the IR text name; the surface builtin name and
//                            signature (how `sum(x, axis=[0], keepdims=true)`
//                            maps onto operands and attributes)
//   cls                      the op's class (OpClass below)
//   infer                    type rule: result dtype and static shape from the
//                            operand types and attributes, canonicalising the
//                            attributes (negative axes made positive, `-1` in
//                            reshape resolved, defaults filled in)
//   grad                     gradient rule (ir/GradRules.h), used by autodiff
//   shard                    sharding rule (ir/ShardRules.h): the op's dimension
//                            labels, used by sharding propagation and the SPMD
//                            partitioner
//   partition                which local-partitioning rule of the SPMD
//                            partitioner (passes/PartitionRules.h) makes the
//                            op on local blocks
//   literal                  the dtype a number literal operand takes (Sema)
//   volume                   collectives: bytes one rank sends, used by the cost
//                            model (passes/CostModel), the communicators'
//                            stats (backend::Communicator::collective) and
//                            the REPL
//   traits                   declarations that a column is empty by design
// The front end type-checks builtin calls with the type rules, the IR parser
// and verifier re-check with them, and the engines dispatch on OpKind.
// tests/unit/ir_optable_test.cpp fails, naming the op and the column, when a
// row lacks a column its class needs.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/Attr.h"
#include "ir/Type.h"

namespace gsl::ir {

// The op kinds, in table order (the enum the rows are indexed by).
#define GSL_OPS(X)                                                          \
  X(Param) X(Constant) X(Copy)                                              \
  X(Neg) X(Exp) X(Log) X(Sqrt) X(Rsqrt) X(Tanh) X(Relu) X(Gelu) X(Erf)      \
  X(GeluExact) X(Sigmoid) X(Abs) X(Not) X(Cast)                             \
  X(Add) X(Sub) X(Mul) X(Div) X(Pow) X(Mod) X(FloorDiv) X(Maximum) X(Minimum) \
  X(Eq) X(Ne) X(Lt) X(Le) X(Gt) X(Ge) X(And) X(Or) X(Where)                 \
  X(MatMul) X(Einsum)                                                       \
  X(Sum) X(Mean) X(Max) X(Min) X(ArgMax) X(Softmax) X(LogSoftmax)          \
  X(LayerNorm) X(CumSum)                                                    \
  X(Reshape) X(Transpose) X(Concat) X(Slice) X(Broadcast) X(OneHot)         \
  X(Take) X(DynamicIndex) X(DynamicUpdate) X(RandomUniform) X(Iota) X(Dropout) \
  X(AllReduce) X(AllGather) X(ReduceScatter) X(AllToAll)                    \
  X(CollectivePermute) X(ShardSlice) X(PadMask)                             \
  X(Loop)

enum class OpKind {
#define GSL_OP_ENUM(k) k,
  GSL_OPS(GSL_OP_ENUM)
#undef GSL_OP_ENUM
};

enum class OpClass {
  Source,          // param, constant, random_uniform: no tensor inputs that define shape
  Unary,           // elementwise, one operand
  Binary,          // elementwise, two operands, NumPy broadcasting
  Ternary,         // where
  Contraction,     // matmul, einsum
  Reduction,       // sum/mean/max/min over `axes`, argmax over `axis`
  Normalization,   // softmax, log_softmax, layer_norm, cumsum: shape-preserving along axes
  DataMovement,    // reshape, transpose, concat, slice, broadcast, one_hot, take,
                   // dynamic_index, dynamic_update
  Collective,      // per-rank programs only: communication between ranks and
                   // the rank-dependent local slice (see below)
  Control,         // loop: several results and a body (ir/Loop.h, docs/loops.md)
  Random,          // dropout: elementwise on its first operand, with a random
                   // mask keyed by its optional second operand (below)
};

// dropout x [, key] {p, site, shape}: x times a random keep mask over
// 1 - p (PyTorch's nn.Dropout). Without a key it is the identity (the
// inference form, as the front end writes it); the training expansion
// (passes/Training) gives the dropouts of a minimize step a key, the i32
// vector [step, offset_0, ..., offset_{r-1}]: the optimizer's step and the
// global position of the block's first element in each dim (all 0 on the
// global program; the partition rule adds each rank's block offsets, so
// padding rows do not shift them). Element i of x, at global multi-index
// g = offset + i, is kept iff uniformAt(seed, dropoutStream(site, step),
// flat(g, shape)) >= p (backend/Random.h), `shape` being the global shape
// (default: x's own); `site` numbers the dropouts of one step.

// Collectives (only in the per-rank program made by the SPMD partitioner).
// Common attrs: `mesh` (string) and `axes` (int list: mesh axis indices,
// major first). The ranks that agree on every other mesh axis form a group;
// a rank's index in its group is its coordinate along `axes` (row-major).
// `n` is the group size (product of the axes' sizes), kept as an attr so the
// type rules need no mesh.
//   all_reduce {reduce = "sum"|"max"|"min"}: elementwise reduction over the group
//       (a ReduceOp, ir/Attr.h)
//   all_gather {dim}: concatenates the group's blocks along dim (dim * n)
//   reduce_scatter {dim}: sums over the group, keeps block `index` of dim (dim / n)
//   all_to_all {split_dim, concat_dim}: splits split_dim into n blocks, sends
//       block j to group member j, concatenates what it receives along concat_dim
//   collective_permute {perm}: group member i receives the block of member perm[i]
//   shard_slice {dim}: keeps block `index` of dim (dim / n); no communication.
//       A dim n does not divide is padded: every member keeps ceil(dim / n)
//       rows, those past the dim's end are zeros (docs/sharding.md, "Uneven
//       dims")
//   pad_mask {dim, size, value}: no communication; the rows of this member's
//       block of dim (block `index` of a padded dim of `size` rows, each block
//       the operand's dim long) that lie past `size` (padding) set to `value`,
//       the others kept: the partitioner's mask where padding would change a
//       result (a contraction or sum over a padded dim)

// Kinds of surface arguments of a builtin.
enum class ArgKind {
  Tensor,      // one tensor operand
  Tensors,     // a list `[a, b, ...]` of tensor operands (concat)
  Variadic,    // all remaining positional args are tensor operands (einsum)
  Int,         // static integer -> int attr
  Ints,        // static integer or list of integers -> int-list attr
  Float,       // static number -> float attr
  Bool,        // true/false -> bool attr
  String,      // string literal -> string attr
  DTypeArg,    // f32 / i32 / bool -> dtype attr
  Einsum,      // string literal -> einsum spec attr (ir/Einsum.h), parsed
               // once the operand count is known (parseStringAttr)
  Reduce,      // "sum" / "max" / "min" -> reduction attr (IR text only)
};

struct ArgSpec {
  const char* name;                 // keyword name; also the attr name for static args
  ArgKind kind;
  std::optional<Attr> dflt = std::nullopt;  // default for static args
  bool optional = false;            // may be omitted with no default (e.g. sum's axis)
};

struct Op;
struct Value;
class GradBuilder;

struct DimLabels;

// Gradient rule (reverse mode; ir/GradRules.h): given the adjoint `g` of
// `op`'s result (same type as the result), appends ops computing the
// adjoint of each operand through `b` and stores them in `operandGrads`
// (one entry per operand, resized by the caller; nullptr = no gradient,
// e.g. a condition or an index operand).
using GradRule = void (*)(GradBuilder& b, const Op& op, Value* g, std::vector<Value*>& operandGrads);

// Type rule: from operand types and (canonicalised in place) attributes,
// set `out` and return "" or return a user-facing error message.
using TypeRule = std::string (*)(const std::vector<TensorType>& in, AttrMap& attrs,
                                 TensorType& out);

// Sharding rule (ir/ShardRules.h): the dimension labels of `op`.
using ShardRule = DimLabels (*)(const Op& op);

// Local-partitioning rule: which of the SPMD partitioner's rules
// (passes/PartitionRules.h, one function each, named partition<Kind>)
// appends what `op` becomes on local blocks. A name, not a function: the
// rules are partitioning code and live with the partitioner in passes/.
#define GSL_PARTITION_RULES(X) \
  X(Local) X(LocalShape) X(Mean) X(Param) X(Constant) X(Copy) X(Whole) X(Slice) X(Concat) X(Take) X(Dropout)
enum class PartitionRule : uint8_t {
  None,  // collectives (per-rank programs only) and loop (passes/LoopPartition)
#define GSL_PARTITION_RULE_KIND(name) name,
  GSL_PARTITION_RULES(GSL_PARTITION_RULE_KIND)
#undef GSL_PARTITION_RULE_KIND
};

// Byte-volume rule of a collective: the bytes one member of a group of `n`
// sends, from the bytes of its local input, by the ring algorithm's
// volumes (independent of how a communicator really moves the data).
using VolumeRule = uint64_t (*)(uint64_t n, uint64_t inputBytes);
uint64_t volumeAllGather(uint64_t n, uint64_t inputBytes);      // (n-1) B: own block to each peer
uint64_t volumeAllReduce(uint64_t n, uint64_t inputBytes);      // 2 (n-1)/n B: reduce-scatter + all-gather
uint64_t volumeAllBlocksButOne(uint64_t n, uint64_t inputBytes);  // (n-1)/n B: reduce_scatter, all_to_all
uint64_t volumeWhole(uint64_t n, uint64_t inputBytes);          // B: collective_permute

// The dtype a number literal operand of a builtin takes.
enum class LiteralDType {
  Natural,  // its own: an integer literal is i32, a float literal f32
  F32,      // f32 (ops defined on f32 only: `exp(1)` works)
};

// Declarations that a row leaves a column empty by design (bit set).
enum OpTrait : unsigned {
  NoTraits = 0,
  NotDifferentiable = 1u << 0,  // no gradient rule although its class has them
                                // (comparisons, logic, mod, argmax, one_hot)
  NoCommunication = 1u << 1,    // a collective that moves no data (shard_slice)
  HasBody = 1u << 2,            // an op with a body (loop, class Control): no
                                // type, gradient, sharding or partition rule;
                                // the passes derive all four from its body
                                // (ir/Loop.h: inferLoopTypes, the autodiff,
                                // propagation and partitioner loop code)
  IndexOperand = 1u << 3,       // the last operand holds indices into another
                                // operand (take): where it is split over a
                                // padded dim the partitioner sets its padding
                                // to 0, a valid index (docs/sharding.md)
};

struct OpInfo {
  OpKind kind;
  const char* mnemonic;          // IR text name
  const char* builtin;           // surface name (nullptr: operators only)
  OpClass cls;
  std::vector<ArgSpec> args;     // surface signature of the builtin, in order
  TypeRule infer;                // nullptr: result type is given (param, constant)
  GradRule grad;                 // nullptr: not differentiable (a constant to autodiff;
                                 // param ops are handled by the pass itself)
  ShardRule shard;               // nullptr: collectives (per-rank programs only)
  PartitionRule partition;       // None: collectives (per-rank programs only)
  LiteralDType literal = LiteralDType::Natural;
  VolumeRule volume = nullptr;   // collectives that communicate
  unsigned traits = NoTraits;    // OpTrait bits

  bool has(OpTrait t) const { return (traits & t) != 0; }
};

const OpInfo& opInfo(OpKind k);
const char* opName(OpKind k);
// Op kinds ordered by mnemonic: maps keyed by kind (the collectives' stats
// and costs) iterate in the order their printed forms have always had.
struct ByMnemonic {
  bool operator()(OpKind a, OpKind b) const;
};
template <class T>
using OpKindMap = std::map<OpKind, T, ByMnemonic>;
const OpInfo* lookupMnemonic(std::string_view m);
const OpInfo* lookupBuiltin(std::string_view name);
// All ops, in table order (for docs, editors and completion).
const std::vector<OpInfo>& allOps();

// Type-checks an op: runs its rule. Returns "" or the error message.
std::string inferType(OpKind k, const std::vector<TensorType>& in, AttrMap& attrs, TensorType& out);

// The attrs whose kind is a parsed value (Einsum, Reduce) enter as strings:
// a builtin's string literal, IR text. Parses `text` as the attr `arg` of
// `op` with `numOperands` operands into `out`; returns "" or the message
// (the ones the type rules gave when these attrs were strings).
std::string parseStringAttr(const OpInfo& op, const ArgSpec& arg, const std::string& text, size_t numOperands,
                            Attr& out);

// NumPy broadcasting of two shapes; returns false if incompatible.
bool broadcastShapes(const Shape& a, const Shape& b, Shape& out);

}  // namespace gsl::ir
