#!/bin/sh
# A rank that calls MpiComm::abort must end the whole mpirun quickly (not
# hang), with a non-zero status and a message naming the rank.
# Usage: abort_test.sh MPIRUN_SH TEST_BINARY
mpirun_sh=$1
binary=$2
start=$(date +%s)
out=$(timeout 30 "$mpirun_sh" -np 4 "$binary" --abort 2>&1)
rc=$?
elapsed=$(( $(date +%s) - start ))
printf '%s\n' "$out"
echo "abort_test: exit status $rc after ${elapsed}s"
if [ "$rc" -eq 0 ]; then echo "FAIL: mpirun exited 0"; exit 1; fi
if [ "$rc" -eq 124 ]; then echo "FAIL: mpirun hung (killed by timeout 30)"; exit 1; fi
if ! printf '%s\n' "$out" | grep -q "gsl: rank 2 failed: deliberate test failure"; then
  echo "FAIL: no message naming rank 2"; exit 1
fi
if [ "$elapsed" -gt 20 ]; then echo "FAIL: took ${elapsed}s"; exit 1; fi
echo "abort_test: ok"
