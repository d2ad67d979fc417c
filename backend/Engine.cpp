#include "backend/Engine.h"

#include <algorithm>

#include "backend/Interpreter.h"
#include "backend/Random.h"
#include "support/Diagnostics.h"

namespace gsl::backend {

void ParamStore::initialize(const ir::Module& m, uint64_t seed) {
  values.clear();
  for (const auto& p : m.params) values[p.name] = initParam(p, seed);
}

const Tensor& ParamStore::get(const std::string& name) const {
  auto it = values.find(name);
  GSL_ASSERT(it != values.end(), "no value for param '" + name + "'");
  return it->second;
}

bool Donation::param(const std::string& name) const {
  return std::find(params.begin(), params.end(), name) != params.end();
}

namespace {

class InterpreterEngine : public Engine {
 public:
  explicit InterpreterEngine(const KernelContext& ctx) : ctx_(ctx) {}
  const char* name() const override { return "interp"; }
  std::vector<Tensor> call(const ir::Function& f, const std::vector<Tensor>& args, const Donation&) override {
    return interpret(f, args, ctx_);
  }

 private:
  KernelContext ctx_;
};

}  // namespace

std::unique_ptr<Engine> makeInterpreterEngine(const KernelContext& ctx) {
  return std::make_unique<InterpreterEngine>(ctx);
}

}  // namespace gsl::backend
