#include "frontend/Frontend.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "frontend/Parser.h"
#include "frontend/Sema.h"
#include "support/Text.h"

#ifndef GSL_STDLIB_DIR
#define GSL_STDLIB_DIR "stdlib"
#endif

namespace gsl::frontend {

namespace fs = std::filesystem;

std::vector<std::string> defaultImportPath() {
  std::vector<std::string> p;
  if (const char* env = std::getenv("GSL_PATH")) {
    std::stringstream ss(env);
    std::string item;
    while (std::getline(ss, item, ':'))
      if (!item.empty()) p.push_back(item);
  }
  p.push_back(GSL_STDLIB_DIR);
  return p;
}

constexpr uintmax_t kMaxSourceBytes = uintmax_t(16) << 20;

static bool readText(const std::string& path, std::string& out, std::string& why) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    why = "no such file";
    return false;
  }
  if (fs::is_directory(path, ec)) {
    why = "is a directory";
    return false;
  }
  // /dev/zero or a FIFO would be read forever, a huge file into memory.
  if (!fs::is_regular_file(path, ec)) {
    why = "is not a regular file";
    return false;
  }
  const uintmax_t size = fs::file_size(path, ec);
  if (ec || size > kMaxSourceBytes) {
    why = ec ? "cannot be read" : "is larger than 16 MiB, the limit for a source file";
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    why = "cannot be read";
    return false;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  if (out.size() > kMaxSourceBytes) {  // grew while being read
    why = "is larger than 16 MiB, the limit for a source file";
    return false;
  }
  return true;
}

// ANTLR's input stream throws on text that is not UTF-8: report the first
// bad byte instead (strict UTF-8: no overlong forms, surrogates or code
// points above U+10FFFF). Columns count characters, as ANTLR's do.
static bool checkUtf8(const std::string& text, int file, Diagnostics& diags) {
  size_t bad = invalidUtf8At(text);
  if (bad == std::string_view::npos) return true;
  int line = 1, col = 1;
  for (size_t i = 0; i < bad; ++i) {
    if (text[i] == '\n') line++, col = 1;
    else if (((unsigned char)text[i] & 0xC0) != 0x80) col++;  // one per character
  }
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02X", (unsigned)(unsigned char)text[bad]);
  diags.error({file, line, col}, std::string("the file is not valid UTF-8 (byte ") + hex + ")");
  return false;
}

namespace {

struct Loader {
  const Options& opts;
  SourceManager& sm;
  Diagnostics& diags;
  CheckedProgram& prog;
  std::set<std::string> seen;  // canonical paths already loaded
  std::vector<const ast::Decl*> decls;

  // `import "f.gsl" with (L = 2)`: marks each named const of the imported
  // file `p` with its new value (Sema's declConst reads it).
  void applyWith(const ast::Decl& imp, ast::Program& p) {
    for (const auto& w : imp.with) {
      if (w.keyword.empty()) {
        diags.error(w.loc, "import ... with (...) takes NAME = VALUE entries, the consts of \"" + imp.name + "\" to set");
        continue;
      }
      ast::Decl* target = nullptr;
      std::string consts;
      for (auto& d : p.decls) {
        if (d->kind != ast::DeclKind::Const) continue;
        if (d->name == w.keyword && !target) target = d.get();
        consts += (consts.empty() ? "" : ", ") + d->name;
      }
      if (!target) {
        diags.error(w.loc, "'" + w.keyword + "' is not a const of \"" + imp.name + "\" (" +
                               (consts.empty() ? "it declares no consts" : "its consts: " + consts) + ")");
      } else if (target->override) {
        diags.error(w.loc, "'" + w.keyword + "' is set twice in this import");
      } else {
        target->override = &w;
        target->overrideImport = imp.name;
      }
    }
  }

  // Parses a file's text and, depth first, its imports (`imp`: the import
  // that names this file, null for the root file).
  void load(const std::string& display, const std::string& text, const std::string& dir,
            const ast::Decl* imp = nullptr) {
    int file = sm.addFile(display, text);
    if (!checkUtf8(text, file, diags)) return;
    auto ast = parseProgram(sm, file, diags);
    if (!ast) return;
    ast::Program* p = ast.get();
    if (imp) applyWith(*imp, *p);
    // A file never imports itself: examples/moe.gsl's `import "moe.gsl"`
    // finds stdlib/moe.gsl.
    std::error_code sec;
    const fs::path self = fs::weakly_canonical(display, sec);
    prog.asts.push_back(std::move(ast));
    for (const auto& d : p->decls) {
      if (d->kind != ast::DeclKind::Import) {
        decls.push_back(d.get());
        continue;
      }
      std::vector<std::string> dirs{dir};
      dirs.insert(dirs.end(), opts.importPath.begin(), opts.importPath.end());
      std::string found;
      for (const auto& base : dirs) {
        fs::path cand = fs::path(base) / d->name;
        std::error_code ec;
        if (fs::is_regular_file(cand, ec) && fs::weakly_canonical(cand, ec) != self) {
          found = cand.string();
          break;
        }
      }
      if (found.empty()) {
        diags.error(d->loc, "cannot find import \"" + d->name + "\" (looked in the importing file's folder, $GSL_PATH and the stdlib)");
        continue;
      }
      std::error_code ec;
      std::string canon = fs::weakly_canonical(found, ec).string();
      if (!seen.insert(canon).second) {  // already imported
        if (!d->with.empty())
          diags.error(d->loc, "\"" + d->name + "\" is already imported; set its consts (with) where it is first imported");
        continue;
      }
      std::string t, why;
      if (auto given = opts.importTexts.find(canon); given != opts.importTexts.end()) t = given->second;
      else if (!readText(found, t, why)) {
        diags.error(d->loc, "cannot read import \"" + d->name + "\": " + why);
        continue;
      }
      load(found, t, fs::path(found).parent_path().string(), d.get());
    }
  }
};

}  // namespace

std::unique_ptr<CheckedProgram> compileSource(const std::string& display, const std::string& text,
                                              const Options& opts, SourceManager& sm,
                                              Diagnostics& diags) {
  auto prog = std::make_unique<CheckedProgram>();
  Loader loader{opts, sm, diags, *prog, {}, {}};
  std::error_code ec;
  std::string dir = fs::path(display).parent_path().string();
  if (dir.empty()) dir = ".";
  loader.seen.insert(fs::weakly_canonical(display, ec).string());
  loader.load(display, text, dir);
  if (diags.hasErrors()) return nullptr;
  prog->decls = loader.decls;
  if (!analyze(loader.decls, opts, diags, *prog)) return nullptr;
  return prog;
}

std::unique_ptr<CheckedProgram> recheck(const CheckedProgram& parsed, const Options& opts, Diagnostics& diags) {
  auto prog = std::make_unique<CheckedProgram>();
  prog->decls = parsed.decls;
  if (!analyze(parsed.decls, opts, diags, *prog)) return nullptr;
  return prog;
}

std::unique_ptr<CheckedProgram> compileFile(const std::string& path, const Options& opts,
                                            SourceManager& sm, Diagnostics& diags) {
  std::string text, why;
  if (!readText(path, text, why)) {
    diags.error({}, path + ": " + why);
    return nullptr;
  }
  return compileSource(path, text, opts, sm, diags);
}

}  // namespace gsl::frontend
