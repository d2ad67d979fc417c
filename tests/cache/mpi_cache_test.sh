#!/bin/sh
# The ranks of one host share the compile cache under --mpi
# (docs/compile-cache.md): on a cold cache, for each rank program one rank
# compiles and the other waits on the entry's lock and loads it, so the
# ranks together compile each program once; a warm run compiles nothing.
# The numbers equal a run on threads.   usage: mpi_cache_test.sh GSL SOURCE_DIR
set -eu
GSL=$1
SRC=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T"
fail() { echo "mpi_cache_test: $*" >&2; exit 1; }
PROG="$SRC/tests/training/mlp_adam.gsl"
ARGS="-np 2 -D DP=2 -D MP=1 --no-progress"

# The reference: threads, its own cold cache; N programs compiled.
"$GSL" run "$PROG" $ARGS --cache-dir threads --cache-stats > threads.out 2> threads.err || fail "threads run failed"
[ -s threads.out ] || fail "threads run printed nothing"
n=$(sed -n 's/^gsl: compile cache: 0 loaded, \([0-9]*\) compiled, 0 rebuilt$/\1/p' threads.err)
[ -n "$n" ] && [ "$n" -gt 0 ] || fail "threads run: no stats line: $(cat threads.err)"

# stats FILE: "loaded compiled" summed over the ranks' lines (exactly 2).
stats() {
  lines=$(grep -c '^gsl: compile cache (rank [01]): ' "$1" || true)
  [ "$lines" = 2 ] || fail "$1: $lines rank stats lines: $(cat "$1")"
  sed -n 's/^gsl: compile cache (rank [01]): \([0-9]*\) loaded, \([0-9]*\) compiled, 0 rebuilt$/\1 \2/p' "$1" |
    awk '{l += $1; c += $2} END {print l, c}'
}

# Cold: each program compiled by one rank and loaded by the other.
"$GSL" run "$PROG" $ARGS --mpi --cache-dir mpi --cache-stats > cold.out 2> cold.err || fail "cold --mpi run failed: $(cat cold.err)"
[ "$(stats cold.err)" = "$n $n" ] || fail "cold --mpi: loaded, compiled = $(stats cold.err), expected $n $n"
[ "$(ls mpi/*.o | wc -l)" = "$n" ] || fail "cold --mpi: $(ls mpi/*.o | wc -l) entries, expected $n"
cmp -s cold.out threads.out || fail "cold --mpi printed other numbers than threads"

# Warm: both ranks load every program.
"$GSL" run "$PROG" $ARGS --mpi --cache-dir mpi --cache-stats > warm.out 2> warm.err || fail "warm --mpi run failed"
[ "$(stats warm.err)" = "$((2 * n)) 0" ] || fail "warm --mpi: loaded, compiled = $(stats warm.err), expected $((2 * n)) 0"
cmp -s warm.out threads.out || fail "warm --mpi printed other numbers than threads"
echo PASS
