// The op table: every tensor op of GSL is defined once, here.
//
// Each row carries the op's IR mnemonic, its surface builtin name and
// signature (how `sum(x, axis=[0], keepdims=true)` maps onto operands and
// attributes), its class, and its type rule (result dtype and static shape
// from the operand types and attributes, with attribute canonicalisation:
// negative axes become positive, `-1` in reshape is resolved, defaults are
// filled in). The front end type-checks builtin calls with these rules, the
// IR parser and verifier re-check with them, and the interpreter dispatches
// on OpKind. Sharding rules (issue 3) and gradient rules (issue 5) are added
// as further columns of this same table: the gradient column `grad`
// (ir/GradRules.h) gives each differentiable op its reverse-mode rule,
// used by the autodiff pass (passes/Autodiff.h).
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/Attr.h"
#include "ir/Type.h"

namespace gsl::ir {

// X-macro list of ops: (Kind, "mnemonic").
#define GSL_OPS(X)                                                          \
  X(Param, "param") X(Constant, "constant") X(Copy, "copy")                 \
  X(Neg, "neg") X(Exp, "exp") X(Log, "log") X(Sqrt, "sqrt")                 \
  X(Rsqrt, "rsqrt") X(Tanh, "tanh") X(Relu, "relu") X(Gelu, "gelu")         \
  X(Sigmoid, "sigmoid") X(Abs, "abs") X(Not, "not") X(Cast, "cast")         \
  X(Add, "add") X(Sub, "sub") X(Mul, "mul") X(Div, "div") X(Pow, "pow")     \
  X(Mod, "mod") X(Maximum, "maximum") X(Minimum, "minimum")                 \
  X(Eq, "eq") X(Ne, "ne") X(Lt, "lt") X(Le, "le") X(Gt, "gt") X(Ge, "ge")   \
  X(And, "and") X(Or, "or") X(Where, "where")                               \
  X(MatMul, "matmul") X(Einsum, "einsum")                                   \
  X(Sum, "sum") X(Mean, "mean") X(Max, "max") X(Min, "min")                 \
  X(ArgMax, "argmax") X(Softmax, "softmax") X(LogSoftmax, "log_softmax")    \
  X(LayerNorm, "layer_norm") X(CumSum, "cumsum")                            \
  X(Reshape, "reshape") X(Transpose, "transpose") X(Concat, "concat")       \
  X(Slice, "slice") X(Broadcast, "broadcast") X(OneHot, "one_hot")          \
  X(Take, "take") X(RandomUniform, "random_uniform")                        \
  X(AllReduce, "all_reduce") X(AllGather, "all_gather")                     \
  X(ReduceScatter, "reduce_scatter") X(AllToAll, "all_to_all")              \
  X(CollectivePermute, "collective_permute") X(ShardSlice, "shard_slice")

enum class OpKind {
#define GSL_OP_ENUM(k, m) k,
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
  DataMovement,    // reshape, transpose, concat, slice, broadcast, one_hot, take
  Collective,      // per-rank programs only: communication between ranks and
                   // the rank-dependent local slice (see below)
};

// Collectives (only in the per-rank program made by the SPMD partitioner).
// Common attrs: `mesh` (string) and `axes` (int list: mesh axis indices,
// major first). The ranks that agree on every other mesh axis form a group;
// a rank's index in its group is its coordinate along `axes` (row-major).
// `n` is the group size (product of the axes' sizes), kept as an attr so the
// type rules need no mesh.
//   all_reduce {reduce = "sum"|"max"|"min"}: elementwise reduction over the group
//   all_gather {dim}: concatenates the group's blocks along dim (dim * n)
//   reduce_scatter {dim}: sums over the group, keeps block `index` of dim (dim / n)
//   all_to_all {split_dim, concat_dim}: splits split_dim into n blocks, sends
//       block j to group member j, concatenates what it receives along concat_dim
//   collective_permute {perm}: group member i receives the block of member perm[i]
//   shard_slice {dim}: keeps block `index` of dim (dim / n); no communication

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

struct OpInfo {
  OpKind kind;
  const char* mnemonic;          // IR text name
  const char* builtin;           // surface name (nullptr: operators only)
  OpClass cls;
  std::vector<ArgSpec> args;     // surface signature of the builtin, in order
  TypeRule infer;                // nullptr: result type is given (param)
  GradRule grad;                 // nullptr: not differentiable (a constant to autodiff;
                                 // param ops are handled by the pass itself)
};

const OpInfo& opInfo(OpKind k);
const char* opName(OpKind k);
const OpInfo* lookupMnemonic(std::string_view m);
const OpInfo* lookupBuiltin(std::string_view name);
// All ops, in table order (for docs, editors and completion).
const std::vector<OpInfo>& allOps();

// Type-checks an op: runs its rule. Returns "" or the error message.
std::string inferType(OpKind k, const std::vector<TensorType>& in, AttrMap& attrs, TensorType& out);

// NumPy broadcasting of two shapes; returns false if incompatible.
bool broadcastShapes(const Shape& a, const Shape& b, Shape& out);

// Parsed einsum spec: one label string per operand and the output labels.
struct EinsumSpec {
  std::vector<std::string> inputs;
  std::string output;
};
// Parses "ab,bc->ac" (implicit output when "->" is absent, as NumPy).
// Returns "" or an error message.
std::string parseEinsum(const std::string& spec, size_t numOperands, EinsumSpec& out);

}  // namespace gsl::ir
