// The operators of GSL expressions, typed: the parser sets an ast::Expr's
// BinaryOp/UnaryOp from the token, and the const evaluator, the lowering
// and the AST printer switch on it. One table (frontend/Operators.cpp)
// gives each operator its spelling (as written, as printed by --emit ast
// and in diagnostics) and its precedence in grammar/GSL.g4.
#pragma once
#include <optional>
#include <string_view>
#include <vector>

namespace gsl::ast {

enum class BinaryOp { Pow, Mul, Div, FloorDiv, Mod, MatMul, Add, Sub, Eq, Ne, Lt, Le, Gt, Ge, And, Or };
enum class UnaryOp { Neg, Plus, Not };

// `precedence`: larger binds tighter, in the order of the `expr`
// alternatives of grammar/GSL.g4 (`**` 8, unary `-`/`+` 7, `* / % @ //` 6,
// `+ -` 5, comparisons 4, `not` 3, `and` 2, `or` 1); the parser test
// checks the grammar against it.
struct BinaryOpInfo {
  BinaryOp op;
  const char* spelling;
  int precedence;
  bool rightAssoc;  // `**` only: a ** b ** c is a ** (b ** c)
  bool arithmetic;  // + - * / % // **: folded on two numbers (Sema::foldBinary)
};
struct UnaryOpInfo {
  UnaryOp op;
  const char* spelling;
  int precedence;
};

// The tables, in enum order.
const std::vector<BinaryOpInfo>& allBinaryOps();
const std::vector<UnaryOpInfo>& allUnaryOps();
const BinaryOpInfo& info(BinaryOp op);
const UnaryOpInfo& info(UnaryOp op);
inline const char* spelling(BinaryOp op) { return info(op).spelling; }
inline const char* spelling(UnaryOp op) { return info(op).spelling; }
// The operator spelled `s` ("+", "//", "and", ...), if any.
std::optional<BinaryOp> binaryOpNamed(std::string_view s);
std::optional<UnaryOp> unaryOpNamed(std::string_view s);

}  // namespace gsl::ast
