// The operator table of frontend/Operators.h.
#include "frontend/Operators.h"

#include "support/Diagnostics.h"

namespace gsl::ast {

const std::vector<BinaryOpInfo>& allBinaryOps() {
  using B = BinaryOp;
  static const std::vector<BinaryOpInfo> t = {
      {B::Pow, "**", 8, true, true},      {B::Mul, "*", 6, false, true},   {B::Div, "/", 6, false, true},
      {B::FloorDiv, "//", 6, false, true}, {B::Mod, "%", 6, false, true},   {B::MatMul, "@", 6, false, false},
      {B::Add, "+", 5, false, true},      {B::Sub, "-", 5, false, true},   {B::Eq, "==", 4, false, false},
      {B::Ne, "!=", 4, false, false},     {B::Lt, "<", 4, false, false},   {B::Le, "<=", 4, false, false},
      {B::Gt, ">", 4, false, false},      {B::Ge, ">=", 4, false, false},  {B::And, "and", 2, false, false},
      {B::Or, "or", 1, false, false},
  };
  return t;
}

const std::vector<UnaryOpInfo>& allUnaryOps() {
  static const std::vector<UnaryOpInfo> t = {
      {UnaryOp::Neg, "-", 7}, {UnaryOp::Plus, "+", 7}, {UnaryOp::Not, "not", 3}};
  return t;
}

const BinaryOpInfo& info(BinaryOp op) {
  const auto& t = allBinaryOps();
  GSL_ASSERT((size_t)op < t.size() && t[(size_t)op].op == op, "binary operator table out of order");
  return t[(size_t)op];
}

const UnaryOpInfo& info(UnaryOp op) {
  const auto& t = allUnaryOps();
  GSL_ASSERT((size_t)op < t.size() && t[(size_t)op].op == op, "unary operator table out of order");
  return t[(size_t)op];
}

std::optional<BinaryOp> binaryOpNamed(std::string_view s) {
  for (const auto& i : allBinaryOps())
    if (s == i.spelling) return i.op;
  return std::nullopt;
}

std::optional<UnaryOp> unaryOpNamed(std::string_view s) {
  for (const auto& i : allUnaryOps())
    if (s == i.spelling) return i.op;
  return std::nullopt;
}

}  // namespace gsl::ast
