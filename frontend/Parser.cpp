#include "frontend/Parser.h"

#include <GSLLexer.h>
#include <GSLParser.h>
#include <antlr4-runtime.h>

#include <algorithm>
#include <regex>
#include <set>

namespace gsl::frontend {

using namespace gslgrammar;
using antlr4::Token;

namespace {

// Turns ANTLR's messages into user-facing ones and keeps only the first
// (parseProgram reports it, or a bracket mismatch that explains it better).
class ErrorListener : public antlr4::BaseErrorListener {
 public:
  explicit ErrorListener(int file) : file_(file) {}
  bool failed = false;
  SourceLoc loc;
  std::string message;
  antlr4::TokenStream* tokens = nullptr;  // for the token before the offending one

  void syntaxError(antlr4::Recognizer*, Token* tok, size_t line, size_t col, const std::string& msg,
                   std::exception_ptr) override {
    if (failed) return;
    failed = true;
    loc = {file_, (int)line, (int)col + 1};
    message = friendly(msg, tok);
    // A keyword where a name belongs: `let for = x`.
    if (tok && isKeyword(tok->getText()) && tokens && tok->getTokenIndex() != (size_t)-1 &&
        tok->getTokenIndex() > 0) {
      static const std::set<std::string> binders = {"let", "const", "mesh", "param", "fn", "for"};
      std::string prev = tokens->get(tok->getTokenIndex() - 1)->getText();
      if (binders.count(prev) || message.find("expected a name") != std::string::npos)
        message = "'" + tok->getText() + "' is a keyword and cannot be used as a name";
    }
  }

 private:
  static std::string tokenName(const std::string& t) {
    if (t == "<EOF>" || t == "'<EOF>'") return "end of file";
    if (t == "ID") return "a name";
    if (t == "INT") return "an integer";
    if (t == "FLOAT") return "a number";
    if (t == "STRING") return "a string";
    if (t == "DTYPE") return "a type (f32, i32, bool, bf16)";
    return t;
  }
  // "{'a', ID}" or "'a'" -> "'a' or a name"; empty if the set is large.
  static std::string expected(std::string set) {
    if (!set.empty() && set.front() == '{') set = set.substr(1, set.size() - 2);
    std::vector<std::string> items;
    std::string cur;
    bool inq = false;
    for (char c : set) {
      if (c == '\'') inq = !inq;
      if (c == ',' && !inq) {
        items.push_back(cur);
        cur.clear();
        continue;
      }
      if (c == ' ' && !inq && cur.empty()) continue;
      cur += c;
    }
    if (!cur.empty()) items.push_back(cur);
    if (std::find(items.begin(), items.end(), "'import'") != items.end() &&
        std::find(items.begin(), items.end(), "'fn'") != items.end())
      return "a declaration (import, const, mesh, param or fn)";
    if (items.empty() || items.size() > 4) return "";
    std::string r;
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) r += (i + 1 == items.size()) ? " or " : ", ";
      r += tokenName(items[i]);
    }
    return r;
  }
  // A reserved word: spelled like a name but lexed as a keyword or dtype.
  static bool isKeyword(const std::string& t) {
    static const std::regex word("[a-zA-Z_][a-zA-Z_0-9]*");
    if (!std::regex_match(t, word)) return false;
    antlr4::ANTLRInputStream in(t);
    GSLLexer lex(&in);
    lex.removeErrorListeners();
    return lex.nextToken()->getType() != GSLLexer::ID;
  }
  static std::string what(Token* tok) {
    if (!tok || tok->getType() == Token::EOF) return "end of file";
    return "'" + tok->getText() + "'";
  }
  static std::string friendly(const std::string& msg, Token* tok) {
    std::smatch m;
    static const std::regex missing(R"(^missing (.*) at (.*)$)");
    static const std::regex mismatch(R"(^(mismatched|extraneous) input (.*) expecting (.*)$)");
    if (std::regex_match(msg, m, missing))
      return "expected " + tokenName(m[1]) + " before " + what(tok);
    if (std::regex_match(msg, m, mismatch)) {
      std::string e = expected(m[3]);
      return "unexpected " + what(tok) + (e.empty() ? "" : ", expected " + e);
    }
    if (msg.rfind("token recognition error", 0) == 0) return "unexpected character";
    return "unexpected " + what(tok);
  }
  int file_;
};

// The first bracket that is closed by the wrong kind of bracket, or never
// closed. A missing ')' makes ANTLR complain about whatever token follows
// (often far away); this says which bracket is open.
struct BracketProblem {
  Token* open = nullptr;   // the unmatched opening bracket (null: none)
  Token* close = nullptr;  // the wrong closing bracket; null: end of file
};

BracketProblem findBracketProblem(antlr4::CommonTokenStream& tokens) {
  std::vector<Token*> stack;
  for (Token* t : tokens.getTokens()) {
    const std::string s = t->getType() == Token::EOF ? "" : t->getText();
    if (s == "(" || s == "[" || s == "{") {
      stack.push_back(t);
    } else if (s == ")" || s == "]" || s == "}") {
      if (stack.empty()) return {};  // a stray closer: the parser's message says it
      const std::string o = stack.back()->getText();
      if ((o == "(" && s != ")") || (o == "[" && s != "]") || (o == "{" && s != "}")) return {stack.back(), t};
      stack.pop_back();
    }
  }
  if (!stack.empty()) return {stack.back(), nullptr};
  return {};
}

std::string closerOf(const std::string& open) { return open == "(" ? ")" : open == "[" ? "]" : "}"; }

// Parse tree -> AST.
class Builder {
 public:
  Builder(int file, Diagnostics& d) : file_(file), diags_(d) {}
  bool tooDeep = false;

  SourceLoc loc(Token* t) const { return {file_, (int)t->getLine(), (int)t->getCharPositionInLine() + 1}; }
  SourceLoc loc(antlr4::ParserRuleContext* c) const { return loc(c->getStart()); }
  SourceLoc loc(antlr4::tree::TerminalNode* n) const { return loc(n->getSymbol()); }

  std::unique_ptr<ast::Program> program(GSLParser::ProgramContext* p) {
    auto prog = std::make_unique<ast::Program>();
    prog->file = file_;
    for (auto* d : p->decl()) prog->decls.push_back(decl(d));
    return prog;
  }

  static std::string unquote(const std::string& s) {
    std::string r;
    for (size_t i = 1; i + 1 < s.size(); ++i) {
      if (s[i] == '\\' && i + 2 < s.size()) {
        char c = s[++i];
        r += c == 'n' ? '\n' : c == 't' ? '\t' : c;
      } else {
        r += s[i];
      }
    }
    return r;
  }

  // `KEYWORD NAME = EXPR` declarations (const, optimizer, dataset).
  template <class Ctx>
  void namedValue(ast::Decl& d, ast::DeclKind kind, Ctx* x) {
    d.kind = kind;
    d.name = x->ID()->getText();
    d.loc = loc(x->ID());
    d.value = expr(x->expr());
  }

  // The arguments of a call or method call.
  std::vector<ast::CallArg> callArgs(const std::vector<GSLParser::ArgContext*>& args, int depth) {
    std::vector<ast::CallArg> r;
    for (auto* a : args) {
      ast::CallArg arg;
      arg.loc = loc(a);
      if (a->name) arg.keyword = a->name->getText();
      arg.value = expr(a->expr(), depth + 1);
      r.push_back(std::move(arg));
    }
    return r;
  }

  std::unique_ptr<ast::Decl> decl(GSLParser::DeclContext* c) {
    auto d = std::make_unique<ast::Decl>();
    d->loc = loc(c);
    if (auto* x = dynamic_cast<GSLParser::ImportDeclContext*>(c)) {
      d->kind = ast::DeclKind::Import;
      d->name = unquote(x->STRING()->getText());
      d->loc = loc(x->STRING());
      d->with = callArgs(x->arg(), 0);
    } else if (auto* x = dynamic_cast<GSLParser::ConstDeclContext*>(c)) {
      namedValue(*d, ast::DeclKind::Const, x);
    } else if (auto* x = dynamic_cast<GSLParser::MeshDeclContext*>(c)) {
      d->kind = ast::DeclKind::Mesh;
      d->name = x->ID()->getText();
      d->loc = loc(x->ID());
      for (auto* a : x->meshAxis()) d->axes.push_back({a->ID()->getText(), loc(a->ID()), expr(a->expr())});
    } else if (auto* x = dynamic_cast<GSLParser::ParamDeclContext*>(c)) {
      d->kind = ast::DeclKind::Param;
      d->name = x->ID()->getText();
      d->loc = loc(x->ID());
      d->type = type(x->type());
      if (x->annotation()) d->annot = annotation(x->annotation());
      d->value = expr(x->expr());
    } else if (auto* x = dynamic_cast<GSLParser::ParamGroupDeclContext*>(c)) {
      d->kind = ast::DeclKind::ParamGroup;
      d->name = x->ID()->getText();
      d->loc = loc(x->ID());
      d->value = expr(x->expr());
      if (x->annotation()) d->annot = annotation(x->annotation());
      for (auto* m : x->groupMember()) {
        auto md = std::make_unique<ast::Decl>();
        md->kind = ast::DeclKind::Param;
        md->name = m->ID()->getText();
        md->loc = loc(m->ID());
        md->type = type(m->type());
        if (m->annotation()) md->annot = annotation(m->annotation());
        md->value = expr(m->expr());
        d->members.push_back(std::move(md));
      }
    } else if (auto* x = dynamic_cast<GSLParser::FnDeclContext*>(c)) {
      d->kind = ast::DeclKind::Fn;
      d->name = x->ID()->getText();
      d->loc = loc(x->ID());
      if (auto* sp = x->shapeParams())
        for (auto* id : sp->ID()) d->shapeParams.push_back({id->getText(), loc(id)});
      for (auto* a : x->fnArg()) {
        ast::FnArg arg;
        arg.name = a->ID()->getText();
        arg.loc = loc(a->ID());
        arg.type = type(a->type());
        if (a->annotation()) arg.annot = annotation(a->annotation());
        d->args.push_back(std::move(arg));
      }
      if (auto* r = x->resultType()) {
        if (auto* s = dynamic_cast<GSLParser::SingleResultContext*>(r)) {
          ast::FnResult res;
          res.type = type(s->type());
          if (s->annotation()) res.annot = annotation(s->annotation());
          d->results.push_back(std::move(res));
        } else {
          auto* t = dynamic_cast<GSLParser::TupleResultContext*>(r);
          d->tupleResult = true;
          // Pair each type with the annotation that directly follows it.
          for (auto* child : t->children) {
            if (auto* tc = dynamic_cast<GSLParser::TypeContext*>(child)) {
              ast::FnResult res;
              res.type = type(tc);
              d->results.push_back(std::move(res));
            } else if (auto* ac = dynamic_cast<GSLParser::AnnotationContext*>(child)) {
              d->results.back().annot = annotation(ac);
            }
          }
        }
      }
      d->body = block(x->block(), 0);
    } else if (auto* x = dynamic_cast<GSLParser::OptimizerDeclContext*>(c)) {
      namedValue(*d, ast::DeclKind::Optimizer, x);
    } else if (auto* x = dynamic_cast<GSLParser::DatasetDeclContext*>(c)) {
      namedValue(*d, ast::DeclKind::Dataset, x);
    }
    return d;
  }

  std::unique_ptr<ast::TypeExpr> type(GSLParser::TypeContext* c) {
    auto t = std::make_unique<ast::TypeExpr>();
    t->loc = loc(c);
    t->dtype = *ir::parseDType(c->DTYPE()->getText());
    for (auto* e : c->expr()) t->dims.push_back(expr(e));
    return t;
  }

  std::unique_ptr<ast::ShardAnnot> annotation(GSLParser::AnnotationContext* c) {
    auto a = std::make_unique<ast::ShardAnnot>();
    a->loc = loc(c);
    if (auto* r = dynamic_cast<GSLParser::ReplicateAnnotContext*>(c)) {
      a->mesh = r->ID()->getText();
      a->replicate = true;
    } else if (auto* s = dynamic_cast<GSLParser::ShardAnnotScalarContext*>(c)) {
      a->mesh = s->ID()->getText();
    } else {
      auto* x = dynamic_cast<GSLParser::ShardAnnotContext*>(c);
      a->mesh = x->ID()->getText();
      for (auto* d : x->shardDim()) {
        std::vector<std::string> axes;
        if (auto* one = dynamic_cast<GSLParser::ShardAxisContext*>(d)) axes.push_back(one->ID()->getText());
        if (auto* many = dynamic_cast<GSLParser::ShardAxesContext*>(d))
          for (auto* id : many->ID()) axes.push_back(id->getText());
        a->dims.push_back(axes);
        a->dimLocs.push_back(loc(d));
      }
    }
    return a;
  }

  ast::Block block(GSLParser::BlockContext* c, int depth) {
    ast::Block b;
    if (depth > kMaxNesting) {
      nestingError(loc(c), "program is nested too deeply (more than " + std::to_string(kMaxNesting) + " levels)");
      return b;
    }
    for (auto* s : c->stmt()) b.push_back(stmt(s, depth + 1));
    return b;
  }

  void nestingError(SourceLoc l, const std::string& message) {
    if (!tooDeep) diags_.error(l, message);
    tooDeep = true;
  }

  std::unique_ptr<ast::Stmt> ifChain(SourceLoc l, GSLParser::ExprContext* cond,
                                     std::vector<GSLParser::BlockContext*> blocks,
                                     GSLParser::IfTailContext* tail, int depth) {
    auto s = std::make_unique<ast::Stmt>();
    s->kind = ast::StmtKind::If;
    s->loc = l;
    s->exprs.push_back(expr(cond));
    s->body = block(blocks[0], depth);
    if (tail) {
      s->hasElse = true;
      s->elseBody.push_back(ifChain(loc(tail), tail->expr(), tail->block(), tail->ifTail(), depth + 1));
    } else if (blocks.size() > 1) {
      s->hasElse = true;
      s->elseBody = block(blocks[1], depth);
    }
    return s;
  }

  std::unique_ptr<ast::Stmt> stmt(GSLParser::StmtContext* c, int depth) {
    if (auto* x = dynamic_cast<GSLParser::IfStmtContext*>(c))
      return ifChain(loc(c), x->expr(), x->block(), x->ifTail(), depth);
    auto s = std::make_unique<ast::Stmt>();
    s->loc = loc(c);
    if (auto* x = dynamic_cast<GSLParser::LetStmtContext*>(c)) {
      s->kind = ast::StmtKind::Let;
      s->names.push_back(x->ID()->getText());
      s->nameLocs.push_back(loc(x->ID()));
      if (x->type()) s->type = type(x->type());
      s->exprs.push_back(expr(x->expr()));
    } else if (auto* x = dynamic_cast<GSLParser::LetTupleStmtContext*>(c)) {
      s->kind = ast::StmtKind::LetTuple;
      for (auto* id : x->ID()) {
        s->names.push_back(id->getText());
        s->nameLocs.push_back(loc(id));
      }
      s->exprs.push_back(expr(x->expr()));
    } else if (auto* x = dynamic_cast<GSLParser::AssignStmtContext*>(c)) {
      s->kind = ast::StmtKind::Assign;
      s->names.push_back(x->ID()->getText());
      s->nameLocs.push_back(loc(x->ID()));
      s->exprs.push_back(expr(x->expr()));
    } else if (auto* x = dynamic_cast<GSLParser::ReturnStmtContext*>(c)) {
      s->kind = ast::StmtKind::Return;
      for (auto* e : x->expr()) s->exprs.push_back(expr(e));
      // `return (a, b)` is the same as `return a, b`.
      if (s->exprs.size() == 1 && s->exprs[0]->kind == ast::ExprKind::Tuple) {
        auto t = std::move(s->exprs[0]);
        s->exprs = std::move(t->elems);
      }
    } else if (auto* x = dynamic_cast<GSLParser::ForStmtContext*>(c)) {
      s->kind = ast::StmtKind::For;
      s->names.push_back(x->ID()->getText());
      s->nameLocs.push_back(loc(x->ID()));
      s->exprs.push_back(expr(x->expr(0)));
      s->exprs.push_back(expr(x->expr(1)));
      if (auto* p = x->pipelineAnnot()) {
        s->pipelined = true;
        s->pipelineLoc = loc(p->getStart());
        s->pipelineArgs = callArgs(p->arg(), depth);
      }
      s->body = block(x->block(), depth);
    } else if (auto* x = dynamic_cast<GSLParser::ExprStmtContext*>(c)) {
      s->kind = ast::StmtKind::Expr;
      s->exprs.push_back(expr(x->expr()));
    }
    return s;
  }

  ast::ExprPtr mk(ast::ExprKind k, SourceLoc l) {
    auto e = std::make_unique<ast::Expr>();
    e->kind = k;
    e->loc = l;
    return e;
  }

  ast::ExprPtr binary(ast::BinaryOp op, Token* opTok, GSLParser::ExprContext* a,
                      GSLParser::ExprContext* b, int depth) {
    auto e = mk(ast::ExprKind::Binary, loc(opTok));
    e->binaryOp = op;
    e->elems.push_back(expr(a, depth + 1));
    e->elems.push_back(expr(b, depth + 1));
    return e;
  }

  // The operator of token `t` (an `op=(...)` label of GSL.g4).
  static ast::BinaryOp binaryOp(Token* t) {
    auto op = ast::binaryOpNamed(t->getText());
    GSL_ASSERT(op, "binary operator '" + t->getText() + "' is not in the operator table");
    return *op;
  }

  // The operator token between the two operands of a binary rule.
  static Token* opToken(antlr4::ParserRuleContext* c) {
    auto* t = dynamic_cast<antlr4::tree::TerminalNode*>(c->children.at(1));
    return t ? t->getSymbol() : c->getStart();
  }

  ast::ExprPtr expr(GSLParser::ExprContext* c, int depth = 0) {
    if (depth > kMaxNesting) {
      // Brackets were limited before parsing, so this is a long operator
      // chain (a + b + c + ...), which nests one level per operator.
      nestingError(loc(c), "expression is nested too deeply (more than " + std::to_string(kMaxNesting) +
                               " operators deep; split it with let)");
      return mk(ast::ExprKind::Int, loc(c));
    }
    if (auto* x = dynamic_cast<GSLParser::PrimaryExprContext*>(c)) return primary(x->primary(), depth);
    if (auto* x = dynamic_cast<GSLParser::IndexExprContext*>(c)) {
      auto e = mk(ast::ExprKind::Index, loc(opToken(x)));
      e->elems.push_back(expr(x->expr(), depth + 1));
      for (auto* ic : x->index()) {
        ast::IndexItem it;
        it.loc = loc(ic);
        if (auto* p = dynamic_cast<GSLParser::PointIndexContext*>(ic)) {
          it.point = expr(p->expr(), depth + 1);
        } else {
          auto* sl = dynamic_cast<GSLParser::SliceIndexContext*>(ic);
          it.slice = true;
          if (sl->lo) it.lo = expr(sl->lo, depth + 1);
          if (sl->hi) it.hi = expr(sl->hi, depth + 1);
        }
        e->indices.push_back(std::move(it));
      }
      return e;
    }
    if (auto* x = dynamic_cast<GSLParser::AnnotExprContext*>(c)) {
      auto e = mk(ast::ExprKind::Annot, loc(x->annotation()));
      e->elems.push_back(expr(x->expr(), depth + 1));
      e->annot = annotation(x->annotation());
      return e;
    }
    if (auto* x = dynamic_cast<GSLParser::PowExprContext*>(c))
      return binary(ast::BinaryOp::Pow, opToken(x), x->expr(0), x->expr(1), depth);
    if (auto* x = dynamic_cast<GSLParser::MulExprContext*>(c))
      return binary(binaryOp(x->op), x->op, x->expr(0), x->expr(1), depth);
    if (auto* x = dynamic_cast<GSLParser::AddExprContext*>(c))
      return binary(binaryOp(x->op), x->op, x->expr(0), x->expr(1), depth);
    if (auto* x = dynamic_cast<GSLParser::CmpExprContext*>(c))
      return binary(binaryOp(x->op), x->op, x->expr(0), x->expr(1), depth);
    if (auto* x = dynamic_cast<GSLParser::AndExprContext*>(c))
      return binary(ast::BinaryOp::And, opToken(x), x->expr(0), x->expr(1), depth);
    if (auto* x = dynamic_cast<GSLParser::OrExprContext*>(c))
      return binary(ast::BinaryOp::Or, opToken(x), x->expr(0), x->expr(1), depth);
    if (auto* x = dynamic_cast<GSLParser::UnaryExprContext*>(c)) {
      auto e = mk(ast::ExprKind::Unary, loc(x->op));
      auto op = ast::unaryOpNamed(x->op->getText());
      GSL_ASSERT(op, "unary operator '" + x->op->getText() + "' is not in the operator table");
      e->unaryOp = *op;
      e->elems.push_back(expr(x->expr(), depth + 1));
      return e;
    }
    if (auto* x = dynamic_cast<GSLParser::NotExprContext*>(c)) {
      auto e = mk(ast::ExprKind::Unary, loc(c));
      e->unaryOp = ast::UnaryOp::Not;
      e->elems.push_back(expr(x->expr(), depth + 1));
      return e;
    }
    GSL_ASSERT(false, "unhandled expression rule");
  }

  ast::ExprPtr primary(GSLParser::PrimaryContext* c, int depth) {
    SourceLoc l = loc(c);
    if (auto* x = dynamic_cast<GSLParser::IntLitContext*>(c)) {
      auto e = mk(ast::ExprKind::Int, l);
      const std::string t = x->INT()->getText();
      errno = 0;
      e->ival = (int64_t)std::strtoll(t.c_str(), nullptr, 10);
      if (errno == ERANGE || t.size() > 18) {
        diags_.error(l, "integer literal " + t + " is too large");
        e->ival = 0;
      }
      return e;
    }
    if (auto* x = dynamic_cast<GSLParser::FloatLitContext*>(c)) {
      auto e = mk(ast::ExprKind::Float, l);
      e->fval = std::strtod(x->FLOAT()->getText().c_str(), nullptr);
      return e;
    }
    if (auto* x = dynamic_cast<GSLParser::StringLitContext*>(c)) {
      auto e = mk(ast::ExprKind::String, l);
      e->text = unquote(x->STRING()->getText());
      return e;
    }
    if (dynamic_cast<GSLParser::BoolLitContext*>(c)) {
      auto e = mk(ast::ExprKind::Bool, l);
      e->bval = c->getText() == "true";
      return e;
    }
    if (auto* x = dynamic_cast<GSLParser::DtypeLitContext*>(c)) {
      auto e = mk(ast::ExprKind::DType, l);
      e->dtype = *ir::parseDType(x->DTYPE()->getText());
      return e;
    }
    if (auto* x = dynamic_cast<GSLParser::LoadExprContext*>(c)) {
      auto e = mk(ast::ExprKind::Load, l);
      e->elems.push_back(expr(x->expr(), depth + 1));
      e->type = type(x->type());
      if (x->annotation()) e->annot = annotation(x->annotation());
      return e;
    }
    if (auto* x = dynamic_cast<GSLParser::CallExprContext*>(c)) {
      auto e = mk(ast::ExprKind::Call, l);
      e->text = x->ID()->getText();
      e->args = callArgs(x->arg(), depth);
      return e;
    }
    if (auto* x = dynamic_cast<GSLParser::MethodExprContext*>(c)) {
      auto e = mk(ast::ExprKind::Method, l);
      e->text = x->ID(0)->getText();
      e->member = x->ID(1)->getText();
      e->args = callArgs(x->arg(), depth);
      return e;
    }
    if (auto* x = dynamic_cast<GSLParser::MemberExprContext*>(c)) {
      auto e = mk(ast::ExprKind::Member, l);
      e->text = x->ID(0)->getText();
      e->member = x->ID(1)->getText();
      return e;
    }
    if (auto* x = dynamic_cast<GSLParser::NameExprContext*>(c)) {
      auto e = mk(ast::ExprKind::Name, l);
      e->text = x->ID()->getText();
      return e;
    }
    if (auto* x = dynamic_cast<GSLParser::ListExprContext*>(c)) {
      auto e = mk(ast::ExprKind::List, l);
      for (auto* el : x->expr()) e->elems.push_back(expr(el, depth + 1));
      return e;
    }
    if (auto* x = dynamic_cast<GSLParser::ParenExprContext*>(c)) return expr(x->expr(), depth + 1);
    if (auto* x = dynamic_cast<GSLParser::TupleExprContext*>(c)) {
      auto e = mk(ast::ExprKind::Tuple, l);
      for (auto* el : x->expr()) e->elems.push_back(expr(el, depth + 1));
      return e;
    }
    GSL_ASSERT(false, "unhandled primary rule");
  }

 private:
  int file_;
  Diagnostics& diags_;
};

// Rejects a nesting depth that would overflow ANTLR's recursive descent,
// before parsing: counts open brackets.
bool checkBracketDepth(const std::string& text, int file, Diagnostics& diags) {
  int depth = 0, line = 1, col = 1;
  bool inString = false, inComment = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\n') {
      ++line;
      col = 1;
      inComment = false;
      inString = false;
      continue;
    }
    if (!inComment) {
      if (inString) {
        if (c == '\\') ++i, ++col;
        else if (c == '"') inString = false;
      } else if (c == '"') {
        inString = true;
      } else if (c == '#') {
        inComment = true;
      } else if (c == '(' || c == '[' || c == '{') {
        if (++depth > kMaxNesting) {
          diags.error({file, line, col}, "program is nested too deeply (more than " +
                                             std::to_string(kMaxNesting) + " levels)");
          return false;
        }
      } else if (c == ')' || c == ']' || c == '}') {
        if (depth > 0) --depth;
      }
    }
    if (((unsigned char)c & 0xC0) != 0x80) ++col;  // columns count characters, as ANTLR's do
  }
  return true;
}

// Rejects, before parsing, nesting without brackets that ANTLR's recursive
// descent would follow one call per level (a stack overflow on hostile
// input, and quadratic prediction time for `else if`): chains of prefix
// operators (- + not), of right-associative ** and of `else if`. Bounded
// generously (kMaxChain): shorter chains reach the builder, whose limit
// (kMaxNesting) and messages apply.
bool checkChainDepth(const std::vector<Token*>& toks, int file, Diagnostics& diags) {
  constexpr int kMaxChain = 5 * kMaxNesting;
  struct Level {
    int ops = 0, elseIfs = 0;
  };
  std::vector<Level> levels(1);
  int total = 0;  // open brackets plus every level's chains
  auto endsOperand = [](Token* t) {
    const std::string& x = t->getText();
    return t->getType() == GSLLexer::ID || t->getType() == GSLLexer::INT || t->getType() == GSLLexer::FLOAT ||
           t->getType() == GSLLexer::STRING || t->getType() == GSLLexer::DTYPE || x == ")" || x == "]" ||
           x == "true" || x == "false";
  };
  Token* prev = nullptr;
  bool afterBlock = false;  // the previous token closed a block at this level
  for (size_t i = 0; i < toks.size(); ++i) {
    Token* t = toks[i];
    if (t->getType() == Token::EOF) break;
    const std::string& x = t->getText();
    Level& l = levels.back();
    if (afterBlock && x != "else") {
      total -= l.elseIfs;
      l.elseIfs = 0;
    }
    afterBlock = false;
    const char* tooDeep = nullptr;  // "program" or "expression": what a too long chain is
    if (x == "(" || x == "[" || x == "{") {
      levels.emplace_back();
      ++total;
    } else if (x == ")" || x == "]" || x == "}") {
      if (levels.size() > 1) {
        total -= 1 + levels.back().ops + levels.back().elseIfs;
        levels.pop_back();
      }
      afterBlock = x == "}";
    } else if (x == "else" && i + 1 < toks.size() && toks[i + 1]->getText() == "if") {
      ++l.elseIfs;
      ++total;
      tooDeep = "program";
    } else if (x == "**" || ((x == "-" || x == "+" || x == "not") && !(prev && endsOperand(prev)))) {
      ++l.ops;
      ++total;
      tooDeep = "expression";
    } else if (!endsOperand(t) && x != "." && x != "if") {
      total -= l.ops;  // any other operator or keyword ends the chain
      l.ops = 0;
    }
    if (tooDeep && total > kMaxChain) {
      SourceLoc at{file, (int)t->getLine(), (int)t->getCharPositionInLine() + 1};
      if (tooDeep[0] == 'p')
        diags.error(at, "program is nested too deeply (more than " + std::to_string(kMaxNesting) + " levels)");
      else
        diags.error(at, "expression is nested too deeply (more than " + std::to_string(kMaxNesting) +
                            " operators deep; split it with let)");
      return false;
    }
    prev = t;
  }
  return true;
}

}  // namespace

std::unique_ptr<ast::Program> parseProgram(const SourceManager& sm, int file, Diagnostics& diags) {
  const std::string& text = sm.text(file);
  if (!checkBracketDepth(text, file, diags)) return nullptr;
  antlr4::ANTLRInputStream input(text);
  GSLLexer lexer(&input);
  ErrorListener listener(file);
  lexer.removeErrorListeners();
  lexer.addErrorListener(&listener);
  antlr4::CommonTokenStream tokens(&lexer);
  tokens.fill();
  // Characters the lexer cannot place become ERRCHAR tokens: report them
  // here with a precise message instead of a parser cascade.
  for (Token* t : tokens.getTokens()) {
    if (t->getType() == GSLLexer::ERRCHAR) {
      SourceLoc l{file, (int)t->getLine(), (int)t->getCharPositionInLine() + 1};
      if (t->getText() == "\"") diags.error(l, "unterminated string");
      else diags.error(l, "unexpected character '" + t->getText() + "'");
      return nullptr;
    }
  }
  if (listener.failed) {
    diags.error(listener.loc, listener.message);
    return nullptr;
  }
  if (!checkChainDepth(tokens.getTokens(), file, diags)) return nullptr;
  listener.tokens = &tokens;
  GSLParser parser(&tokens);
  parser.removeErrorListeners();
  parser.addErrorListener(&listener);
  auto* tree = parser.program();
  if (listener.failed) {
    // An unbalanced bracket explains a syntax error at or after it better
    // than ANTLR's message about the token where parsing got stuck.
    BracketProblem b = findBracketProblem(tokens);
    auto at = [&](Token* t) { return SourceLoc{file, (int)t->getLine(), (int)t->getCharPositionInLine() + 1}; };
    auto before = [](SourceLoc x, SourceLoc y) { return x.line < y.line || (x.line == y.line && x.col < y.col); };
    if (b.open && !before(listener.loc, at(b.open))) {
      std::string o = b.open->getText();
      if (b.close) {
        diags.error(at(b.close), "expected '" + closerOf(o) + "' before '" + b.close->getText() + "'");
        diags.note(at(b.open), "to match this '" + o + "'");
      } else {
        diags.error(at(b.open), "'" + o + "' is not closed (expected '" + closerOf(o) + "' before the end of the file)");
      }
    } else {
      diags.error(listener.loc, listener.message);
    }
    return nullptr;
  }
  Builder b(file, diags);
  auto prog = b.program(tree);
  if (b.tooDeep) return nullptr;
  return prog;
}

}  // namespace gsl::frontend
