// The GSL abstract syntax tree. Every node has a source location.
// Built from the ANTLR parse tree by frontend/Parser; checked and lowered to
// IR by frontend/Sema; printed by `gsl compile --emit ast` (ASTPrinter).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "frontend/Operators.h"
#include "ir/Type.h"
#include "support/SourceLoc.h"

namespace gsl::ast {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

// `@shard(m, [data, _, (a, b)])`, `@shard(m, [])` or `@replicate(m)`.
struct ShardAnnot {
  SourceLoc loc;
  std::string mesh;
  bool replicate = false;                     // @replicate(m)
  std::vector<std::vector<std::string>> dims;  // per tensor dim: axes (empty = `_`)
  std::vector<SourceLoc> dimLocs;
};

// `f32[B, D]`; scalars `f32`.
struct TypeExpr {
  SourceLoc loc;
  ir::DType dtype = ir::DType::F32;
  std::vector<ExprPtr> dims;
};

struct CallArg {
  std::string keyword;  // empty for positional
  SourceLoc loc;
  ExprPtr value;
};

enum class ExprKind {
  Int, Float, String, Bool, DType,  // literals
  Name,                             // a name: local, const, param, host variable
  Call,                             // name(args)
  Method,                           // object.member(args), e.g. opt.minimize(loss, x, y)
  List,                             // [a, b, c] (static lists; concat's operands)
  Tuple,                            // (a, b) (return only)
  Unary,                            // unaryOp: - + not
  Binary,                           // binaryOp: + - * / % // ** @ == != < <= > >= and or
  Annot,                            // expr @shard(...)
  Load,                             // load(path) : TYPE [@shard(...)]
  Index,                            // base[items]: elems[0] is the base, indices the items
  Member,                           // group.member (a param-group member; text.member)
};

// One item of `x[...]`: a point `i` (drops the dim) or a slice `a:b` (keeps
// it; either bound may be left out).
struct IndexItem {
  SourceLoc loc;
  bool slice = false;
  ExprPtr point;   // a point
  ExprPtr lo, hi;  // a slice's bounds (null: from the start / to the end)
};

struct Expr {
  ExprKind kind;
  SourceLoc loc;
  int64_t ival = 0;     // Int
  double fval = 0;      // Float
  bool bval = false;    // Bool
  ir::DType dtype{};    // DType
  std::string text;     // String value, Name, Call callee, Method object
  BinaryOp binaryOp{};  // Binary
  UnaryOp unaryOp{};    // Unary
  std::string member;   // Method: the member called
  std::vector<ExprPtr> elems;  // List/Tuple elements; Unary/Binary operands; Annot/Load inner
  std::vector<CallArg> args;   // Call
  std::unique_ptr<ShardAnnot> annot;  // Annot, Load
  std::unique_ptr<TypeExpr> type;     // Load
  std::vector<IndexItem> indices;     // Index
};

struct Stmt;
using Block = std::vector<std::unique_ptr<Stmt>>;

enum class StmtKind { Let, LetTuple, Assign, Return, For, If, Expr };

struct Stmt {
  StmtKind kind;
  SourceLoc loc;
  std::vector<std::string> names;     // Let/LetTuple/Assign targets, For variable
  std::vector<SourceLoc> nameLocs;
  std::unique_ptr<TypeExpr> type;     // Let's optional type
  std::vector<ExprPtr> exprs;         // value(s); For: [lo, hi]; If: [cond]; Return: values
  Block body;                         // For/If then-block
  // For: `@pipeline(microbatches = M)` (pipelined is set when written).
  bool pipelined = false;
  SourceLoc pipelineLoc;
  std::vector<CallArg> pipelineArgs;
  Block elseBody;                     // If else-block (an `else if` is one nested If)
  bool hasElse = false;
};

enum class DeclKind { Import, Const, Mesh, Param, Fn, Optimizer, Dataset, ParamGroup };
// The keyword that declares it: "import", "const", ..., "fn", ...
const char* declKindName(DeclKind k);

struct MeshAxisDecl {
  std::string name;
  SourceLoc loc;
  ExprPtr size;
};

struct FnArg {
  std::string name;
  SourceLoc loc;
  std::unique_ptr<TypeExpr> type;
  std::unique_ptr<ShardAnnot> annot;
};

struct FnResult {
  std::unique_ptr<TypeExpr> type;
  std::unique_ptr<ShardAnnot> annot;
};

struct Decl {
  DeclKind kind;
  SourceLoc loc;
  std::string name;                   // import path for Import
  // Import `with (L = 2, D = 64)`: the imported file's consts to override.
  std::vector<CallArg> with;
  // Const: the `with` entry of the import that overrides it (set by the
  // loader, frontend/Frontend.cpp), and that import's path.
  const CallArg* override = nullptr;
  std::string overrideImport;
  ExprPtr value;                      // Const value, Param init, Optimizer/Dataset constructor
  std::vector<MeshAxisDecl> axes;     // Mesh
  std::unique_ptr<TypeExpr> type;     // Param
  std::unique_ptr<ShardAnnot> annot;  // Param
  std::vector<FnArg> args;            // Fn
  std::vector<std::pair<std::string, SourceLoc>> shapeParams;  // Fn: `fn f[C](...)`
  std::vector<FnResult> results;      // Fn
  bool tupleResult = false;           // Fn: `-> (T1, T2)`
  Block body;                         // Fn
  // ParamGroup `param blocks[L] { wq: T = init ... }`: value is L, members
  // are Param decls (their name the member's, their type one layer's);
  // `annot` (`param blocks[L] @shard(m, [stage])`) splits the layer dim.
  std::vector<std::unique_ptr<Decl>> members;
};

struct Program {
  int file = -1;
  std::vector<std::unique_ptr<Decl>> decls;
};

// `gsl compile --emit ast`: an indented, deterministic dump.
std::string printAST(const Program& p);

}  // namespace gsl::ast
