// An execution engine runs IR functions on host tensors. The reference
// interpreter is one; the LLVM JIT (issue 4) is another. The host script
// (runtime/Host) only talks to this interface.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/Kernels.h"
#include "backend/Tensor.h"
#include "ir/Module.h"
#include "support/SourceLoc.h"

namespace gsl::backend {

// The current values of a module's params, by name.
struct ParamStore {
  std::map<std::string, Tensor> values;
  // Materialises every param of `m` with its initializer and global seed.
  void initialize(const ir::Module& m, uint64_t seed);
  const Tensor& get(const std::string& name) const;
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual const char* name() const = 0;
  // Runs `f` on `args`; throws RuntimeError on a user-level failure.
  virtual std::vector<Tensor> call(const ir::Function& f, const std::vector<Tensor>& args) = 0;
};

// The reference interpreter engine (`--engine interp`) for one rank.
std::unique_ptr<Engine> makeInterpreterEngine(const KernelContext& ctx);

}  // namespace gsl::backend
