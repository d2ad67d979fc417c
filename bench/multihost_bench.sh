#!/bin/sh
# Across two hosts (issue 17): the two network namespaces of the two-host
# test (tests/multihost/cluster.sh: a veth pair, TCP, 10.77.0.1 and .2).
#  1. bench_collectives_mpi at -np 4, 2 ranks per host, buffers of 64 KiB
#     and 1 MiB per rank (GSL_BENCH_KIB), 5 repetitions: MpiComm's
#     all_reduce and all_to_all against raw MPI_Allreduce / MPI_Alltoall
#     over the same transport (bandwidth and ratio gsl/raw);
#  2. examples/moe.gsl's step time at -np 4 with 2 ranks per host against
#     all 4 ranks on one host (`gsl run --mpi`, shared memory), from the
#     --log of each run (mean of the steps after the first).
# Root only. `make bench-multihost` runs it.
#   multihost_bench.sh GSL BENCH_COLLECTIVES_MPI SOURCE_DIR [STEPS]
set -u
abs() { case $1 in /*) echo "$1" ;; *) echo "$(pwd)/$1" ;; esac; }
GSL=$(abs "$1")
BENCH=$(abs "$2")
SRC=$(cd "$3" && pwd)
STEPS=${4:-12}
MH_DIR=$SRC/tests/multihost
. "$MH_DIR/cluster.sh"
if ! why=$(mh_can_run); then
  echo "multihost_bench: $why"
  exit 77
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/gsl-mhbench.XXXXXX") || exit 1
trap 'mh_down; rm -rf "$T"' EXIT
trap 'exit 1' INT TERM HUP
mh_up || exit 1
printf 'gslnode1 slots=2\ngslnode2 slots=2\n' > "$T/hosts"

# Bytes gslnode2 received on the veth pair: the proof that the ranks
# talked over it (TCP), not through shared memory.
rx() { ip netns exec "${GSL_MH_NS}2" cat /sys/class/net/gsl0/statistics/rx_bytes; }

echo "== collectives, 4 ranks, 2 per host, TCP over a veth pair"
for kib in ${GSL_BENCH_KIB:-64 1024}; do
  before=$(rx)
  mh_on gslnode1 mpirun $MH_MPIRUN_ARGS --hostfile "$T/hosts" -np 4 "$BENCH" --kib $kib --reps 5 < /dev/null || exit 1
  echo "  (gslnode2 received $(( $(rx) - before )) bytes on gsl0)"
done

# Mean seconds per step after the first, from a --log file.
step_time() {
  awk -F'[:,}]' '{ for (i = 1; i < NF; i++) if ($i ~ /"elapsed_s"/) e[NR] = $(i + 1) + 0 }
    END { if (NR < 2) { print "nan"; exit } printf "%.4f", (e[NR] - e[1]) / (NR - 1) }' "$1"
}
ENGINE=${GSL_BENCH_ENGINE:-interp}  # jit: each rank compiles for long on a small machine
MOE="$SRC/examples/moe.gsl -np 4 --engine $ENGINE --no-progress -D STEPS=$STEPS -D EVERY=$STEPS -D EVAL_BATCHES=1"
echo "== examples/moe.gsl, -np 4, $STEPS steps (default sizes, engine $ENGINE)"
(cd "$T" && "$GSL" run $MOE --mpi --log one.jsonl > one.txt < /dev/null) || exit 1
one=$(step_time "$T/one.jsonl")
(cd "$T" && mh_on gslnode1 "$GSL" run $MOE --mpi --hostfile "$T/hosts" --mpirun-args "$MH_MPIRUN_ARGS" \
  --log two.jsonl > two.txt < /dev/null) || exit 1
two=$(step_time "$T/two.jsonl")
echo "  all 4 ranks on one host (shared memory): $one s/step"
echo "  2 ranks per host, two hosts (TCP):        $two s/step"
awk -v a="$one" -v b="$two" 'BEGIN { printf "  ratio two hosts / one host = %.2f\n", b / a }'
