#!/bin/bash
# Where a training step's time goes (issue 32): bench_train_step profile at
# the two widths docs/benchmarks.md reports, examples/transformer.gsl at
# -np 1 (B=16, S=16, V=16, f32, the JIT):
#   D=256:  NH=8, HD=32,  H=1024, L=2 (the example's depth)
#   D=1024: NH=8, HD=128, H=4096, L=8 (about 100M params)
# Each prints the f32 GEMM's peak measured in the same process (a 1024^3
# matmul), the step's GFLOP/s against it (3 x the forward FLOPs over the
# process CPU time per step, code without the op timer), and the op
# timer's table (backend/jit/KernelProfile.h): the time per step of each
# kernel class and of each GEMM shape. REPS runs of each (default 1).
#   bench/step_profile.sh BUILD_DIR [REPS]
# Never used as a test (timings vary with the load).
set -eu
build=$(cd "${1:-build}" && pwd)
reps=${2:-1}
cd "$(mktemp -d)"  # the example saves a checkpoint in the working directory
for r in $(seq "$reps"); do
  "$build/bench/bench_train_step" profile 256 8 32 1024 2 10 40
  echo
  "$build/bench/bench_train_step" profile 1024 8 128 4096 8 2 6
  echo
done
