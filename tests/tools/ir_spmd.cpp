// ir_spmd FILE [FUNC]: reads a module in IR text (ir/IRParser; '#' starts
// a comment, so a file can carry FileCheck lines), runs
// the per-rank pipeline (passes::buildPerRankProgram: sharding propagation,
// SPMD partitioning, simplification) on function FUNC (default: the first)
// and prints the per-rank function. The entry the loop FileCheck tests
// (tests/filecheck/loop_*.gir) read IR text through; the gsl CLI reads
// only surface programs.
#include <fstream>
#include <iostream>
#include <sstream>

#include "ir/IRParser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/Pipeline.h"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::cerr << "usage: ir_spmd FILE [FUNC]\n";
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::cerr << argv[1] << ": error: cannot read the file\n";
    return 1;
  }
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  gsl::ir::IRParseResult r = gsl::ir::parseModule(text);
  if (!r.module) {
    std::cerr << argv[1] << ":" << r.error << "\n";
    return 1;
  }
  if (std::string e = gsl::ir::verify(*r.module); !e.empty()) {
    std::cerr << argv[1] << ": error: " << e << "\n";
    return 1;
  }
  gsl::ir::Function* f = nullptr;
  for (auto& g : r.module->functions)
    if (argc == 2 || g->name == argv[2]) {
      f = g.get();
      break;
    }
  if (!f) {
    std::cerr << argv[1] << ": error: no such function\n";
    return 1;
  }
  auto local = gsl::passes::buildPerRankProgram(*r.module, *f, /*gather=*/false);
  std::cout << gsl::ir::printFunction(*local);
  return 0;
}
