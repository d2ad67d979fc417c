#!/bin/bash
# Time to the first training step, cold vs warm compile cache
# (docs/compile-cache.md):
#   bench/first_step.sh GSL [PROGRAM] [NP] [RUNS]
# Each run starts `gsl run PROGRAM -np NP --log L` in a scratch directory
# and measures the wall time from its start until the first step's line
# appears in L (polled every 10 ms), then stops the run. Cold: an empty
# cache directory each time; warm: a directory filled by one earlier run.
# Prints the median of RUNS runs of each and their ratio (warm / cold),
# both measured in this invocation. Never used as a test (timings vary).
set -u
gsl=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
src=$(cd "$(dirname "$0")/.." && pwd)
prog=$(cd "$src" && realpath "${2:-examples/transformer.gsl}")
np=${3:-2}
runs=${4:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

now() { date +%s.%N; }
# first_step CACHE_DIR: seconds until the first step is logged.
first_step() {
  local log="$tmp/log.jsonl"
  rm -f "$log"
  local t0 pid
  t0=$(now)
  (cd "$tmp" && exec "$gsl" run "$prog" -np "$np" --cache-dir "$1" --log "$log" --no-progress >/dev/null 2>&1) &
  pid=$!
  while ! [ -s "$log" ]; do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "gsl run ended before its first step" >&2
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
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

cold=()
warm=()
first_step "$tmp/warm-cache" >/dev/null  # fills the warm cache
for i in $(seq 1 "$runs"); do
  cold+=("$(first_step "$tmp/cold-$i")")
  warm+=("$(first_step "$tmp/warm-cache")")
done
c=$(printf '%s\n' "${cold[@]}" | median)
w=$(printf '%s\n' "${warm[@]}" | median)
printf 'program %s -np %s, %s runs each\n' "$(basename "$prog")" "$np" "$runs"
printf 'cold: %s s (median of %s)\n' "$c" "${cold[*]}"
printf 'warm: %s s (median of %s)\n' "$w" "${warm[*]}"
printf 'warm / cold: %.3f\n' "$(echo "$w / $c" | bc -l)"
