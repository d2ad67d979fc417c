// A module: the meshes, params and tensor functions of one GSL program
// (after imports, const evaluation and inlining).
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/Function.h"
#include "ir/Mesh.h"
#include "ir/Sharding.h"

namespace gsl::ir {

// How a param is initialised (spec section 1).
struct ParamInit {
  enum Kind { Zeros, Ones, Normal, Uniform, Glorot } kind = Zeros;
  double a = 0, b = 0;  // normal: std in a; uniform: lo in a, hi in b
  // Leading dims that stack layers (a param-group member: 1); glorot's fans
  // are those of one layer.
  int stacked = 0;
  std::string str() const;  // "zeros", "normal(0.02)", "uniform(-1.0, 1.0)", "glorot", "glorot(stacked = 1)"
};

struct Param {
  std::string name;
  TensorType type;
  std::optional<Sharding> sharding;
  ParamInit init;
  SourceLoc loc;
};

// A learning-rate schedule (docs/training.md): linear warmup from 0 to
// `peak` over the first `warmup` steps (lr = peak * t / warmup), then
//   Constant: peak;
//   Linear / Cosine: from peak down to `end` at step `total`, then `end`;
//   Rsqrt: peak * sqrt(warmup / t) (warmup >= 1).
// Steps count from 1 (the step being taken).
struct LrSchedule {
  enum Kind { Constant, Linear, Cosine, Rsqrt } kind = Constant;
  double peak = 0, end = 0;
  int64_t warmup = 0, total = 0;
  bool isConstant() const { return kind == Constant && warmup == 0; }
  double at(int64_t t) const;  // the learning rate of step t, in double
  std::string str() const;     // "cosine_decay(peak=0.001, warmup=100, total=1000, end=0)"
};

// An optimizer declared with `optimizer NAME = sgd(...) | adam(...) |
// adamw(...) | adafactor(...)`; hyperparameters by name, defaults filled
// in (hp["lr"] is the schedule's peak).
struct Optimizer {
  enum Kind { SGD, Adam, AdamW, Adafactor } kind = SGD;
  std::string name;
  std::map<std::string, double> hp;
  LrSchedule lr;
  SourceLoc loc;
  std::string str() const;  // "adam(beta1=0.9, ...)"
};

struct Module {
  int64_t np = 1;  // number of ranks the module was built for
  std::vector<Mesh> meshes;
  std::vector<Param> params;
  std::vector<std::unique_ptr<Function>> functions;
  std::vector<Optimizer> optimizers;
  // Mixed precision (--autocast bf16, passes/Autocast.h): the dtype f32
  // matmuls and einsums run in. None: everything as written.
  std::optional<DType> autocast;
  // Loops' backward passes recompute their whole body (--remat) instead of
  // reading the matmul and einsum results the forward loop saved
  // (passes/Autodiff.cpp, docs/loops.md): less memory, more compute.
  bool remat = false;
  // Weight-update sharding (passes/UpdateSharding.h): a training step's
  // update of a param replicated over the data-parallel axes is split over
  // them (reduce_scatter, 1/N of the update and states, all_gather).
  // `--no-update-sharding` turns it off.
  bool updateSharding = true;

  const Optimizer* findOptimizer(const std::string& name) const;
  const Mesh* findMesh(const std::string& name) const;
  const Param* findParam(const std::string& name) const;
  Function* findFunction(const std::string& name) const;
};

// The one local-shape rule: the block of a `t` value that lies as `s` on
// each device has every split dim divided by the number of its blocks (the
// product of its mesh axes' sizes), rounded up (no sharding, or a
// replicated one: the whole shape). A dim its blocks do not divide is
// padded, GSPMD-style: the value lies as the "padded whole" of
// blocks * ceil(size / blocks) rows split evenly, so the last ranks' blocks
// end in padding rows (docs/sharding.md, "Uneven dims"). A mesh the module
// lacks is an internal error.
Shape localShape(const Module& m, const TensorType& t, const std::optional<Sharding>& s);
// Each dim's number of blocks under `s` (1 where it is not split).
std::vector<int64_t> blocksPerDim(const Module& m, const TensorType& t, const std::optional<Sharding>& s);
// Each dim's padding rows under `s`: blocks * ceil(size / blocks) - size
// (0 where the blocks divide the dim).
std::vector<int64_t> paddingPerDim(const Module& m, const TensorType& t, const std::optional<Sharding>& s);
// Whether some dim of `t` is padded under `s`.
bool isPadded(const Module& m, const TensorType& t, const std::optional<Sharding>& s);
// The inverse of localShape for an evenly split value: the whole shape of a
// `local` block lying as `s` (a padded value's whole shape is not its
// block's: callers that may meet one keep the whole type).
Shape globalShape(const Module& m, const TensorType& local, const std::optional<Sharding>& s);

}  // namespace gsl::ir
