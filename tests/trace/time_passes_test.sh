#!/bin/sh
# gsl compile --time-passes: the report has a row per phase (front end,
# each global pass, each per-rank pass and the JIT's phases, counted once
# per rank program), rows that add up to the total, and program, op and
# kernel counts that match the per-rank programs `--emit spmd` prints.
# Times are not asserted, only the report's structure and counts.
#   usage: time_passes_test.sh GSL SOURCE_DIR
set -eu
GSL=$1
SRC=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T"

check() {  # check NAME ARGS...: report vs --emit spmd of the same ARGS
  name=$1
  shift
  "$GSL" compile "$@" --time-passes > "$name.out" 2> "$name.report" || {
    echo "time_passes_test: $name: gsl compile --time-passes failed" >&2
    cat "$name.report" >&2
    exit 1
  }
  [ -s "$name.out" ] && { echo "time_passes_test: $name: wrote to stdout" >&2; exit 1; }
  "$GSL" compile "$@" --emit spmd > "$name.spmd"
  python3 "$SRC/tests/trace/check_time_passes.py" "$name.report" "$name.spmd" || exit 1
}

check mlp "$SRC/examples/mlp.gsl" -np 4
check train "$SRC/tests/training/mlp_adam.gsl" -np 4 -D DP=4 -D MP=1
check one "$SRC/examples/mlp.gsl" -np 4 --fn mlp

# With --emit, the stage still goes to stdout and the report to stderr.
"$GSL" compile "$SRC/examples/mlp.gsl" -np 4 --fn mlp --emit spmd --time-passes > both.out 2> both.err
grep -q '^func @mlp' both.out || { echo "time_passes_test: --emit spmd output missing" >&2; exit 1; }
grep -q '^  total ' both.err || { echo "time_passes_test: report missing with --emit" >&2; exit 1; }

# An unknown --fn is a clean error.
set +e
"$GSL" compile "$SRC/examples/mlp.gsl" -np 4 --fn nope --time-passes > /dev/null 2> nofn.err
rc=$?
set -e
[ "$rc" = 1 ] && grep -q "error: no function 'nope'" nofn.err ||
  { echo "time_passes_test: unknown --fn: rc $rc: $(cat nofn.err)" >&2; exit 1; }
echo PASS
