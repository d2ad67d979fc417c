// Parses the IR text form printed by ir/Printer back into a Module, so
// passes can be tested in isolation on hand-written IR:
// printModule(parseModule(x)) == x for any printed module.
// Every op's type is re-checked with its op-table rule; a printed type that
// differs from the inferred one is an error.
#pragma once
#include <memory>
#include <string>

#include "ir/Module.h"

namespace gsl::ir {

struct IRParseResult {
  std::unique_ptr<Module> module;  // null on error
  std::string error;               // "LINE:COL: message" on error
};

IRParseResult parseModule(const std::string& text);

}  // namespace gsl::ir
