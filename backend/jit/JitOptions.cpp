// The GSL_JIT_* environment variables as JitOptions (read at the edges only).
#include "backend/jit/JitOptions.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "ir/OpTable.h"

namespace gsl::backend {

JitOptions jitOptionsFromEnvironment() {
  JitOptions o;
  if (const char* e = std::getenv("GSL_JIT_GEMM")) {
    if (std::strcmp(e, "eigen") == 0) o.gemm = JitOptions::GemmCode::Eigen;
    if (std::strcmp(e, "loops") == 0) o.gemm = JitOptions::GemmCode::Loops;
  }
  if (const char* e = std::getenv("GSL_JIT_FALLBACK")) {
    std::string list = e, name;
    for (size_t i = 0; i <= list.size(); ++i) {
      if (i < list.size() && list[i] != ',') {
        name += list[i];
        continue;
      }
      if (const ir::OpInfo* info = ir::lookupMnemonic(name)) o.fallbackOps.push_back(info->kind);
      name.clear();
    }
  }
  if (const char* e = std::getenv("GSL_JIT_OPT")) {
    int l = std::atoi(e);
    if (l >= 1 && l <= 3) o.optLevel = l;
  }
  if (const char* e = std::getenv("GSL_JIT_CODEGEN")) {
    int l = std::atoi(e);
    if (*e >= '0' && *e <= '3' && l >= 0 && l <= 3) o.codegenLevel = l;
  }
  if (const char* e = std::getenv("GSL_JIT_COMPILE_THREADS")) {
    int t = std::atoi(e);
    if (t >= 1 && t <= 64) o.compileThreads = t;
  }
  if (const char* e = std::getenv("GSL_JIT_VECTOR_WIDTH")) {
    int w = std::atoi(e);
    if (w == 4 || w == 8 || w == 16) o.vectorWidth = w;
  }
  if (const char* e = std::getenv("GSL_JIT_BF16")) {  // "portable": no vdpbf16ps
    if (std::strcmp(e, "portable") == 0) o.bf16Dot = 0;
  }
  if (const char* e = std::getenv("GSL_JIT_PROFILE")) o.profileKernels = std::strcmp(e, "1") == 0;
  return o;
}

}  // namespace gsl::backend
