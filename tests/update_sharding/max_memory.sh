#!/bin/sh
# max_memory.sh GSL ROOT: a model that does not fit replicated trains when
# sharded (issue 29). At -np 4 with --max-memory between the two estimates,
# examples/transformer.gsl replicated (-D DP=4 --no-update-sharding) is
# refused with the memory diagnostic (exit 1, nothing run) and the same
# model with -D FSDP=1 trains, on threads and as MPI ranks.
set -u
GSL=$1
ROOT=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
P="$ROOT/examples/transformer.gsl"
A="-np 4 -D DP=4 -D D=512 -D NH=8 -D HD=64 -D H=2048 -D L=4 -D STEPS=2"
fail() { echo "FAIL: $*"; exit 1; }
total() {  # total ARGS...: the estimate per rank, bytes
  # shellcheck disable=SC2086
  "$GSL" compile "$P" $A "$@" --stats json | python3 -c "import json,sys; print(json.load(sys.stdin)['memory']['total_bytes'])"
}
rep=$(total --no-update-sharding) || fail "estimate, replicated"
fsdp=$(total -D FSDP=1) || fail "estimate, FSDP"
[ "$fsdp" -lt "$rep" ] || fail "FSDP's estimate ($fsdp) is not below the replicated one ($rep)"
limit=$(( (rep + fsdp) / 2 ))
echo "estimates per rank: replicated $((rep >> 20)) MiB, FSDP $((fsdp >> 20)) MiB; --max-memory $limit"
for mode in "" --mpi; do
  # shellcheck disable=SC2086
  "$GSL" run "$P" $A --no-update-sharding --max-memory "$limit" $mode --no-progress > out.txt 2> err.txt
  rc=$?
  [ $rc = 1 ] || { cat err.txt; fail "replicated $mode: exit $rc, expected 1"; }
  grep -q "error: the run needs about .* of memory per rank, more than the limit of" err.txt ||
    { cat err.txt; fail "replicated $mode: no memory diagnostic"; }
  grep -q "^step" out.txt && fail "replicated $mode: a step ran"
  # shellcheck disable=SC2086
  "$GSL" run "$P" $A -D FSDP=1 --max-memory "$limit" $mode --no-progress > out.txt 2> err.txt ||
    { cat err.txt; fail "FSDP $mode did not train"; }
  grep -q "^step 1 loss" out.txt || { cat out.txt; fail "FSDP $mode: no step 1"; }
  echo "${mode:-threads}: replicated refused (exit 1), FSDP trained"
done
echo PASS
