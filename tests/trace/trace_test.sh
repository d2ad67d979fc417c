#!/bin/sh
# gsl run --trace (docs/trace.md): the file is valid trace-event JSON with a
# track per rank and the expected events; -np 2 --mpi merges both ranks'
# events; a missing directory is a clean error; an existing file is only
# replaced at the end.  usage: trace_test.sh GSL SOURCE_DIR
set -eu
GSL=$1
SRC=$2
CHECK="python3 $SRC/tests/trace/check_trace.py"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T"

# Threads, -np 4: all_reduce bytes match the cost model's for mlp, 3 calls.
"$GSL" compile "$SRC/tests/trace/forward.gsl" -np 4 --stats json > stats.json
"$GSL" run "$SRC/tests/trace/forward.gsl" -np 4 --trace fwd.json
$CHECK fwd.json 4 --stats stats.json mlp 3

# Training: every rank's 30 steps, with their all_reduce inside.
"$GSL" run "$SRC/tests/training/mlp_adam.gsl" -np 4 -D DP=4 -D MP=1 --no-progress --trace train.json > /dev/null
$CHECK train.json 4 --steps 30

# MPI: both ranks in one file, no temp files left.
"$GSL" compile "$SRC/tests/trace/forward.gsl" -np 2 --stats json > stats2.json
"$GSL" run "$SRC/tests/trace/forward.gsl" -np 2 --mpi --trace mpi.json
$CHECK mpi.json 2 --stats stats2.json mlp 3
if ls | grep -q tmp; then echo "trace_test: temp files left: $(ls)" >&2; exit 1; fi

# A missing directory: a clean error, exit 1, nothing run.
set +e
"$GSL" run "$SRC/tests/trace/forward.gsl" -np 2 --trace no/such/dir/t.json > out.txt 2> err.txt
rc=$?
set -e
[ "$rc" = 1 ] || { echo "trace_test: missing directory: exit $rc" >&2; exit 1; }
grep -qx "gsl: error: cannot write the trace file: directory 'no/such/dir' does not exist" err.txt ||
  { echo "trace_test: unexpected message: $(cat err.txt)" >&2; exit 1; }

# An existing file is replaced only at the end: a run that fails leaves it
# as it was; a run that succeeds replaces it whole.
echo old > keep.json
printf 'fn main() {\n  let x = load("missing.npy") : f32[4]\n  print(x)\n}\n' > bad.gsl
if "$GSL" run bad.gsl --trace keep.json > /dev/null 2>&1; then echo "trace_test: bad.gsl ran" >&2; exit 1; fi
[ "$(cat keep.json)" = old ] || { echo "trace_test: a failed run changed the trace file" >&2; exit 1; }
"$GSL" run "$SRC/tests/trace/forward.gsl" -np 2 --trace keep.json
$CHECK keep.json 2
echo "trace_test: ok"
