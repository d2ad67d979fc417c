// Hand-written lexer and recursive-descent parser for the IR text form of
// ir/Printer.cpp. Every failure is returned as "LINE:COL: message"; nothing
// is thrown and all input is bounds-checked (the parser is fuzz-safe).
#include "ir/IRParser.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <set>
#include <unordered_map>

#include "ir/Loop.h"

namespace gsl::ir {

namespace detail {  // ir/Verifier.cpp
std::string checkType(const TensorType& t);
std::string checkMesh(const Mesh& m);
std::string checkSharding(const Module& m, const Sharding& s, int rank);
std::string checkOpSignature(const OpInfo& info, size_t numOperands, AttrMap& attrs, bool fromText);
}  // namespace detail

namespace {

// ---------------------------------------------------------------- lexer

enum class Tok {
  End,
  Error,    // text: the message
  Ident,    // f32, add, true, _, ...
  Number,   // 12, -3, 1.5, 1e-05, inf, -nan
  String,   // text: the unescaped contents
  ValueId,  // %12 (text without '%')
  Global,   // @name (text without '@')
  Arrow,    // ->
  Punct,    // one of = , : ( ) [ ] { }
};

struct Token {
  Tok kind = Tok::End;
  std::string text;
  int line = 1, col = 1;
};

bool identStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool identChar(char c) { return identStart(c) || (c >= '0' && c <= '9') || c == '.'; }
bool digit(char c) { return c >= '0' && c <= '9'; }

std::string showChar(char c) {
  unsigned char u = (unsigned char)c;
  if (u >= 0x20 && u < 0x7f) return std::string("'") + c + "'";
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%02x", u);
  return std::string("byte ") + buf;
}

// Lexes the whole text; stops after the first error token.
std::vector<Token> lex(const std::string& s) {
  std::vector<Token> out;
  size_t i = 0;
  int line = 1, col = 1;
  auto adv = [&](size_t n = 1) {
    for (size_t k = 0; k < n && i < s.size(); ++k, ++i) {
      if (s[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
  };
  auto at = [&](size_t k) -> char { return i + k < s.size() ? s[i + k] : '\0'; };
  for (;;) {
    // whitespace and '#' comments
    while (i < s.size()) {
      char c = s[i];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') adv();
      else if (c == '#') {
        while (i < s.size() && s[i] != '\n') adv();
      } else break;
    }
    Token t;
    t.line = line;
    t.col = col;
    if (i >= s.size()) {
      t.kind = Tok::End;
      out.push_back(t);
      return out;
    }
    char c = s[i];
    size_t start = i;
    if (identStart(c)) {
      while (i < s.size() && identChar(s[i])) adv();
      t.kind = (s.compare(start, i - start, "inf") == 0 || s.compare(start, i - start, "nan") == 0)
                   ? Tok::Number
                   : Tok::Ident;
      t.text = s.substr(start, i - start);
    } else if (digit(c) || (c == '-' && (digit(at(1)) || (at(1) == 'i' || at(1) == 'n')))) {
      if (c == '-') adv();
      if (identStart(at(0))) {  // -inf, -nan
        while (i < s.size() && identChar(s[i])) adv();
        t.text = s.substr(start, i - start);
        if (t.text != "-inf" && t.text != "-nan") {
          t.kind = Tok::Error;
          t.text = "invalid number '" + t.text + "'";
          out.push_back(t);
          return out;
        }
      } else {
        while (digit(at(0))) adv();
        if (at(0) == '.') {
          adv();
          while (digit(at(0))) adv();
        }
        if ((at(0) == 'e' || at(0) == 'E') &&
            (digit(at(1)) || ((at(1) == '+' || at(1) == '-') && digit(at(2))))) {
          adv(2);
          while (digit(at(0))) adv();
        }
        if (identChar(at(0))) {
          while (i < s.size() && identChar(s[i])) adv();
          t.kind = Tok::Error;
          t.text = "invalid number '" + s.substr(start, i - start) + "'";
          out.push_back(t);
          return out;
        }
        t.text = s.substr(start, i - start);
      }
      t.kind = Tok::Number;
    } else if (c == '%' || c == '@') {
      adv();
      while (i < s.size() && identChar(s[i])) adv();
      if (i == start + 1) {
        t.kind = Tok::Error;
        t.text = std::string("expected a name after '") + c + "'";
        out.push_back(t);
        return out;
      }
      t.kind = c == '%' ? Tok::ValueId : Tok::Global;
      t.text = s.substr(start + 1, i - start - 1);
    } else if (c == '"') {
      adv();
      std::string v;
      for (;;) {
        if (i >= s.size()) {
          t.kind = Tok::Error;
          t.text = "unterminated string";
          out.push_back(t);
          return out;
        }
        char d = s[i];
        if (d == '"') {
          adv();
          break;
        }
        if (d == '\\') {
          char e = at(1);
          if (e != '"' && e != '\\') {
            Token bad;
            bad.kind = Tok::Error;
            bad.line = line;
            bad.col = col;
            bad.text = i + 1 < s.size() ? "invalid escape '\\" + std::string(1, e) +
                                              "' in string (only \\\" and \\\\ are allowed)"
                                        : "unterminated string";
            out.push_back(bad);
            return out;
          }
          v += e;
          adv(2);
          continue;
        }
        v += d;
        adv();
      }
      t.kind = Tok::String;
      t.text = std::move(v);
    } else if (c == '-' && at(1) == '>') {
      adv(2);
      t.kind = Tok::Arrow;
      t.text = "->";
    } else if (c == '=' || c == ',' || c == ':' || c == '(' || c == ')' || c == '[' || c == ']' ||
               c == '{' || c == '}') {
      adv();
      t.kind = Tok::Punct;
      t.text = std::string(1, c);
    } else {
      t.kind = Tok::Error;
      t.text = "unexpected character " + showChar(c);
      out.push_back(t);
      return out;
    }
    out.push_back(std::move(t));
  }
}

// ---------------------------------------------------------------- parser

class Parser {
 public:
  explicit Parser(const std::string& text) : toks_(lex(text)) {}

  IRParseResult run() {
    auto m = std::make_unique<Module>();
    mod_ = m.get();
    IRParseResult r;
    if (parseModule()) r.module = std::move(m);
    else r.error = err_;
    return r;
  }

 private:
  std::vector<Token> toks_;
  size_t p_ = 0;
  std::string err_;
  Module* mod_ = nullptr;
  bool haveNp_ = false;
  int depth_ = 0;  // loop bodies being parsed

  const Token& peek(size_t k = 0) const {
    size_t i = p_ + k;
    return i < toks_.size() ? toks_[i] : toks_.back();
  }
  const Token& next() {
    const Token& t = peek();
    if (p_ < toks_.size() - 1) ++p_;
    return t;
  }
  bool isPunct(const char* c, size_t k = 0) const {
    return peek(k).kind == Tok::Punct && peek(k).text == c;
  }
  bool isIdent(const char* w) const { return peek().kind == Tok::Ident && peek().text == w; }

  bool fail(const Token& t, const std::string& msg) {
    if (err_.empty()) {
      // A lexical error is reported as itself wherever the parser stumbles on it.
      const std::string& m = t.kind == Tok::Error ? t.text : msg;
      err_ = std::to_string(t.line) + ":" + std::to_string(t.col) + ": " + m;
    }
    return false;
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Tok::End: return "end of input";
      case Tok::Error: return t.text;
      case Tok::Ident: return "'" + t.text + "'";
      case Tok::Number: return "number " + t.text;
      case Tok::String: return "a string";
      case Tok::ValueId: return "%" + t.text;
      case Tok::Global: return "@" + t.text;
      case Tok::Arrow: return "'->'";
      case Tok::Punct: return "'" + t.text + "'";
    }
    return "?";
  }
  bool expected(const std::string& what) { return fail(peek(), "expected " + what + ", got " + describe(peek())); }
  bool expectPunct(const char* c) {
    if (!isPunct(c)) return expected(std::string("'") + c + "'");
    next();
    return true;
  }
  bool expectIdent(std::string& out, const char* what) {
    // An axis may be called inf or nan, which lex as numbers.
    bool nameLike = peek().kind == Tok::Ident ||
                    (peek().kind == Tok::Number && (peek().text == "inf" || peek().text == "nan"));
    if (!nameLike) return expected(what);
    out = next().text;
    return true;
  }
  bool expectGlobal(std::string& out, const char* what) {
    if (peek().kind != Tok::Global) return expected(what);
    out = next().text;
    return true;
  }

  // Integer literal (no '.', exponent, inf or nan).
  bool parseInt(int64_t& out, const char* what) {
    const Token& t = peek();
    if (t.kind != Tok::Number) return expected(what);
    if (t.text.find_first_of(".eEin") != std::string::npos)
      return fail(t, std::string("expected ") + what + ", got " + t.text);
    auto r = std::from_chars(t.text.data(), t.text.data() + t.text.size(), out);
    if (r.ec != std::errc() || r.ptr != t.text.data() + t.text.size())
      return fail(t, "integer " + t.text + " is out of range");
    next();
    return true;
  }
  // Any number as a double.
  bool parseNumber(double& out, const char* what) {
    const Token& t = peek();
    if (t.kind != Tok::Number) return expected(what);
    if (!toDouble(t, out)) return false;
    next();
    return true;
  }
  bool toDouble(const Token& t, double& out) {
    const std::string& s = t.text;
    bool neg = !s.empty() && s[0] == '-';
    std::string_view body(s.data() + (neg ? 1 : 0), s.size() - (neg ? 1 : 0));
    if (body == "inf") {
      out = neg ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
      return true;
    }
    if (body == "nan") {
      out = std::copysign(std::numeric_limits<double>::quiet_NaN(), neg ? -1.0 : 1.0);
      return true;
    }
    auto r = std::from_chars(s.data(), s.data() + s.size(), out);
    if (r.ec != std::errc() || r.ptr != s.data() + s.size())
      return fail(t, "number " + s + " is out of range");
    return true;
  }

  // ------------------------------------------------------------ types

  bool parseType(TensorType& t) {
    const Token& tt = peek();
    if (tt.kind != Tok::Ident) return expected("a type (f32, i32, bool or bf16)");
    auto d = parseDType(tt.text);
    if (!d) return fail(tt, "unknown element type '" + tt.text + "' (expected f32, i32, bool or bf16)");
    next();
    t = TensorType{*d, {}};
    if (isPunct("[")) {
      next();
      if (!isPunct("]")) {
        for (;;) {
          int64_t dim;
          const Token& dt = peek();
          if (!parseInt(dim, "a dimension")) return false;
          if (dim < 0) return fail(dt, "dimension " + dt.text + " is negative");
          t.shape.push_back(dim);
          if (isPunct(",")) {
            next();
            continue;
          }
          break;
        }
      }
      if (!expectPunct("]")) return false;
    }
    if (auto e = detail::checkType(t); !e.empty()) return fail(tt, e);
    return true;
  }

  // Optional `@shard(m, [..]) [partial(a, ..)]` or `@replicate(m)` after a
  // type of rank `rank`; checked against the declared meshes.
  bool parseOptSharding(std::optional<Sharding>& out, int rank) {
    out.reset();
    if (peek().kind != Tok::Global) return true;
    const Token& at = peek();
    if (at.text != "shard" && at.text != "replicate")
      return fail(at, "expected '@shard(...)' or '@replicate(...)', got @" + at.text);
    bool replicate = at.text == "replicate";
    next();
    Sharding s;
    std::string meshName;
    if (!expectPunct("(") || !expectIdent(meshName, "a mesh name")) return false;
    s.mesh = Symbol(meshName);
    if (replicate) {
      s.dims.assign(rank, {});
    } else {
      if (!expectPunct(",") || !expectPunct("[")) return false;
      if (!isPunct("]")) {
        for (;;) {
          Axes entry;
          if (isPunct("(")) {
            next();
            for (;;) {
              std::string ax;
              if (!expectIdent(ax, "a mesh axis name")) return false;
              entry.emplace_back(ax);
              if (isPunct(",")) {
                next();
                continue;
              }
              break;
            }
            if (!expectPunct(")")) return false;
          } else {
            std::string ax;
            if (!expectIdent(ax, "'_', a mesh axis name or '(axes)'")) return false;
            if (ax != "_") entry.emplace_back(ax);
          }
          s.dims.push_back(std::move(entry));
          if (isPunct(",")) {
            next();
            continue;
          }
          break;
        }
      }
      if (!expectPunct("]")) return false;
    }
    if (!expectPunct(")")) return false;
    if (isIdent("partial")) {
      next();
      if (!expectPunct("(")) return false;
      for (;;) {
        std::string ax;
        if (!expectIdent(ax, "a mesh axis name")) return false;
        s.partial.emplace_back(ax);
        if (isPunct(",")) {
          next();
          continue;
        }
        break;
      }
      if (!expectPunct(")")) return false;
    }
    if (auto e = detail::checkSharding(*mod_, s, rank); !e.empty()) return fail(at, e);
    out = std::move(s);
    return true;
  }

  // ------------------------------------------------------------ top level

  bool parseModule() {
    while (peek().kind != Tok::End) {
      const Token& t = peek();
      if (t.kind == Tok::Ident && t.text == "np") {
        if (!parseNp()) return false;
      } else if (t.kind == Tok::Ident && t.text == "mesh") {
        if (!parseMesh()) return false;
      } else if (t.kind == Tok::Ident && t.text == "param") {
        if (!parseParam()) return false;
      } else if (t.kind == Tok::Ident && t.text == "func") {
        if (!parseFunc()) return false;
      } else {
        return expected("'np', 'mesh', 'param' or 'func'");
      }
    }
    return true;
  }

  bool parseNp() {
    const Token& kw = next();
    if (haveNp_) return fail(kw, "np is given twice");
    haveNp_ = true;
    if (!expectPunct("=")) return false;
    const Token& nt = peek();
    int64_t np;
    if (!parseInt(np, "the number of ranks")) return false;
    if (np < 1) return fail(nt, "np must be >= 1, got " + nt.text);
    mod_->np = np;
    return true;
  }

  bool parseMesh() {
    next();
    const Token& nameTok = peek();
    Mesh mesh;
    if (!expectGlobal(mesh.name, "a mesh name '@NAME'")) return false;
    if (mod_->findMesh(mesh.name)) return fail(nameTok, "mesh @" + mesh.name + " is declared twice");
    if (!expectPunct("=") || !expectPunct("[")) return false;
    if (!isPunct("]")) {
      for (;;) {
        MeshAxis ax;
        if (!expectIdent(ax.name, "a mesh axis name") || !expectPunct(":")) return false;
        if (!parseInt(ax.size, "an axis size")) return false;
        mesh.axes.push_back(std::move(ax));
        if (isPunct(",")) {
          next();
          continue;
        }
        break;
      }
    }
    if (!expectPunct("]")) return false;
    if (auto e = detail::checkMesh(mesh); !e.empty()) return fail(nameTok, e);
    mod_->meshes.push_back(std::move(mesh));
    return true;
  }

  bool parseParam() {
    next();
    const Token& nameTok = peek();
    Param prm;
    prm.loc.line = nameTok.line;
    prm.loc.col = nameTok.col;
    if (!expectGlobal(prm.name, "a param name '@NAME'")) return false;
    if (mod_->findParam(prm.name)) return fail(nameTok, "param @" + prm.name + " is declared twice");
    if (!expectPunct(":") || !parseType(prm.type)) return false;
    if (!parseOptSharding(prm.sharding, prm.type.rank())) return false;
    if (!expectPunct("=")) return false;
    const Token& it = peek();
    if (it.kind != Tok::Ident) return expected("an initialiser (zeros, ones, normal(std), uniform(lo, hi), glorot)");
    next();
    if (it.text == "zeros") {
      prm.init.kind = ParamInit::Zeros;
    } else if (it.text == "ones") {
      prm.init.kind = ParamInit::Ones;
    } else if (it.text == "glorot") {
      prm.init.kind = ParamInit::Glorot;
      if (isPunct("(")) {  // glorot(stacked = N): a param group's member
        next();
        std::string key;
        int64_t n = 0;
        const Token& nt = peek();
        if (!expectIdent(key, "'stacked'")) return false;
        if (key != "stacked") return fail(nt, "expected 'stacked', got '" + key + "'");
        if (!expectPunct("=") || !parseInt(n, "the number of stacked dims") || !expectPunct(")")) return false;
        if (n < 0 || n > prm.type.rank()) return fail(nt, "glorot's stacked dims must be 0.." + std::to_string(prm.type.rank()));
        prm.init.stacked = (int)n;
      }
    } else if (it.text == "normal") {
      prm.init.kind = ParamInit::Normal;
      if (!expectPunct("(") || !parseNumber(prm.init.a, "the standard deviation") || !expectPunct(")"))
        return false;
    } else if (it.text == "uniform") {
      prm.init.kind = ParamInit::Uniform;
      if (!expectPunct("(") || !parseNumber(prm.init.a, "the lower bound") || !expectPunct(",") ||
          !parseNumber(prm.init.b, "the upper bound") || !expectPunct(")"))
        return false;
    } else {
      return fail(it, "unknown initialiser '" + it.text +
                          "' (expected zeros, ones, normal(std), uniform(lo, hi) or glorot)");
    }
    mod_->params.push_back(std::move(prm));
    return true;
  }

  // ------------------------------------------------------------ functions

  // The values visible where an op is parsed: a function's, or a loop
  // body's own (a body reads only its arguments). `ids` holds every id of
  // the enclosing function, bodies included: an id is defined once.
  struct Scope {
    std::set<std::string>* ids;
    std::unordered_map<std::string, Value*> env;
    bool body;
  };

  bool define(Scope& scope, const Token& idTok, Value* v) {
    if (!scope.ids->insert(idTok.text).second) return fail(idTok, "%" + idTok.text + " is defined twice");
    scope.env[idTok.text] = v;
    return true;
  }

  // `(%ID: TYPE [SHARDING], ...)`: the arguments of a function or a body.
  bool parseArgs(Function& f, Scope& scope) {
    if (!expectPunct("(")) return false;
    if (!isPunct(")")) {
      for (;;) {
        const Token& idTok = peek();
        if (idTok.kind != Tok::ValueId) return expected("an argument '%ID'");
        next();
        TensorType t;
        if (!expectPunct(":") || !parseType(t)) return false;
        std::optional<Sharding> sh;
        if (!parseOptSharding(sh, t.rank())) return false;
        Value* v = f.addArg(t);
        v->sharding = std::move(sh);
        if (!define(scope, idTok, v)) return false;
        if (isPunct(",")) {
          next();
          continue;
        }
        break;
      }
    }
    return expectPunct(")");
  }

  // A value used as an operand (or returned) in `scope`.
  bool lookup(const Scope& scope, const Token& vt, Value*& out) {
    auto it = scope.env.find(vt.text);
    if (it != scope.env.end()) {
      out = it->second;
      return true;
    }
    if (scope.body && scope.ids->count(vt.text))
      return fail(vt, "%" + vt.text + " is defined outside this loop body (a body reads only its arguments)");
    return fail(vt, "%" + vt.text + " is not defined");
  }

  bool parseFunc() {
    next();
    const Token& nameTok = peek();
    auto fn = std::make_unique<Function>();
    Function& f = *fn;
    f.loc.line = nameTok.line;
    f.loc.col = nameTok.col;
    if (!expectGlobal(f.name, "a function name '@NAME'")) return false;
    if (mod_->findFunction(f.name)) return fail(nameTok, "function @" + f.name + " is declared twice");
    std::set<std::string> ids;
    Scope scope{&ids, {}, false};
    std::unordered_map<std::string, Value*>& env = scope.env;

    if (!parseArgs(f, scope)) return false;
    if (peek().kind != Tok::Arrow) return expected("'->'");
    next();

    std::vector<TensorType> resultTypes;
    auto parseResult = [&]() -> bool {
      TensorType t;
      if (!parseType(t)) return false;
      std::optional<Sharding> sh;
      if (!parseOptSharding(sh, t.rank())) return false;
      resultTypes.push_back(t);
      f.resultShardings.push_back(std::move(sh));
      return true;
    };
    if (isPunct("(")) {
      next();
      if (!isPunct(")")) {
        for (;;) {
          if (!parseResult()) return false;
          if (isPunct(",")) {
            next();
            continue;
          }
          break;
        }
      }
      if (!expectPunct(")")) return false;
    } else if (!parseResult()) {
      return false;
    }
    if (!expectPunct("{")) return false;

    for (;;) {
      if (isIdent("return")) break;
      if (peek().kind != Tok::ValueId) return expected("an op '%ID = ...' or 'return'");
      if (!parseOp(f, scope)) return false;
    }

    const Token& retTok = next();
    std::vector<std::pair<const Token*, Value*>> rets;
    if (peek().kind == Tok::ValueId) {
      for (;;) {
        const Token& vt = peek();
        if (vt.kind != Tok::ValueId) return expected("a value '%ID'");
        auto it = env.find(vt.text);
        if (it == env.end()) return fail(vt, "%" + vt.text + " is not defined");
        next();
        rets.push_back({&vt, it->second});
        if (isPunct(",")) {
          next();
          continue;
        }
        break;
      }
    }
    if (rets.size() != resultTypes.size())
      return fail(retTok, "return gives " + std::to_string(rets.size()) + " value" +
                              (rets.size() == 1 ? "" : "s") + " but @" + f.name + " declares " +
                              std::to_string(resultTypes.size()) + " result" +
                              (resultTypes.size() == 1 ? "" : "s"));
    for (size_t i = 0; i < rets.size(); ++i) {
      if (rets[i].second->type != resultTypes[i])
        return fail(*rets[i].first, "%" + rets[i].first->text + " has type " +
                                        rets[i].second->type.str() + " but result " +
                                        std::to_string(i) + " of @" + f.name + " is declared " +
                                        resultTypes[i].str());
      f.results.push_back(rets[i].second);
    }
    if (!expectPunct("}")) return false;
    f.renumber();  // ids in text order, bodies included (as printed)
    mod_->functions.push_back(std::move(fn));
    return true;
  }

  bool parseAttrValue(Attr& out) {
    const Token& t = peek();
    switch (t.kind) {
      case Tok::Number: {
        if (t.text.find_first_of(".eEin") != std::string::npos) {
          double d;
          if (!parseNumber(d, "a number")) return false;
          out = d;
        } else {
          int64_t v;
          if (!parseInt(v, "an integer")) return false;
          out = v;
        }
        return true;
      }
      case Tok::String:
        out = t.text;
        next();
        return true;
      case Tok::Ident:
        if (t.text == "true" || t.text == "false") {
          out = t.text == "true";
        } else if (auto d = parseDType(t.text)) {
          out = *d;
        } else {
          return fail(t, "invalid attribute value '" + t.text + "'");
        }
        next();
        return true;
      case Tok::Punct:
        if (t.text == "[") {
          next();
          std::vector<int64_t> v;
          if (!isPunct("]")) {
            for (;;) {
              int64_t x;
              if (!parseInt(x, "an integer")) return false;
              v.push_back(x);
              if (isPunct(",")) {
                next();
                continue;
              }
              break;
            }
          }
          if (!expectPunct("]")) return false;
          out = std::move(v);
          return true;
        }
        break;
      default: break;
    }
    return expected("an attribute value");
  }

  bool parseOp(Function& f, Scope& scope) {
    // `%a` or, for a loop, `%a, %b, ...`
    std::vector<const Token*> ids;
    for (;;) {
      const Token& idTok = peek();
      if (idTok.kind != Tok::ValueId) return expected("a result '%ID'");
      if (scope.ids->count(idTok.text)) return fail(idTok, "%" + idTok.text + " is defined twice");
      next();
      ids.push_back(&idTok);
      if (!isPunct(",")) break;
      next();
    }
    const Token& idTok = *ids[0];
    if (!expectPunct("=")) return false;
    const Token& mnTok = peek();
    if (mnTok.kind != Tok::Ident) return expected("an op name");
    const OpInfo* info = lookupMnemonic(mnTok.text);
    if (!info) return fail(mnTok, "unknown op '" + mnTok.text + "'");
    next();
    const bool isLoop = info->kind == OpKind::Loop;
    if (ids.size() > 1 && !isLoop)
      return fail(*ids[1], std::string(info->mnemonic) + " has one result, got " + std::to_string(ids.size()));
    if (scope.body && info->kind == OpKind::Param)
      return fail(mnTok, "a loop body cannot read a param (pass it to the loop as an operand)");

    std::vector<Value*> operands;
    if (peek().kind == Tok::ValueId) {
      for (;;) {
        const Token& vt = peek();
        if (vt.kind != Tok::ValueId) return expected("an operand '%ID'");
        Value* v;
        if (!lookup(scope, vt, v)) return false;
        operands.push_back(v);
        next();
        if (isPunct(",")) {
          next();
          continue;
        }
        break;
      }
    }

    AttrMap attrs;
    if (isPunct("{")) {
      next();
      if (!isPunct("}")) {
        for (;;) {
          const Token& kt = peek();
          std::string key;
          if (!expectIdent(key, "an attribute name")) return false;
          if (attrs.has(key)) return fail(kt, "attribute '" + key + "' is given twice");
          if (!expectPunct("=")) return false;
          Attr v;
          if (!parseAttrValue(v)) return false;
          attrs.set(key, std::move(v));
          if (isPunct(",")) {
            next();
            continue;
          }
          break;
        }
      }
      if (!expectPunct("}")) return false;
    }

    if (!expectPunct(":")) return false;
    std::vector<TensorType> printed;
    std::vector<std::optional<Sharding>> shardings;
    for (;;) {
      TensorType t;
      if (!parseType(t)) return false;
      std::optional<Sharding> sh;
      if (!parseOptSharding(sh, t.rank())) return false;
      printed.push_back(t);
      shardings.push_back(std::move(sh));
      if (!isLoop || !isPunct(",")) break;
      next();
    }
    if (printed.size() != ids.size())
      return fail(idTok, "op defines " + std::to_string(ids.size()) + " values but " +
                             std::to_string(printed.size()) + " types are given");

    if (auto e = detail::checkOpSignature(*info, operands.size(), attrs, /*fromText=*/true); !e.empty())
      return fail(mnTok, e);
    std::unique_ptr<Function> body;
    if (isLoop) {
      body = std::make_unique<Function>();
      body->name = f.name;
      if (!parseBody(*body, scope)) return false;
      std::vector<TensorType> in, inferred;
      for (Value* v : operands) in.push_back(v->type);
      if (auto e = inferLoopTypes(in, attrs, *body, inferred); !e.empty()) return fail(mnTok, e);
      if (inferred.size() != printed.size())
        return fail(idTok, "loop has " + std::to_string(inferred.size()) + " results but " +
                               std::to_string(printed.size()) + " are given");
      for (size_t i = 0; i < printed.size(); ++i)
        if (inferred[i] != printed[i])
          return fail(*ids[i], "type mismatch for %" + ids[i]->text + ": printed " + printed[i].str() +
                                   " but inferred " + inferred[i].str());
    } else if (info->infer) {
      std::vector<TensorType> in;
      for (Value* v : operands) in.push_back(v->type);
      TensorType inferred;
      if (auto e = inferType(info->kind, in, attrs, inferred); !e.empty()) return fail(mnTok, e);
      if (inferred != printed[0])
        return fail(idTok, "type mismatch for %" + idTok.text + ": printed " + printed[0].str() +
                               " but inferred " + inferred.str());
    } else if (info->kind == OpKind::Param) {
      const std::string& name = attrs.getString("name");
      const Param* prm = mod_->findParam(name);
      if (!prm) return fail(mnTok, "param op names an undeclared param @" + name);
      if (prm->type != printed[0])
        return fail(idTok, "type mismatch for %" + idTok.text + ": printed " + printed[0].str() +
                               " but param @" + name + " is " + prm->type.str());
    }

    SourceLoc loc;
    loc.line = idTok.line;
    loc.col = idTok.col;
    Op* op = f.appendMulti(info->kind, std::move(operands), std::move(attrs), printed, std::move(body), loc);
    for (size_t i = 0; i < ids.size(); ++i) {
      op->results[i]->sharding = std::move(shardings[i]);
      if (!define(scope, *ids[i], op->results[i])) return false;
    }
    // IR text keeps an argument's wanted sharding as an annotated copy of
    // it (Function::argWants): read back here, where the text enters.
    if (op->kind == OpKind::Copy && op->result->sharding && !op->operands[0]->def &&
        op->operands[0]->argIndex >= 0)
      f.wantSharding((size_t)op->operands[0]->argIndex, *op->result->sharding);
    return true;
  }

  // `{ body(%i: i32, ...): OPS yield %a, ... }` after a loop's types.
  bool parseBody(Function& body, Scope& outer) {
    // Bodies are parsed recursively: a bound keeps hostile input from
    // exhausting the stack.
    constexpr int kMaxDepth = 64;
    if (depth_ >= kMaxDepth)
      return fail(peek(), "loops are nested more than " + std::to_string(kMaxDepth) + " deep");
    ++depth_;
    bool ok = parseBodyContents(body, outer);
    --depth_;
    return ok;
  }

  bool parseBodyContents(Function& body, Scope& outer) {
    if (!expectPunct("{")) return false;
    if (!isIdent("body")) return expected("'body(...)'");
    next();
    Scope scope{outer.ids, {}, true};
    if (!parseArgs(body, scope) || !expectPunct(":")) return false;
    for (;;) {
      if (isIdent("yield")) break;
      if (peek().kind != Tok::ValueId) return expected("an op '%ID = ...' or 'yield'");
      if (!parseOp(body, scope)) return false;
    }
    next();
    if (peek().kind == Tok::ValueId) {
      for (;;) {
        const Token& vt = peek();
        if (vt.kind != Tok::ValueId) return expected("a value '%ID'");
        Value* v;
        if (!lookup(scope, vt, v)) return false;
        next();
        body.results.push_back(v);
        if (isPunct(",")) {
          next();
          continue;
        }
        break;
      }
    }
    return expectPunct("}");
  }
};

}  // namespace

IRParseResult parseModule(const std::string& text) { return Parser(text).run(); }

}  // namespace gsl::ir
