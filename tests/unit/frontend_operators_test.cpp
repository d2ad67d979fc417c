// frontend/Operators: the operator table (spellings, precedence) and the
// parser agree with it, so the table is the one description of GSL's
// operators (the editors' lists are checked against it by editors_lists).
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "frontend/AST.h"
#include "frontend/Parser.h"

using namespace gsl;
using ast::BinaryOp;
using ast::UnaryOp;

namespace {

// The value of `const c = SRC`, parsed (no semantic checks).
struct Parsed {
  SourceManager sm;
  std::unique_ptr<ast::Program> prog;
  const ast::Expr* value = nullptr;
};

void parseConst(Parsed& p, const std::string& src) {
  int f = p.sm.addFile("<test>", "const c = " + src + "\n");
  Diagnostics diags(p.sm);
  p.prog = frontend::parseProgram(p.sm, f, diags);
  REQUIRE_MESSAGE(p.prog, src);
  REQUIRE(p.prog->decls.size() == 1);
  p.value = p.prog->decls[0]->value.get();
}

}  // namespace

TEST_CASE("operators: the table is in enum order and every spelling reads back") {
  std::set<std::string> spellings;
  for (size_t i = 0; i < ast::allBinaryOps().size(); ++i) {
    auto op = (BinaryOp)i;
    CHECK(ast::info(op).op == op);
    CHECK(spellings.insert(ast::spelling(op)).second);
    CHECK(ast::binaryOpNamed(ast::spelling(op)) == op);
  }
  CHECK(ast::allBinaryOps().size() == (size_t)BinaryOp::Or + 1);
  for (size_t i = 0; i < ast::allUnaryOps().size(); ++i) {
    auto op = (UnaryOp)i;
    CHECK(ast::info(op).op == op);
    CHECK(ast::unaryOpNamed(ast::spelling(op)) == op);
  }
  CHECK(ast::allUnaryOps().size() == (size_t)UnaryOp::Not + 1);
  CHECK_FALSE(ast::binaryOpNamed("not").has_value());
  CHECK_FALSE(ast::binaryOpNamed("=").has_value());
  CHECK_FALSE(ast::unaryOpNamed("*").has_value());
}

TEST_CASE("operators: the parser sets the operator of every binary and unary expression") {
  for (const auto& i : ast::allBinaryOps()) {
    Parsed p;
    parseConst(p, std::string("x ") + i.spelling + " y");
    REQUIRE(p.value->kind == ast::ExprKind::Binary);
    CHECK(p.value->binaryOp == i.op);
  }
  for (const auto& i : ast::allUnaryOps()) {
    Parsed p;
    parseConst(p, std::string(i.spelling) + " x");
    REQUIRE(p.value->kind == ast::ExprKind::Unary);
    CHECK(p.value->unaryOp == i.op);
  }
}

// `x A y B z` nests as the precedences and associativity of the table say:
// ((x A y) B z) when A binds tighter (or as tight, left-associative), else
// (x A (y B z)). `U x B y`: ((U x) B y) when U binds tighter, else U (x B y).
TEST_CASE("operators: grammar/GSL.g4 parses with the table's precedence and associativity") {
  for (const auto& a : ast::allBinaryOps()) {
    for (const auto& b : ast::allBinaryOps()) {
      std::string src = std::string("x ") + a.spelling + " y " + b.spelling + " z";
      Parsed p;
      parseConst(p, src);
      bool leftFirst = a.precedence > b.precedence || (a.precedence == b.precedence && !a.rightAssoc);
      REQUIRE(p.value->kind == ast::ExprKind::Binary);
      INFO(src);
      if (leftFirst) {
        CHECK(p.value->binaryOp == b.op);
        REQUIRE(p.value->elems[0]->kind == ast::ExprKind::Binary);
        CHECK(p.value->elems[0]->binaryOp == a.op);
      } else {
        CHECK(p.value->binaryOp == a.op);
        REQUIRE(p.value->elems[1]->kind == ast::ExprKind::Binary);
        CHECK(p.value->elems[1]->binaryOp == b.op);
      }
    }
  }
  for (const auto& u : ast::allUnaryOps()) {
    for (const auto& b : ast::allBinaryOps()) {
      std::string src = std::string(u.spelling) + " x " + b.spelling + " y";
      Parsed p;
      parseConst(p, src);
      INFO(src);
      if (u.precedence > b.precedence) {
        REQUIRE(p.value->kind == ast::ExprKind::Binary);
        CHECK(p.value->binaryOp == b.op);
        CHECK(p.value->elems[0]->kind == ast::ExprKind::Unary);
      } else {
        REQUIRE(p.value->kind == ast::ExprKind::Unary);
        CHECK(p.value->unaryOp == u.op);
        CHECK(p.value->elems[0]->kind == ast::ExprKind::Binary);
      }
    }
  }
}
