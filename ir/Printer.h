// Deterministic text form of the IR (`gsl compile --emit ir`).
//
//   np = 4
//   mesh @m = [data: 2, model: 2]
//   param @w1 : f32[64, 256] @shard(m, [_, model]) = normal(0.02)
//   func @mlp(%0: f32[32, 64] @shard(m, [data, _])) -> (f32[32, 64]) {
//     %1 = param {name = "w1"} : f32[64, 256] @shard(m, [_, model])
//     %2 = matmul %0, %1 : f32[32, 256]
//     %3 = sum %2 {axis = [0, 1], keepdims = false} : f32
//     return %3
//   }
//
// A loop (ir/Loop.h) prints its results, then its body two spaces deeper:
//
//     %4, %5 = loop %2, %3 {carried = 1, trip = 4} : f32[8], f32[4, 8] {
//       body(%6: i32, %7: f32[8], %8: f32[4, 8, 8]):
//       %9 = dynamic_index %8, %6 : f32[8, 8]
//       ...
//       yield %11, %7
//     }
//
// Values are renumbered 0..N-1 before printing, in text order (a body's
// values follow its loop's results); attributes print in sorted key order. ir/IRParser reads this form back: print(parse(x)) == x.
#pragma once
#include <string>

#include "ir/Module.h"

namespace gsl::ir {

std::string printModule(Module& m);
std::string printFunction(Function& f);

}  // namespace gsl::ir
