#!/bin/sh
# A bare `mpirun -np 4 gsl run examples/mlp.gsl` (no -np to gsl, as under
# srun): every rank takes NP from the MPI world size and the run prints
# what `gsl run -np 4` prints on threads. A -np that disagrees with the
# world size is a usage error (exit 2) naming both, printed once.
#   bare_mpirun_test.sh MPIRUN_SH GSL SOURCE_DIR
set -u
mpirun_sh=$1
GSL=$2
SRC=$3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
fail() { echo "FAIL: $*"; cat err.txt 2> /dev/null; exit 1; }

"$GSL" run "$SRC/examples/mlp.gsl" -np 4 > want.txt 2> err.txt || fail "thread run"
timeout 120 "$mpirun_sh" -np 4 "$GSL" run "$SRC/examples/mlp.gsl" > out.txt 2> err.txt || fail "bare mpirun -np 4"
cmp -s want.txt out.txt || { diff want.txt out.txt; fail "bare mpirun printed other lines than gsl run -np 4"; }
echo "ok   bare mpirun -np 4: $(cat out.txt)"

timeout 120 "$mpirun_sh" -np 2 "$GSL" run "$SRC/examples/mlp.gsl" -np 4 > out.txt 2> err.txt && fail "a disagreeing -np ran"
want="gsl: usage error: -np 4 disagrees with the MPI world size 2 (the ranks mpirun or srun started); leave out -np or give -np 2"
[ "$(grep -c '^gsl: ' err.txt)" = 1 ] || fail "expected one gsl message"
grep -qxF "$want" err.txt || fail "no message '$want'"
echo "ok   $want"
echo PASS
