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

// Inputs a caller gives up to one call (buffer donation, as
// jax.jit(donate_argnums=...)): the caller reads none of them after the
// call (a donated param is replaced by a result before anything reads it
// again), so the engine may write results into their buffers. It does so
// only where no other tensor holds the buffer (Tensor::soleOwner) and where
// its plan shows that the donated value is read no more (or read at the
// same element, by the op that writes it) when the result is written: a
// training step's updated params and optimizer states take the old ones'
// places (docs/memory.md).
struct Donation {
  std::vector<bool> args;           // args[i]: argument i is donated (missing: not)
  std::vector<std::string> params;  // params (by name) donated
  bool arg(size_t i) const { return i < args.size() && args[i]; }
  bool param(const std::string& name) const;
};

// An input of a function whose buffer a result may take when donated: an
// argument (arg >= 0) or a param by name.
struct DonorInput {
  int arg = -1;
  std::string param;
  bool valid() const { return arg >= 0 || !param.empty(); }
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual const char* name() const = 0;
  // Runs `f` on `args`; throws RuntimeError on a user-level failure.
  std::vector<Tensor> call(const ir::Function& f, const std::vector<Tensor>& args) { return call(f, args, {}); }
  // The same, with the inputs in `donated` given up (Donation). An engine
  // may ignore donation (the interpreter does).
  virtual std::vector<Tensor> call(const ir::Function& f, const std::vector<Tensor>& args,
                                   const Donation& donated) = 0;
};

// The reference interpreter engine (`--engine interp`) for one rank.
std::unique_ptr<Engine> makeInterpreterEngine(const KernelContext& ctx);

}  // namespace gsl::backend
