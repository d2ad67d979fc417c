#!/bin/sh
# memory_estimate.sh GSL ROOT: the run's memory estimate per rank (`gsl
# compile --stats json`, "memory"."total_bytes": what --max-memory checks)
# against the measured peak RSS per rank of the same run: examples/
# transformer.gsl at D=768, L=4 (28M params, Adam), 3 steps and the
# checkpoint save. Measured per rank: (peak RSS - the RSS of a trivial
# program) / ranks per process (threads), or the largest rank process's
# peak RSS less the same under MPI (--mpi). Each run goes twice, the second
# measured (the compile cache warm: the JIT's compiler memory is no model's).
# The estimate (`gsl compile --stats json`, with --mpi for MPI ranks) must
# be within 15% of the measured, threads and --mpi, replicated and FSDP;
# every ratio is printed.
set -u
GSL=$1
ROOT=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
export XDG_CACHE_HOME="$T/cache"
fail=0
SIZE="-D D=768 -D NH=8 -D HD=96 -D H=3072 -D L=4 -D STEPS=3"
rss() { { /usr/bin/time -f "%M" "$GSL" run "$@" --no-progress > /dev/null; } 2>&1 | tail -n 1; }
base=$(rss "$ROOT/tests/update_sharding/no_optimizer.gsl")
mbase=$(rss "$ROOT/tests/update_sharding/no_optimizer.gsl" --mpi -np 4)
check() {  # check BOUND ARGS...
  bound=$1
  shift
  args="$*"
  # shellcheck disable=SC2086
  est=$("$GSL" compile "$ROOT/examples/transformer.gsl" $args $SIZE --stats json |
        python3 -c "import json,sys; print(json.load(sys.stdin)['memory']['total_bytes'])") || { echo "FAIL: compile $*"; fail=1; return; }
  # shellcheck disable=SC2086
  rss "$ROOT/examples/transformer.gsl" "$@" $SIZE > /dev/null
  # shellcheck disable=SC2086
  got=$(rss "$ROOT/examples/transformer.gsl" "$@" $SIZE)
  np=$(echo "$*" | sed -n 's/.*-np \([0-9]*\).*/\1/p')
  case "$*" in
    *--mpi*) per=$(( (got - mbase) * 1024 )) ;;
    *) per=$(( (got - base) * 1024 / np )) ;;
  esac
  r=$(python3 -c "print('%.3f' % ($per / $est))")
  echo "$*: estimate $((est >> 20)) MiB, measured $((per >> 20)) MiB per rank, measured/estimate $r"
  python3 -c "import sys; sys.exit(0 if abs($r - 1) <= $bound else 1)" || { echo "FAIL: off by more than $bound"; fail=1; }
}
check 0.15 -np 1 -D DP=1
check 0.15 -np 4 -D DP=4
check 0.15 -np 4 -D DP=4 -D FSDP=1
check 0.15 -np 4 -D DP=4 --mpi
check 0.15 -np 4 -D DP=4 -D FSDP=1 --mpi
[ $fail = 0 ] && echo PASS
