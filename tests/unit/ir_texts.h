// IR text shared by the unit tests of several layers and bench/: a loop
// MLP fixture and the text of one MLP layer.
#pragma once
#include <sstream>
#include <string>

namespace irtext {

// A 4-layer tanh MLP with stacked weights: carries (h, the sum of the
// layers' squared activations) and stacks every layer's output. Per
// iteration: dynamic_index 0, matmul [2,3]x[3,3] 2*6*3 = 36, add 6, tanh 6,
// mul 6, sum 6 (one per input element), scalar add 1: 61 flops, 244 for 4.
inline const char* const kLoopMlp =
    "np = 1\n"
    "param @w : f32[4, 3, 3] = normal(0.5)\n"
    "\n"
    "func @f(%0: f32[2, 3], %1: f32[3]) -> (f32[2, 3], f32, f32[4, 2, 3]) {\n"
    "  %2 = param {name = \"w\"} : f32[4, 3, 3]\n"
    "  %3 = constant {value = 0.0} : f32\n"
    "  %4, %5, %6 = loop %0, %3, %2, %1 {carried = 2, trip = 4} : f32[2, 3], f32, f32[4, 2, 3] {\n"
    "    body(%7: i32, %8: f32[2, 3], %9: f32, %10: f32[4, 3, 3], %11: f32[3]):\n"
    "    %12 = dynamic_index %10, %7 : f32[3, 3]\n"
    "    %13 = matmul %8, %12 : f32[2, 3]\n"
    "    %14 = add %13, %11 : f32[2, 3]\n"
    "    %15 = tanh %14 : f32[2, 3]\n"
    "    %16 = mul %15, %15 : f32[2, 3]\n"
    "    %17 = sum %16 {axis = [0, 1], keepdims = false} : f32\n"
    "    %18 = add %9, %17 : f32\n"
    "    yield %15, %18, %15\n"
    "  }\n"
    "  return %4, %5, %6\n"
    "}\n";

// One residual MLP layer over stacked weights, h' = h + tanh(h @ w1[i]) @
// w2[i], for h: f32[b, d], w1: f32[L, d, f], w2: f32[L, f, d]: six ops
// numbered %next .. %next+5 (h' is %next+5), each line indented by `ind`.
inline std::string mlpLayer(const std::string& ind, const std::string& i, const std::string& h,
                            const std::string& w1, const std::string& w2, int next, int b, int d, int f) {
  auto v = [&](int k) { return "%" + std::to_string(next + k); };
  std::ostringstream s;
  s << ind << v(0) << " = dynamic_index " << w1 << ", " << i << " : f32[" << d << ", " << f << "]\n"
    << ind << v(1) << " = matmul " << h << ", " << v(0) << " : f32[" << b << ", " << f << "]\n"
    << ind << v(2) << " = tanh " << v(1) << " : f32[" << b << ", " << f << "]\n"
    << ind << v(3) << " = dynamic_index " << w2 << ", " << i << " : f32[" << f << ", " << d << "]\n"
    << ind << v(4) << " = matmul " << v(2) << ", " << v(3) << " : f32[" << b << ", " << d << "]\n"
    << ind << v(5) << " = add " << h << ", " << v(4) << " : f32[" << b << ", " << d << "]\n";
  return s.str();
}

}  // namespace irtext
