#include "repl/Text.h"

#include <cctype>
#include <cstdint>

namespace gsl::repl {

std::vector<Token> tokenize(const std::string& s) {
  std::vector<Token> out;
  size_t i = 0, n = s.size();
  auto isId = [](char c) { return std::isalnum((unsigned char)c) || c == '_'; };
  while (i < n) {
    char c = s[i];
    if (std::isspace((unsigned char)c)) {
      ++i;
    } else if (c == '#') {
      while (i < n && s[i] != '\n') ++i;
    } else if (c == '"') {
      size_t start = i++;
      while (i < n && s[i] != '"' && s[i] != '\n') i += (s[i] == '\\' && i + 1 < n) ? 2 : 1;
      if (i < n && s[i] == '"') ++i;
      out.push_back({Token::String, s.substr(start, i - start), start});
    } else if (std::isalpha((unsigned char)c) || c == '_') {
      size_t start = i;
      while (i < n && isId(s[i])) ++i;
      out.push_back({Token::Ident, s.substr(start, i - start), start});
    } else if (std::isdigit((unsigned char)c)) {
      size_t start = i;
      while (i < n && (std::isalnum((unsigned char)s[i]) || (s[i] == '.' && i + 1 < n && std::isdigit((unsigned char)s[i + 1]))))
        ++i;
      out.push_back({Token::Number, s.substr(start, i - start), start});
    } else {
      static const char* two[] = {"==", "!=", "<=", ">=", "->", "..", "**"};
      std::string t(1, c);
      for (const char* p : two)
        if (s.compare(i, 2, p) == 0) t = p;
      out.push_back({Token::Punct, t, i});
      i += t.size();
    }
  }
  return out;
}

int openBrackets(const std::string& s) {
  int depth = 0;
  for (const auto& t : tokenize(s)) {
    if (t.kind != Token::Punct) continue;
    if (t.text == "(" || t.text == "[" || t.text == "{") ++depth;
    else if (t.text == ")" || t.text == "]" || t.text == "}") depth = depth > 0 ? depth - 1 : 0;
  }
  return depth;
}

std::string blankMain(const std::string& text, bool& found) {
  found = false;
  auto toks = tokenize(text);
  int depth = 0;
  for (size_t i = 0; i < toks.size(); ++i) {
    const Token& t = toks[i];
    if (t.kind == Token::Punct) {
      if (t.text == "(" || t.text == "[" || t.text == "{") ++depth;
      else if (t.text == ")" || t.text == "]" || t.text == "}") --depth;
      continue;
    }
    if (depth != 0 || t.text != "fn" || i + 1 >= toks.size() || toks[i + 1].text != "main") continue;
    // The body: the first `{` after the signature, to its matching `}`.
    size_t j = i + 2;
    int d = 0;
    while (j < toks.size() && !(d == 0 && toks[j].text == "{")) {
      if (toks[j].text == "(" || toks[j].text == "[") ++d;
      else if (toks[j].text == ")" || toks[j].text == "]") --d;
      ++j;
    }
    size_t end = text.size();
    d = 0;
    for (; j < toks.size(); ++j) {
      if (toks[j].text == "{") ++d;
      else if (toks[j].text == "}" && --d == 0) {
        end = toks[j].pos + 1;
        break;
      }
    }
    std::string out = text;
    for (size_t k = t.pos; k < end; ++k)
      if (out[k] != '\n') out[k] = ' ';
    found = true;
    return out;
  }
  return text;
}

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return "";
  size_t b = s.find_last_not_of(" \t\r\n");
  return s.substr(a, b - a + 1);
}

bool startsWith(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

std::string rankList(const std::vector<int64_t>& r) {
  std::string s;
  for (size_t i = 0; i < r.size();) {
    size_t j = i;
    while (j + 1 < r.size() && r[j + 1] == r[j] + 1) ++j;
    if (!s.empty()) s += ",";
    if (j - i >= 2) {
      s += std::to_string(r[i]) + "-" + std::to_string(r[j]);
      i = j + 1;
    } else {
      s += std::to_string(r[i]);
      ++i;
    }
  }
  return s;
}

std::string thousands(uint64_t n) {
  std::string d = std::to_string(n), s;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i && (d.size() - i) % 3 == 0) s += ",";
    s += d[i];
  }
  return s;
}

}  // namespace gsl::repl
