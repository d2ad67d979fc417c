// The front end's one entry point: file -> checked program.
//
//   parse (frontend/Parser, ANTLR)  ->  imports resolved (this file)
//   ->  Sema: names, consts (-D overrides, NP), meshes, params, types and
//       static shapes of every expression, shardings checked; tensor
//       functions lowered to IR (calls inlined) and `fn main` to a
//       HostProgram whose tensor math is IR thunks.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "frontend/AST.h"
#include "frontend/HostProgram.h"
#include "ir/Module.h"
#include "support/Diagnostics.h"

namespace gsl::frontend {

struct Options {
  int64_t np = 1;                          // -np: the predefined const NP
  std::map<std::string, int64_t> defines;  // -D NAME=VALUE const overrides
  std::map<std::string, double> floatDefines;  // -D NAME=0.001 (a float value)
  // A define naming no const is left out instead of being an error (the
  // REPL: its consts get declared as the session grows).
  bool definesMayNameNoConst = false;
  std::vector<std::string> importPath;     // searched after the importing file's folder
  // At most this many IR ops in all (calls are inlined): a larger program is
  // a user error, not minutes of compiling and gigabytes of memory (the
  // largest example, examples/gshard_600b.gsl, has about 10,000).
  int64_t maxOps = 250000;
  // Imported files whose text is given here instead of read from the disk,
  // by canonical path (std::filesystem::weakly_canonical): the REPL's
  // what-ifs on an imported declaration edit its own copy of the file.
  std::map<std::string, std::string> importTexts;
};

struct CheckedProgram {
  std::vector<std::unique_ptr<ast::Program>> asts;  // main file first, then imports
  std::unique_ptr<ir::Module> module;
  HostProgram host;
  std::vector<std::string> userFunctions;  // tensor fns, in declaration order
  // Every declaration, in the order the checks took them (an imported
  // file's before the importing file's); they live in `asts`.
  std::vector<const ast::Decl*> decls;
};

// Default import path: $GSL_PATH (colon-separated), then the stdlib folder.
std::vector<std::string> defaultImportPath();

// Reads, parses and checks `path` and its imports. Returns null if any
// error was reported to `diags` (which then holds every diagnostic).
std::unique_ptr<CheckedProgram> compileFile(const std::string& path, const Options& opts,
                                            SourceManager& sm, Diagnostics& diags);
// Same for source text given directly (`display` names it in diagnostics).
std::unique_ptr<CheckedProgram> compileSource(const std::string& display, const std::string& text,
                                              const Options& opts, SourceManager& sm,
                                              Diagnostics& diags);

// Checks the declarations of `parsed` again, as compileSource did, into a
// new program (its own module and host program; its `asts` empty, as the
// declarations stay `parsed`'s, and `parsed`'s SourceManager names their
// locations). Between the two the caller may have edited the declarations
// in place: gsl plan (runtime/AutoSharding) writes its candidate
// annotations and mesh sizes into the AST instead of reparsing text. Null
// if an error was reported to `diags`.
std::unique_ptr<CheckedProgram> recheck(const CheckedProgram& parsed, const Options& opts, Diagnostics& diags);

}  // namespace gsl::frontend
