// Training expansion: turns the host thunks that ask for gradients (set by
// the front end from `grad(loss, ...)` and `opt.minimize(loss, ...)`) into
// real training steps, on the GLOBAL IR, before partitioning, so gradients
// and optimizer states get their shardings from propagation like any
// other value (GSPMD-style).
//
//   grad:      results := d loss / d param, for every param the loss reads
//   minimize:  appends the reverse sweep (passes/Autodiff) and the
//              optimizer's update; takes the step counter and the optimizer
//              states as extra arguments; results := loss, new params, new
//              states (see ir::TrainRequest for the layout).
//
// Optimizers (hyperparameters from the `optimizer` declaration):
//   sgd(lr, momentum):   v = momentum v + g;  p -= lr v      (no state when momentum = 0)
//   adam(lr, beta1, beta2, eps):  m, v with bias correction (Kingma & Ba)
//   adafactor(lr, decay, eps, clip): factored second moments (Shazeer &
//       Stern 2018): for a param of rank >= 2, row statistics R (last dim
//       averaged) and column statistics C (second-to-last dim averaged),
//       V = R C / mean(R); beta2_t = 1 - t^-decay; updates g / sqrt(V)
//       clipped to RMS <= clip; no momentum; rank < 2 keeps a full V.
// Every state has its param's sharding (factored states drop the averaged dim).
#pragma once
#include "ir/Module.h"

namespace gsl::passes {

void expandTraining(ir::Module& m);

}  // namespace gsl::passes
