// The pass pipeline: the one ordered list of passes, in two stages, each a
// table of {name, function} rows in Pipeline.cpp (kGlobalPasses,
// kRankPasses).
//
// Global stage (once per program, on the module the front end built; the
// verifier runs after each pass):
//   0. verify              the front end's output is well-formed IR
//   1. shape inference     exact types, canonical attributes
//   2. autocast            only with --autocast: f32 contractions in bf16
//   3. training expansion  autodiff + optimizer updates (passes/Training)
//
// Per-rank stage (per function, for given input shardings; the result is
// ONE program that every rank runs, whatever the number of ranks):
//   0. update sharding       a training step's update split over data axes
//   1. sharding propagation  every value gets a sharding
//   2. SPMD partitioning     local shapes, collectives, partial sums resolved
//   2b. all-reduce combining one all_reduce for a group's tagged sums
//   3. simplification        common subexpressions merged, dead ops removed
//   4. verify                the per-rank program is well-formed
#pragma once
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ir/Module.h"

namespace gsl::passes {

// `gsl compile --print-after PASS`: the IR right after each named pass
// ("all": every pass), printed to `os` for a person reading what the pass
// did. Names: passNames().
struct PrintAfter {
  std::set<std::string> passes;
  std::ostream *os = nullptr;
};

// The passes' names, global stage then per-rank stage, in pipeline order
// (the two lists in Pipeline.cpp are the only place they are written).
std::vector<std::string> passNames();

void runGlobalPipeline(ir::Module &m, const PrintAfter *print = nullptr);

// The stages `gsl compile --emit` prints: the AST, the global IR (after the
// global stage), the IR with every value's sharding (after propagation),
// the per-rank programs, and their LLVM IR.
enum class EmitKind { Ast, Ir, Sharded, Spmd, Llvm };
inline constexpr EmitKind kEmitKinds[] = {EmitKind::Ast, EmitKind::Ir,
                                          EmitKind::Sharded, EmitKind::Spmd,
                                          EmitKind::Llvm};
const char *emitKindName(EmitKind k); // "ast", "ir", "sharded", "spmd", "llvm"
std::optional<EmitKind>
parseEmitKind(std::string_view s); // inverse of emitKindName

// `f` (its args' shardings set to how the inputs lie) is propagated in
// place and partitioned. With `gather`, every result is made replicated.
std::unique_ptr<ir::Function>
buildPerRankProgram(const ir::Module &m, ir::Function &f, bool gather,
                    const PrintAfter *print = nullptr);

} // namespace gsl::passes
