#!/bin/sh
# `gsl run --max-memory`: a program whose per-rank peak (params + optimizer
# states + the largest computation, from the JIT buffer planner) is over
# the limit is refused before anything runs, with both figures; the same
# program made small with -D runs; under --mpi the check happens once,
# before mpirun starts; a malformed size is a usage error.
# Usage: max_memory_test.sh GSL
set -u
GSL=$1
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
cp "$HERE/big_activation.gsl" "$HERE/../training/resume.gsl" .
fail() { echo "FAIL: $*"; echo "--- stderr:"; cat err.txt; exit 1; }

# expect RC CMD...: runs CMD (stdout to out.txt, stderr to err.txt), checks the exit status.
expect() {
  want=$1
  shift
  "$@" > out.txt 2> err.txt
  rc=$?
  [ "$rc" = "$want" ] || fail "'$*' exited $rc, expected $want"
}

# 1. Over an explicit limit: the exact message (the statement that needs
# the most, both figures, the parts) and nothing run.
expect 1 "$GSL" run big_activation.gsl --max-memory 8G
cat > want.txt <<'END'
big_activation.gsl:10:11: error: the run needs about 74.5 GiB of memory per rank, more than the limit of 8.0 GiB per rank (--max-memory 8G)
      let y = x + x
              ^
gsl: note: per rank: params 390.6 KiB, optimizer states 0 B, and 74.5 GiB for the largest computation, shown above (inputs 37.3 GiB, intermediates 0 B, results 37.3 GiB)
END
cmp -s want.txt err.txt || { diff want.txt err.txt; fail "message differs"; }
[ ! -s out.txt ] || fail "the program ran"
echo "1. $(head -n1 err.txt)"

# 2. -D makes it small: it fits and runs.
expect 0 "$GSL" run big_activation.gsl -D N=100 --max-memory 8G
[ "$(cat out.txt)" = "sum 20000.0" ] || fail "-D N=100 printed '$(cat out.txt)'"
echo "2. -D N=100: runs"

# 3. The default limit, the available memory shared by the ranks (N = 3e6:
# 65 TiB, more than any machine has).
expect 1 "$GSL" run big_activation.gsl -D N=3000000 -np 2
head -n1 err.txt | grep -Eqx "big_activation.gsl:10:11: error: the run needs about 65\.5 TiB of memory per rank, more than the limit of [0-9.]+ [KMGT]iB per rank \(the available memory, [0-9.]+ [KMGT]iB, shared by 2 ranks; --max-memory sets the limit\)" \
  || fail "default limit: unexpected message"
echo "3. $(head -n1 err.txt)"

# 4. Under --mpi: refused once, before mpirun starts (no rank prints it).
start=$(date +%s.%N)
expect 1 "$GSL" run big_activation.gsl --mpi -np 4 --max-memory 512M
[ "$(grep -c 'error:' err.txt)" = 1 ] || fail "--mpi: the error is not reported exactly once"
head -n1 err.txt | grep -q "more than the limit of 512.0 MiB per rank (--max-memory 512M)$" || fail "--mpi: unexpected message"
grep -q "mpirun\|MPI_ABORT" err.txt && fail "--mpi: mpirun was started"
echo "4. --mpi: refused before mpirun, in $(echo "$(date +%s.%N) - $start" | bc)s"

# 5. Training: the optimizer's states count (adam: two per param element).
expect 1 "$GSL" run resume.gsl -np 4 --max-memory 1K
grep -q "^gsl: note: per rank: params 96 B, optimizer states 192 B, and " err.txt || fail "training: states not counted"
echo "5. $(tail -n1 err.txt)"

# 6. Sizes: suffixes and a malformed one.
expect 0 "$GSL" run big_activation.gsl -D N=100 --max-memory 1.5g
expect 0 "$GSL" run big_activation.gsl -D N=100 --max-memory 0
expect 2 "$GSL" run big_activation.gsl --max-memory 8x
grep -qx "gsl: usage error: --max-memory expects a size such as 512M or 8G, got '8x'" err.txt || fail "usage error message"
echo "6. $(cat err.txt)"
echo "PASS"
