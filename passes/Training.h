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
//              states, then the loss function's auxiliary outputs when it
//              returns (loss, aux...) (see ir::TrainRequest for the layout).
//
// Optimizers (hyperparameters from the `optimizer` declaration; the
// rules are torch.optim's, see docs/training.md):
//   sgd(lr, momentum, weight_decay): v = momentum v + g;  p -= lr v  (no state when momentum = 0)
//   adam(lr, beta1, beta2, eps, weight_decay): m, v with bias correction
//       (Kingma & Ba); weight_decay is L2 (added to the gradient)
//   adamw(..., weight_decay): Adam with decoupled decay p -= lr wd p (Loshchilov & Hutter)
//   adafactor(lr, decay, eps, clip, weight_decay): factored second moments (Shazeer &
//       Stern 2018): for a param of rank >= 2, row statistics R (last dim
//       averaged) and column statistics C (second-to-last dim averaged),
//       V = R C / mean(R); beta2_t = 1 - t^-decay; updates g / sqrt(V)
//       clipped to RMS <= clip; no momentum; rank < 2 keeps a full V;
//       weight_decay is decoupled.
//   Every optimizer: clip_norm > 0 scales all gradients by
//       min(1, clip_norm / (global norm + 1e-6)) first, and lr may be a
//       schedule (ir::LrSchedule).
// Every state has its param's sharding (factored states drop the averaged dim).
// Per-step scalars that need double precision (a scheduled lr, Adam's bias
// corrections, the decoupled decay factor) are arguments the host fills
// with stepScalars (see ir::TrainRequest::scalars).
#pragma once
#include <vector>

#include "ir/Module.h"

namespace gsl::passes {

void expandTraining(ir::Module& m);

// The values of `tr.scalars` for step t (from 1), in double; the host
// rounds each once to f32.
std::vector<double> stepScalars(const ir::Optimizer& o, const ir::TrainRequest& tr, int64_t t);

}  // namespace gsl::passes
