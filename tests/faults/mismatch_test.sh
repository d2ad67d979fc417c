#!/bin/sh
# A collective mismatch between ranks (what a runtime bug would cause) is
# detected and reported, naming both ranks and both calls, on threads and
# under --mpi, and the run ends (no hang). The mismatch is injected with
# the TEST-ONLY hook GSL_TEST_FAULT=mismatch_rank=1 (runtime/TestFaults.h):
# rank 1's first all_reduce is issued as an all_gather.
# Usage: mismatch_test.sh GSL [--mpi]     (threads by default)
# GSL_TEST_TIME_SCALE (default 1) multiplies the time limit (make test-asan).
set -u
GSL=$1
S=${GSL_TEST_TIME_SCALE:-1}
MODE=${2:-}
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
fail() { echo "FAIL ($MODE): $*"; echo "--- stderr:"; cat err.txt; exit 1; }

# (A normal run ends in 1-3 s.)
GSL_TEST_FAULT=mismatch_rank=1 timeout $((60 * S)) "$GSL" run "$HERE/collectives.gsl" $MODE -np 4 > out.txt 2> err.txt
rc=$?
[ "$rc" != 124 ] || fail "hung (killed after $((60 * S)) s)"
[ "$rc" = 1 ] || fail "exit status $rc, expected 1"
want="collective mismatch: rank 0 called all_reduce of 8 bytes but rank 1 called all_gather of 8 bytes"
grep -qx "gsl: error: $want" err.txt || fail "no diagnostic 'gsl: error: $want'"
if [ "$MODE" = --mpi ]; then
  # Each rank in the mismatched call reports it, then MPI_Abort ends the run.
  grep -q "gsl: rank [0-3] failed: $want" err.txt || fail "no rank reported the failure"
fi
[ ! -s out.txt ] || fail "the step after the mismatch printed: $(cat out.txt)"
head -n1 err.txt
echo "PASS"
