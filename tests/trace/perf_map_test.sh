#!/bin/bash
# gsl run --perf-map: the JIT's functions in /tmp/perf-PID.map, the file
# perf report reads to name JIT code (docs/trace.md):
#   perf_map_test.sh GSL SRC
# Every line is "address size name" in hex; the rank programs' entry
# functions and their kernels (NAME.kN) are there, at distinct addresses;
# the run's output is the same as without the flag; without it no map is
# written.
set -u
gsl=$1
src=$2
tmp=$(mktemp -d)
fail() {
  echo "FAIL: $1"
  exit 1
}
run() {  # run OUT [FLAGS...]: the run's pid in $pid
  local out=$1
  shift
  "$gsl" run "$src/examples/mlp.gsl" -np 2 --no-cache --no-progress "$@" >"$out" 2>&1 &
  pid=$!
  wait "$pid" || fail "gsl run $* failed: $(cat "$out")"
}
trap 'rm -rf "$tmp"; rm -f "/tmp/perf-${with:-x}.map" "/tmp/perf-${without:-x}.map"' EXIT
run "$tmp/with.out" --perf-map
with=$pid
map=/tmp/perf-$with.map
[ -s "$map" ] || fail "no $map"
grep -vqE '^[0-9a-f]+ [0-9a-f]+ gsl_fn_[0-9a-f]{32}' "$map" && fail "a line that is not 'address size gsl_fn_...': $(grep -vE '^[0-9a-f]+ [0-9a-f]+ gsl_fn_' "$map" | head -1)"
grep -qE ' gsl_fn_[0-9a-f]{32}$' "$map" || fail "no entry function in $map"
grep -qE ' gsl_fn_[0-9a-f]{32}\.k[0-9]+$' "$map" || fail "no kernel in $map"
[ "$(cut -d' ' -f1 "$map" | sort | uniq -d | wc -l)" = 0 ] || fail "two functions at one address in $map"
run "$tmp/without.out"
without=$pid
[ -e "/tmp/perf-$without.map" ] && fail "a map without --perf-map"
cmp -s "$tmp/with.out" "$tmp/without.out" || fail "the output differs with --perf-map"
echo PASS
