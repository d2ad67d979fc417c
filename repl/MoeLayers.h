// The MoE layers of a program, for :cost: each layer's capacity, its
// dispatch and combine tensors and the all_to_all bytes that move its
// tokens to their experts and back (docs/moe.md, "Telemetry").
//
// A layer is recognised structurally, by its two einsums (whatever the
// letters): the dispatch, a [G, S, E, C] tensor times the tokens [G, S, M]
// giving the experts' inputs [E, G, C, M] (stdlib/moe.gsl: "gsec,gsm->egcm"),
// and the combine, a [G, S, E, C] tensor times the experts' outputs
// [E, G, C, M] giving [G, S, M] ("gsec,egcm->gsm"). The k-th dispatch and
// the k-th combine of the forward pass (in program order, loop bodies
// included) are layer k.
#pragma once
#include <string>

#include "ir/Module.h"
#include "repl/Session.h"

namespace gsl::repl {

// The MoE layers of global function `global` as its per-rank program
// `local` runs them, or "" when it has none. `forwardLayers`: how many
// layers the forward pass has (a training step: the loss function's; the
// dispatch-shaped einsums of its backward pass come after them), or -1
// for every one found (a forward function). The all_to_all bytes are what
// one rank sends, counted as :cost counts them.
std::string moeLayersText(const Build& b, const ir::Module& m, const ir::Function& global,
                          const ir::Function& local, int64_t forwardLayers);

// How many MoE layers (dispatch einsums) `f` has, loop bodies included
// (each once, whatever its trip count).
int64_t countMoeLayers(const ir::Function& f);

}  // namespace gsl::repl
