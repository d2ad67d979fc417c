#!/bin/bash
# Time to the first training step (docs/compile-cache.md), all measured in
# this invocation, medians of RUNS runs each:
#   bench/first_step.sh GSL [PROGRAM] [NP] [RUNS] [MPI_NP]
#   - gsl -np NP, cold cache (an empty cache directory each time);
#   - gsl -np NP, warm cache (a directory filled by one earlier run);
#   - gsl -np MPI_NP --mpi, cold cache (the ranks share it: one compiles,
#     the others wait for its entries);
#   - PyTorch's start of the same model (bench/first_step_torch.py, CPU
#     eager, one thread), for examples/transformer.gsl only;
#   - for examples/transformer.gsl, gsl -np NP cold at -D L=1 and -D L=8
#     (depth; the ratio 8 layers / 1 layer).
# NP_ARGS / MPI_ARGS: further gsl arguments for the NP / MPI_NP runs
# (default for transformer.gsl at -np 1: -D DP=1, as its mesh needs).
# Each run is started in a scratch directory, and its time is the wall
# time from its start until its first step's line appears in its log
# (--log for gsl; polled every 10 ms); then the run is stopped. Prints the
# medians and the ratios warm / cold, cold / PyTorch, warm / PyTorch and
# MPI cold / NP cold. Never used as a test (timings vary with the load).
set -u
gsl=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
src=$(cd "$(dirname "$0")/.." && pwd)
. "$src/bench/openblas_env.sh"
prog=$(cd "$src" && realpath "${2:-examples/transformer.gsl}")
np=${3:-1}
runs=${4:-3}
mpinp=${5:-4}
np_args=${NP_ARGS:-}
mpi_args=${MPI_ARGS:-}
if [ -z "${NP_ARGS+x}" ] && [ "$np" = 1 ] && [ "$(basename "$prog")" = transformer.gsl ]; then np_args="-D DP=1"; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

now() { date +%s.%N; }
# first_step CMD...: seconds until CMD (run in $tmp) logs its first step
# into $tmp/log.jsonl.
first_step() {
  local log="$tmp/log.jsonl"
  rm -f "$log"
  local t0 pid
  t0=$(now)
  (cd "$tmp" && exec "$@" >/dev/null 2>&1) &
  pid=$!
  while ! [ -s "$log" ]; do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "first_step: '$*' ended before its first step" >&2
      exit 1
    fi
    sleep 0.01
  done
  local t1
  t1=$(now)
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  echo "$t1 - $t0" | bc -l
}
gsl_step() {  # gsl_step CACHE_DIR NP ARGS (split on spaces)
  # shellcheck disable=SC2086
  first_step "$gsl" run "$prog" -np "$2" $3 --cache-dir "$1" --log "$tmp/log.jsonl" --no-progress
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# A Python with PyTorch (the distribution's python3-torch lives in /usr/bin/python3).
torchpy=""
if [ "$(basename "$prog")" = transformer.gsl ]; then
  for p in python3 /usr/bin/python3; do
    if "$p" -c 'import torch' 2>/dev/null; then torchpy=$p; break; fi
  done
fi

cold=()
warm=()
mpi=()
torch=()
l1=()
l8=()
gsl_step "$tmp/warm-cache" "$np" "$np_args" >/dev/null  # fills the warm cache
for i in $(seq 1 "$runs"); do
  cold+=("$(gsl_step "$tmp/cold-$i" "$np" "$np_args")")
  warm+=("$(gsl_step "$tmp/warm-cache" "$np" "$np_args")")
  mpi+=("$(gsl_step "$tmp/mpi-$i" "$mpinp" "--mpi $mpi_args")")
  [ -n "$torchpy" ] && torch+=("$(first_step "$torchpy" "$src/bench/first_step_torch.py" "$tmp/log.jsonl")")
  if [ "$(basename "$prog")" = transformer.gsl ]; then
    l1+=("$(gsl_step "$tmp/l1-$i" "$np" "$np_args -D L=1")")
    l8+=("$(gsl_step "$tmp/l8-$i" "$np" "$np_args -D L=8")")
  fi
done
c=$(printf '%s\n' "${cold[@]}" | median)
w=$(printf '%s\n' "${warm[@]}" | median)
m=$(printf '%s\n' "${mpi[@]}" | median)
printf 'program %s (-np %s %s; --mpi %s), %s runs each, load average %s\n' "$(basename "$prog")" "$np" "$np_args" "$mpi_args" "$runs" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf 'cold -np %s: %s s (median of %s)\n' "$np" "$c" "${cold[*]}"
printf 'warm -np %s: %s s (median of %s)\n' "$np" "$w" "${warm[*]}"
printf 'cold -np %s --mpi: %s s (median of %s)\n' "$mpinp" "$m" "${mpi[*]}"
printf 'warm / cold: %.3f\n' "$(echo "$w / $c" | bc -l)"
printf 'cold -np %s --mpi / cold -np %s: %.3f\n' "$mpinp" "$np" "$(echo "$m / $c" | bc -l)"
if [ -n "$torchpy" ]; then
  t=$(printf '%s\n' "${torch[@]}" | median)
  printf 'PyTorch: %s s (median of %s)\n' "$t" "${torch[*]}"
  printf 'cold / PyTorch: %.3f\n' "$(echo "$c / $t" | bc -l)"
  printf 'warm / PyTorch: %.3f\n' "$(echo "$w / $t" | bc -l)"
else
  echo "PyTorch: not measured (no python3 with torch, or not examples/transformer.gsl)"
fi
if [ ${#l1[@]} -gt 0 ]; then
  a=$(printf '%s\n' "${l1[@]}" | median)
  b=$(printf '%s\n' "${l8[@]}" | median)
  printf 'cold -np %s -D L=1: %s s (median of %s)\n' "$np" "$a" "${l1[*]}"
  printf 'cold -np %s -D L=8: %s s (median of %s)\n' "$np" "$b" "${l8[*]}"
  printf 'cold L=8 / L=1: %.3f\n' "$(echo "$b / $a" | bc -l)"
fi
