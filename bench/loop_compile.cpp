// The JIT compiles a loop as a loop (docs/loops.md, "JIT"): its code size
// and compile time do not depend on the trip count. An L-layer MLP stack
// (h = h + tanh(h @ w1[l]) @ w2[l], stacked weights, plus the gradient of
// a loss w.r.t. both, i.e. a forward and a reverse loop) at L = 2 and
// L = 32, as a loop and as its unrolled twin; prints the optimised LLVM IR
// size (`--emit llvm`) and the compile time of each, and the ratios
// L=32 / L=2 (reference: the L = 2 build of the same form, in this run).
// Also the steady step (one call of the compiled forward + gradient, the
// fastest of 20 after a warm-up) of the loop against its unrolled twin at
// the larger L (reference: the unrolled twin, in this run).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "backend/Engine.h"
#include "backend/jit/JitEngine.h"
#include "ir/IRParser.h"
#include "ir/Verifier.h"
#include "passes/Autodiff.h"
#include "support/Diagnostics.h"
#include "tests/unit/ir_texts.h"

using namespace gsl;

namespace {

constexpr int B = 32, D = 64, F = 256;

std::string layer(const std::string& i, const std::string& h, const std::string& w1, const std::string& w2,
                  int next, const char* ind) {
  return irtext::mlpLayer(ind, i, h, w1, w2, next, B, D, F);
}

std::string program(int L, bool loop) {
  std::ostringstream s;
  s << "np = 1\n"
    << "param @w1 : f32[" << L << ", " << D << ", " << F << "] = normal(0.05)\n"
    << "param @w2 : f32[" << L << ", " << F << ", " << D << "] = normal(0.05)\n\n"
    << "func @f(%0: f32[" << B << ", " << D << "]) -> (f32[" << B << ", " << D << "]) {\n"
    << "  %1 = param {name = \"w1\"} : f32[" << L << ", " << D << ", " << F << "]\n"
    << "  %2 = param {name = \"w2\"} : f32[" << L << ", " << F << ", " << D << "]\n";
  if (loop) {
    s << "  %3 = loop %0, %1, %2 {carried = 1, trip = " << L << "} : f32[" << B << ", " << D << "] {\n"
      << "    body(%4: i32, %5: f32[" << B << ", " << D << "], %6: f32[" << L << ", " << D << ", " << F
      << "], %7: f32[" << L << ", " << F << ", " << D << "]):\n"
      << layer("%4", "%5", "%6", "%7", 8, "    ") << "    yield %13\n  }\n  return %3\n}\n";
  } else {
    std::string h = "%0";
    int next = 3;
    for (int l = 0; l < L; ++l) {
      s << "  %" << next << " = constant {value = " << l << ".0} : i32\n";
      s << layer("%" + std::to_string(next), h, "%1", "%2", next + 1, "  ");
      h = "%" + std::to_string(next + 6);
      next += 7;
    }
    s << "  return " << h << "\n}\n";
  }
  return s.str();
}

struct Figures {
  size_t llvmBytes = 0;
  double compileSeconds = 0;
  double stepSeconds = 0;
};

Figures measure(int L, bool loop) {
  ir::IRParseResult r = ir::parseModule(program(L, loop));
  GSL_ASSERT(r.module, "bench: " + r.error);
  ir::Module& m = *r.module;
  ir::Function& f = *m.functions[0];
  // loss = sum(h * h); the gradient w.r.t. w1 and w2 (a reverse loop).
  ir::AttrMap all;
  all.set("axis", std::vector<int64_t>{0, 1});
  all.set("keepdims", false);
  ir::Value* h = f.results[0];
  ir::Value* sq = f.append(ir::OpKind::Mul, {h, h}, {}, h->type)->result;
  ir::Value* loss = f.append(ir::OpKind::Sum, {sq}, all, ir::TensorType{ir::DType::F32, {}})->result;
  auto g = passes::appendGradient(m, f, loss, {"w1", "w2"}, false);
  f.results = {loss, g.params[0], g.params[1]};
  GSL_ASSERT(ir::verify(m).empty(), "bench: " + ir::verify(m));
  Figures out;
  out.llvmBytes = backend::jitEmitLLVM(f).size();
  auto t0 = std::chrono::steady_clock::now();
  backend::jitPeakBytes(f);  // compiles f (each program's text differs: never cached)
  out.compileSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  backend::ParamStore ps;
  ps.initialize(m, 1);
  backend::KernelContext ctx;
  ctx.param = [&](const std::string& n) -> const backend::Tensor& { return ps.get(n); };
  auto engine = backend::makeJitEngine(ctx);  // the compiled code is cached: no second compile
  std::vector<float> x(B * D);
  for (size_t k = 0; k < x.size(); ++k) x[k] = 0.01f * (float)(k % 97) - 0.4f;
  std::vector<backend::Tensor> args = {backend::Tensor::fromF32({B, D}, x)};
  for (int r = 0; r < 3; ++r) engine->call(f, args);
  out.stepSeconds = 1e9;
  for (int r = 0; r < 20; ++r) {
    auto s0 = std::chrono::steady_clock::now();
    engine->call(f, args);
    out.stepSeconds =
        std::min(out.stepSeconds, std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count());
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const int big = quick ? 4 : 32;
  Figures l2 = measure(2, true), lb = measure(big, true), u2 = measure(2, false), ub = measure(big, false);
  std::printf("%-10s %6s %14s %12s %12s\n", "form", "L", "llvm bytes", "compile s", "step ms");
  std::printf("%-10s %6d %14zu %12.3f %12.3f\n", "loop", 2, l2.llvmBytes, l2.compileSeconds, l2.stepSeconds * 1e3);
  std::printf("%-10s %6d %14zu %12.3f %12.3f\n", "loop", big, lb.llvmBytes, lb.compileSeconds, lb.stepSeconds * 1e3);
  std::printf("%-10s %6d %14zu %12.3f %12.3f\n", "unrolled", 2, u2.llvmBytes, u2.compileSeconds,
              u2.stepSeconds * 1e3);
  std::printf("%-10s %6d %14zu %12.3f %12.3f\n", "unrolled", big, ub.llvmBytes, ub.compileSeconds,
              ub.stepSeconds * 1e3);
  std::printf("ratio loop L%d/L2: llvm size %.3f, compile time %.3f\n", big, (double)lb.llvmBytes / l2.llvmBytes,
              lb.compileSeconds / l2.compileSeconds);
  std::printf("ratio unrolled L%d/L2: llvm size %.3f, compile time %.3f\n", big,
              (double)ub.llvmBytes / u2.llvmBytes, ub.compileSeconds / u2.compileSeconds);
  std::printf("ratio steady step loop/unrolled at L%d: %.3f\n", big, lb.stepSeconds / ub.stepSeconds);
  return 0;
}
