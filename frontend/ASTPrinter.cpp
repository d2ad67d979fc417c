#include <sstream>

#include "frontend/AST.h"

namespace gsl::ast {
namespace {

std::string annotStr(const ShardAnnot& a) {
  if (a.replicate) return "@replicate(" + a.mesh + ")";
  std::string r = "@shard(" + a.mesh + ", [";
  for (size_t i = 0; i < a.dims.size(); ++i) {
    if (i) r += ", ";
    const auto& d = a.dims[i];
    if (d.empty()) r += "_";
    else if (d.size() == 1) r += d[0];
    else {
      r += "(";
      for (size_t j = 0; j < d.size(); ++j) r += (j ? ", " : "") + d[j];
      r += ")";
    }
  }
  return r + "])";
}

std::string exprStr(const Expr& e);

std::string typeStr(const TypeExpr& t) {
  std::string r = ir::dtypeName(t.dtype);
  if (!t.dims.empty()) {
    r += "[";
    for (size_t i = 0; i < t.dims.size(); ++i) r += (i ? ", " : "") + exprStr(*t.dims[i]);
    r += "]";
  }
  return r;
}

std::string quote(const std::string& s) {
  std::string r = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    if (c == '\n') r += "\\n";
    else r += c;
  }
  return r + "\"";
}

// Fully parenthesised, so the dump shows how the parser grouped things.
std::string exprStr(const Expr& e) {
  switch (e.kind) {
    case ExprKind::Int: return std::to_string(e.ival);
    case ExprKind::Float: {
      std::ostringstream os;
      os.precision(17);
      os << e.fval;
      std::string s = os.str();
      if (s.find_first_of(".eE") == std::string::npos) s += ".0";
      return s;
    }
    case ExprKind::String: return quote(e.text);
    case ExprKind::Bool: return e.bval ? "true" : "false";
    case ExprKind::DType: return ir::dtypeName(e.dtype);
    case ExprKind::Name: return e.text;
    case ExprKind::Call: {
      std::string r = e.text + "(";
      for (size_t i = 0; i < e.args.size(); ++i) {
        if (i) r += ", ";
        if (!e.args[i].keyword.empty()) r += e.args[i].keyword + "=";
        r += exprStr(*e.args[i].value);
      }
      return r + ")";
    }
    case ExprKind::Method: {
      std::string r = e.text + "." + e.member + "(";
      for (size_t i = 0; i < e.args.size(); ++i) {
        if (i) r += ", ";
        if (!e.args[i].keyword.empty()) r += e.args[i].keyword + "=";
        r += exprStr(*e.args[i].value);
      }
      return r + ")";
    }
    case ExprKind::List:
    case ExprKind::Tuple: {
      std::string r = e.kind == ExprKind::List ? "[" : "(";
      for (size_t i = 0; i < e.elems.size(); ++i) r += (i ? ", " : "") + exprStr(*e.elems[i]);
      return r + (e.kind == ExprKind::List ? "]" : ")");
    }
    case ExprKind::Unary:
      return "(" + std::string(spelling(e.unaryOp)) + (e.unaryOp == UnaryOp::Not ? " " : "") + exprStr(*e.elems[0]) + ")";
    case ExprKind::Binary:
      return "(" + exprStr(*e.elems[0]) + " " + spelling(e.binaryOp) + " " + exprStr(*e.elems[1]) + ")";
    case ExprKind::Annot: return "(" + exprStr(*e.elems[0]) + " " + annotStr(*e.annot) + ")";
    case ExprKind::Member: return e.text + "." + e.member;
    case ExprKind::Index: {
      std::string r = exprStr(*e.elems[0]) + "[";
      for (size_t i = 0; i < e.indices.size(); ++i) {
        const IndexItem& it = e.indices[i];
        if (i) r += ", ";
        if (!it.slice) r += exprStr(*it.point);
        else r += (it.lo ? exprStr(*it.lo) : "") + ":" + (it.hi ? exprStr(*it.hi) : "");
      }
      return r + "]";
    }
    case ExprKind::Load:
      return "load(" + exprStr(*e.elems[0]) + ") : " + typeStr(*e.type) + (e.annot ? " " + annotStr(*e.annot) : "");
  }
  return "?";
}

void block(std::ostringstream& os, const Block& b, int ind);

void stmt(std::ostringstream& os, const Stmt& s, int ind) {
  std::string pad(ind * 2, ' ');
  os << pad << s.loc.line << ":" << s.loc.col << " ";
  switch (s.kind) {
    case StmtKind::Let:
      os << "let " << s.names[0] << (s.type ? ": " + typeStr(*s.type) : "") << " = " << exprStr(*s.exprs[0]) << "\n";
      break;
    case StmtKind::LetTuple: {
      os << "let (";
      for (size_t i = 0; i < s.names.size(); ++i) os << (i ? ", " : "") << s.names[i];
      os << ") = " << exprStr(*s.exprs[0]) << "\n";
      break;
    }
    case StmtKind::Assign: os << "assign " << s.names[0] << " = " << exprStr(*s.exprs[0]) << "\n"; break;
    case StmtKind::Return: {
      os << "return";
      for (size_t i = 0; i < s.exprs.size(); ++i) os << (i ? ", " : " ") << exprStr(*s.exprs[i]);
      os << "\n";
      break;
    }
    case StmtKind::For:
      os << "for " << s.names[0] << " in " << exprStr(*s.exprs[0]) << ".." << exprStr(*s.exprs[1]);
      if (s.pipelined) {
        os << " @pipeline(";
        for (size_t i = 0; i < s.pipelineArgs.size(); ++i)
          os << (i ? ", " : "") << s.pipelineArgs[i].keyword << (s.pipelineArgs[i].keyword.empty() ? "" : " = ")
             << exprStr(*s.pipelineArgs[i].value);
        os << ")";
      }
      os << "\n";
      block(os, s.body, ind + 1);
      break;
    case StmtKind::If:
      os << "if " << exprStr(*s.exprs[0]) << "\n";
      block(os, s.body, ind + 1);
      if (s.hasElse) {
        os << pad << "else\n";
        block(os, s.elseBody, ind + 1);
      }
      break;
    case StmtKind::Expr: os << "expr " << exprStr(*s.exprs[0]) << "\n"; break;
  }
}

void block(std::ostringstream& os, const Block& b, int ind) {
  for (const auto& s : b) stmt(os, *s, ind);
}

}  // namespace

const char* declKindName(DeclKind k) {
  switch (k) {
    case DeclKind::Import: return "import";
    case DeclKind::Const: return "const";
    case DeclKind::Mesh: return "mesh";
    case DeclKind::Param: return "param";
    case DeclKind::Fn: return "fn";
    case DeclKind::Optimizer: return "optimizer";
    case DeclKind::Dataset: return "dataset";
    case DeclKind::ParamGroup: return "param group";
  }
  return "?";
}

std::string printAST(const Program& p) {
  std::ostringstream os;
  for (const auto& dp : p.decls) {
    const Decl& d = *dp;
    os << d.loc.line << ":" << d.loc.col << " ";
    switch (d.kind) {
      case DeclKind::Import:
        os << "import " << quote(d.name);
        for (size_t i = 0; i < d.with.size(); ++i)
          os << (i ? ", " : " with (") << d.with[i].keyword << " = " << exprStr(*d.with[i].value);
        os << (d.with.empty() ? "\n" : ")\n");
        break;
      case DeclKind::Const: os << "const " << d.name << " = " << exprStr(*d.value) << "\n"; break;
      case DeclKind::Mesh: {
        os << "mesh " << d.name << " = [";
        for (size_t i = 0; i < d.axes.size(); ++i) os << (i ? ", " : "") << d.axes[i].name << ": " << exprStr(*d.axes[i].size);
        os << "]\n";
        break;
      }
      case DeclKind::Optimizer: os << "optimizer " << d.name << " = " << exprStr(*d.value) << "\n"; break;
      case DeclKind::Dataset: os << "dataset " << d.name << " = " << exprStr(*d.value) << "\n"; break;
      case DeclKind::ParamGroup:
        os << "param " << d.name << "[" << exprStr(*d.value) << "]" << (d.annot ? " " + annotStr(*d.annot) : "") << "\n";
        for (const auto& m : d.members)
          os << "  " << m->loc.line << ":" << m->loc.col << " " << m->name << ": " << typeStr(*m->type)
             << (m->annot ? " " + annotStr(*m->annot) : "") << " = " << exprStr(*m->value) << "\n";
        break;
      case DeclKind::Param:
        os << "param " << d.name << ": " << typeStr(*d.type) << (d.annot ? " " + annotStr(*d.annot) : "") << " = "
           << exprStr(*d.value) << "\n";
        break;
      case DeclKind::Fn: {
        os << "fn " << d.name;
        if (!d.shapeParams.empty()) {
          os << "[";
          for (size_t i = 0; i < d.shapeParams.size(); ++i) os << (i ? ", " : "") << d.shapeParams[i].first;
          os << "]";
        }
        os << "(";
        for (size_t i = 0; i < d.args.size(); ++i)
          os << (i ? ", " : "") << d.args[i].name << ": " << typeStr(*d.args[i].type)
             << (d.args[i].annot ? " " + annotStr(*d.args[i].annot) : "");
        os << ")";
        if (!d.results.empty()) {
          os << " -> ";
          if (d.tupleResult) os << "(";
          for (size_t i = 0; i < d.results.size(); ++i)
            os << (i ? ", " : "") << typeStr(*d.results[i].type)
               << (d.results[i].annot ? " " + annotStr(*d.results[i].annot) : "");
          if (d.tupleResult) os << ")";
        }
        os << "\n";
        block(os, d.body, 1);
        break;
      }
    }
  }
  return os.str();
}

}  // namespace gsl::ast
