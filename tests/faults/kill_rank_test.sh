#!/bin/sh
# A rank killed from outside (SIGKILL) during `gsl run --mpi -np 4` ends
# every rank within a few seconds, with a non-zero exit and a message
# naming the killed rank.
# Usage: kill_rank_test.sh GSL
# GSL_TEST_TIME_SCALE (default 1) multiplies the time limits (make test-asan).
set -u
GSL=$1
S=${GSL_TEST_TIME_SCALE:-1}
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d)
cd "$T" || exit 1
fail() { echo "FAIL: $*"; cat err.txt 2>/dev/null; exit 1; }
cleanup() {
  [ -n "${gsl_pid:-}" ] && kill -9 "$gsl_pid" 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT

"$GSL" run "$HERE/collectives.gsl" --mpi -np 4 > out.txt 2> err.txt &
gsl_pid=$!

# The launcher (gsl) -> mpirun -> the 4 rank processes; wait until they all
# run and rank 0 has printed (they are inside the loop of collectives).
ranks=""
i=0
while [ $i -lt $((1200 * S)) ]; do
  mpirun_pid=$(pgrep -P "$gsl_pid" mpirun)
  if [ -n "$mpirun_pid" ] && grep -q "^step" out.txt 2>/dev/null; then
    ranks=$(pgrep -P "$mpirun_pid")
    [ "$(echo "$ranks" | wc -w)" = 4 ] && break
  fi
  kill -0 "$gsl_pid" 2>/dev/null || fail "the run ended before the kill"
  sleep 0.1
  i=$((i + 1))
done
[ "$(echo "$ranks" | wc -w)" = 4 ] || fail "did not find 4 rank processes under mpirun"

# Rank 2's process: OMPI_COMM_WORLD_RANK in its environment.
victim=""
for p in $ranks; do
  if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=2"; then victim=$p; fi
done
[ -n "$victim" ] || fail "no process of rank 2"

start=$(date +%s.%N)
kill -9 "$victim"
# Every rank must end within 10 s.
i=0
while kill -0 "$gsl_pid" 2>/dev/null && [ $i -lt $((100 * S)) ]; do sleep 0.1; i=$((i + 1)); done
if kill -0 "$gsl_pid" 2>/dev/null; then fail "the run still runs $((10 * S)) s after rank 2 was killed (hang)"; fi
wait "$gsl_pid"
rc=$?
gsl_pid=""
elapsed=$(echo "$(date +%s.%N) - $start" | bc)
# No rank process may survive (a zombie, dead but not yet reaped, is ended).
for p in $ranks; do
  st=$(ps -o stat= -p "$p" 2>/dev/null)
  case "$st" in ""|Z*) ;; *) ps -o pid,ppid,stat,cmd -p "$p"; fail "rank process $p survives" ;; esac
done
cat err.txt
echo "kill_rank_test: exit status $rc, every rank ended ${elapsed}s after the kill"
[ "$rc" -ne 0 ] || fail "exit status 0"
grep -qxE "gsl: error: rank 2 on host [^ ]+ was killed by signal 9 \(Killed\); the other ranks were stopped" err.txt \
  || fail "no message naming rank 2"
echo "PASS"
