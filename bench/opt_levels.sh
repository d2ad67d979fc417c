#!/bin/bash
# Compile time and step time of the JIT's optimisation / code generation
# levels and code generation threads (JitOptions.h: GSL_JIT_OPT,
# GSL_JIT_CODEGEN, GSL_JIT_COMPILE_THREADS), each as paired runs against
# the reference O3 / Aggressive / one thread in the same call of farm-bench:
#   bench/opt_levels.sh GSL [PROGRAM] [RUNS]
# Compile: `gsl compile PROGRAM --time-passes` (never the cache), A/B of
# CPU seconds (and wall seconds for the threads). Step: `gsl run` of 600
# steps with a warm cache (the levels are part of the cache key), A/B of
# CPU seconds. Never used as a test (timings vary with the load).
set -u
gsl=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
src=$(cd "$(dirname "$0")/.." && pwd)
prog=$(cd "$src" && realpath "${2:-examples/transformer.gsl}")
runs=${3:-3}
args="-np 1 -D DP=1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ref="GSL_JIT_COMPILE_THREADS=1 GSL_JIT_OPT=3 GSL_JIT_CODEGEN=3"
# shellcheck disable=SC2086
for v in "GSL_JIT_COMPILE_THREADS=1 GSL_JIT_OPT=2 GSL_JIT_CODEGEN=3" "GSL_JIT_COMPILE_THREADS=1 GSL_JIT_OPT=3 GSL_JIT_CODEGEN=1" \
         "GSL_JIT_COMPILE_THREADS=1 GSL_JIT_OPT=2 GSL_JIT_CODEGEN=1" "GSL_JIT_COMPILE_THREADS=2 GSL_JIT_OPT=2 GSL_JIT_CODEGEN=1"; do
  echo "compile, A: $v; B: $ref"
  farm-bench -n "$runs" --warmup 0 --timeout 1800 --vs "env $ref $gsl compile $prog $args --time-passes" -- \
    env $v "$gsl" compile "$prog" $args --time-passes 2>&1 | grep -E "A/B (cpu|wall)"
done
for v in "GSL_JIT_OPT=2 GSL_JIT_CODEGEN=1"; do
  step="run $prog $args -D STEPS=600 --cache-dir $tmp/cache --no-progress"
  env $v "$gsl" run "$prog" $args -D STEPS=2 --cache-dir "$tmp/cache" --no-progress >/dev/null 2>&1
  env GSL_JIT_OPT=3 GSL_JIT_CODEGEN=3 "$gsl" run "$prog" $args -D STEPS=2 --cache-dir "$tmp/cache" --no-progress >/dev/null 2>&1
  echo "600 steps, warm cache, A: $v; B: GSL_JIT_OPT=3 GSL_JIT_CODEGEN=3"
  farm-bench -n $((runs * 2 + 1)) --timeout 600 --vs "env GSL_JIT_OPT=3 GSL_JIT_CODEGEN=3 $gsl $step" -- \
    env $v "$gsl" $step 2>&1 | grep -E "A/B cpu"
done
