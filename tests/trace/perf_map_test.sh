#!/bin/bash
# gsl run --perf-map: the JIT's functions in /tmp/perf-PID.map, the file
# perf report reads to name JIT code (docs/trace.md):
#   perf_map_test.sh GSL SRC
# Every line is "address size name" in hex; the rank programs' entry
# functions (gsl_fn_HASH) and their kernels, named after their source op
# (mlp.gsl:15.matmul.k0@main.3), are there, at distinct addresses and names;
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
# Entry functions gsl_fn_HASH; kernels FILE:LINE.OP[+N][.loopM].kN@FUNCTION.
entry='gsl_fn_[0-9a-f]{32}'
kernel='mlp\.gsl:[0-9]+\.[a-z_]+(\+[0-9]+)?(\.loop[0-9]+)?\.k[0-9]+@main\.[0-9]+'
grep -vqE "^[0-9a-f]+ [0-9a-f]+ ($entry|$kernel)\$" "$map" &&
  fail "a line that is not 'address size gsl_fn_HASH' or 'address size FILE:LINE.OP.kN@FN': $(grep -vE "^[0-9a-f]+ [0-9a-f]+ ($entry|$kernel)\$" "$map" | head -1)"
grep -qE " $entry\$" "$map" || fail "no entry function in $map"
grep -qE " $kernel\$" "$map" || fail "no kernel in $map"
[ "$(cut -d' ' -f1 "$map" | sort | uniq -d | wc -l)" = 0 ] || fail "two functions at one address in $map"
[ "$(cut -d' ' -f3 "$map" | sort | uniq -d | wc -l)" = 0 ] || fail "two functions of one name in $map"
# mlp's two matmuls (x @ w1, h @ w2) and its relu, at their lines.
for k in 15.matmul 15.relu 16.matmul; do
  grep -qE " mlp\.gsl:$k\.k[0-9]+@main\.[0-9]+\$" "$map" || fail "no kernel mlp.gsl:$k in $map: $(cut -d' ' -f3 "$map" | tr '\n' ' ')"
done
for line in $(grep -oE ' mlp\.gsl:[0-9]+\.matmul' "$map" | sed 's/.*://; s/\..*//'); do
  sed -n "${line}p" "$src/examples/mlp.gsl" | grep -q ' @ ' || fail "a matmul kernel named after line $line of mlp.gsl, which has no @"
done
run "$tmp/without.out"
without=$pid
[ -e "/tmp/perf-$without.map" ] && fail "a map without --perf-map"
cmp -s "$tmp/with.out" "$tmp/without.out" || fail "the output differs with --perf-map"
echo PASS
