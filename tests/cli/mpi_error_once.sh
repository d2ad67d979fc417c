#!/usr/bin/env bash
# mpi_error_once.sh GSL SRC: a run-time error that every rank hits (a
# missing file) is printed once under --mpi, not once per rank.
set -u
gsl=$1 src=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
"$gsl" run "$src/tests/diag/run/missing_file.gsl" --mpi -np 3 2>err.txt
rc=$?
fail=0
[ "$rc" = 1 ] || { echo "FAIL: exit code $rc, expected 1"; fail=1; }
n=$(grep -c "missing_file.gsl:4:11: error: nope.npy: no such file" err.txt)
[ "$n" = 1 ] || { echo "FAIL: the error is printed $n times, expected once"; fail=1; }
n=$(grep -Ec "^gsl: rank [0-9]+ failed: nope.npy: no such file" err.txt)
[ "$n" = 1 ] || { echo "FAIL: 'rank N failed' is printed $n times, expected once"; fail=1; }
n=$(grep -Ec "^ +\^$" err.txt)
[ "$n" = 1 ] || { echo "FAIL: the caret line is printed $n times, expected once"; fail=1; }
if [ $fail != 0 ]; then cat err.txt; exit 1; fi
echo PASS
