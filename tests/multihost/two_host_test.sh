#!/bin/sh
# The two-host test (issue 17, docs/cluster.md): two network namespaces
# joined by a veth pair (tests/multihost/cluster.sh) play two hosts,
# gslnode1 (10.77.0.1) and gslnode2 (10.77.0.2); OpenMPI launches into them
# through tests/multihost/netns_rsh.sh (--mca plm_rsh_agent) and the ranks
# of different hosts talk over TCP on the veth pair. At -np 4, two ranks
# per host:
#  1. an equivalence program (tests/sharding/mlp.gsl) and the MoE example
#     (small sizes, interpreter, 3 steps) print what the thread run prints
#     (numbers within rel 1e-5), via `gsl run --mpi --hostfile`, and so
#     does the Transformer pipelined over 4 stages and circular (2 stages,
#     2 rounds) against its unpipelined thread run;
#  2. a bare `mpirun --hostfile ... gsl run examples/mlp.gsl` (no -np to
#     gsl) prints what the thread run at -np 4 prints;
#  3. files (with --host and no -np once): save() and save_checkpoint()
#     write on rank 0's host; a file in
#     a directory the hosts do not share (GSL_MH_PRIVATE: gslnode2 sees an
#     empty one) is a load error naming gslnode2, and so is --resume from
#     it; --resume from the shared directory continues the run;
#  4. a rank killed on gslnode2 ends every rank within 10 s, with a message
#     naming the rank and the host, and no process is left.
# Root only: otherwise it prints why and exits 77 (ctest SKIP_RETURN_CODE).
# The namespaces are removed on exit, failed or not.
#   two_host_test.sh GSL SOURCE_DIR
set -u
GSL=$1
SRC=$(cd "$2" && pwd)
MH_DIR=$SRC/tests/multihost
. "$MH_DIR/cluster.sh"

S=${GSL_TEST_TIME_SCALE:-1}
if ! why=$(mh_can_run); then
  echo "SKIP: the two-host test $why"
  exit 77
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/gsl-multihost.XXXXXX") || exit 1
cleanup() {
  [ -n "${bg:-}" ] && kill -9 "$bg" 2> /dev/null
  mh_down
  rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
fail() {
  echo "FAIL: $*"
  for f in "$T"/err*.txt; do [ -s "$f" ] && { echo "--- $f"; tail -20 "$f"; }; done
  exit 1
}
mh_up || fail "could not create the namespaces"

mkdir "$T/work" "$T/work/private"
export GSL_MH_PRIVATE="$T/work/private"
printf 'gslnode1 slots=2\ngslnode2 slots=2\n' > "$T/hosts"
# What gsl passes on to mpirun here (a cluster needs none of it: its own
# hosts, ssh and interfaces; see docs/cluster.md).
MPIARGS="$MH_MPIRUN_ARGS"
start=$(date +%s)

# gsl run --mpi --hostfile on gslnode1, in directory $1 of the work area.
two_hosts() {
  dir=$1
  shift
  (cd "$T/work/$dir" && timeout $((60 * S)) "$MH_DIR/netns_rsh.sh" --argv gslnode1 \
    "$GSL" run "$@" --mpi --hostfile "$T/hosts" --mpirun-args "$MPIARGS" < /dev/null)
}
threads() {
  (cd "$T/work" && timeout $((60 * S)) "$GSL" run "$@" < /dev/null)
}
# Same lines, tokens equal or numbers within rel 1e-5 (abs 1e-6).
same() {
  [ "$(wc -l < "$1")" = "$(wc -l < "$2")" ] || return 1
  [ -s "$1" ] || return 1
  paste -d'|' "$1" "$2" | awk -F'|' '
    { s = $1; t = $2; gsub(/[][(),]/, " ", s); gsub(/[][(),]/, " ", t)
      n = split(s, a, " "); m = split(t, b, " "); if (n != m) exit 1
      for (i = 1; i <= n; i++) {
        if (a[i] == b[i]) continue
        x = a[i] + 0; y = b[i] + 0; d = x - y; if (d < 0) d = -d
        z = (x < 0 ? -x : x); if (d > 1e-5 * z + 1e-6) exit 1 } }'
}
check_same() {
  same "$1" "$2" || { echo "--- threads:"; cat "$1"; echo "--- two hosts:"; cat "$2"; fail "$3 differs from the thread run"; }
  echo "ok   $3: $(wc -l < "$2") lines as the thread run"
}

# 1. Equivalence and the MoE example.
EQ="$SRC/tests/sharding/mlp.gsl -np 4 -D DP=2 -D MP=2"
threads $EQ > "$T/want_eq.txt" 2> "$T/err_eq_threads.txt" || fail "thread run of mlp.gsl"
two_hosts . $EQ > "$T/eq.txt" 2> "$T/err_eq.txt" || fail "two-host run of mlp.gsl"
check_same "$T/want_eq.txt" "$T/eq.txt" "tests/sharding/mlp.gsl -np 4 (2 ranks per host)"

MOE="$SRC/examples/moe.gsl -np 4 --engine interp --no-progress -D B=8 -D S=4 -D D=8 -D NH=2 -D HD=4 -D H=16
     -D STEPS=3 -D EVERY=1 -D EVAL_BATCHES=1"
threads $MOE > "$T/want_moe.txt" 2> "$T/err_moe_threads.txt" || fail "thread run of moe.gsl"
two_hosts . $MOE > "$T/moe.txt" 2> "$T/err_moe.txt" || fail "two-host run of moe.gsl"
check_same "$T/want_moe.txt" "$T/moe.txt" "examples/moe.gsl -np 4 (2 ranks per host)"
grep -q '^step 2 loss' "$T/moe.txt" || fail "the MoE run printed no step 2"

# Pipelines across the hosts (docs/pipeline.md): the Transformer's 4 layers
# in 4 stages (one a rank, the shifts crossing hosts), 4 microbatches, and
# circular (2 stages, 2 rounds): the losses of the unpipelined thread run.
TF="$SRC/examples/transformer.gsl -np 4 --no-progress -D STEPS=20 -D L=4"
threads $TF > "$T/want_tf.txt" 2> "$T/err_tf_threads.txt" || fail "thread run of transformer.gsl"
two_hosts . $TF -D PP=4 -D MB=4 > "$T/tf_pp4.txt" 2> "$T/err_tf_pp4.txt" || fail "two-host pipelined transformer.gsl"
check_same "$T/want_tf.txt" "$T/tf_pp4.txt" "examples/transformer.gsl -np 4 -D PP=4 -D MB=4 (4 stages on 2 hosts)"
two_hosts . $TF -D PP=2 -D MB=2 -D RR=2 > "$T/tf_rr2.txt" 2> "$T/err_tf_rr2.txt" || fail "two-host circular pipeline"
check_same "$T/want_tf.txt" "$T/tf_rr2.txt" "examples/transformer.gsl -np 4 -D PP=2 -D MB=2 -D RR=2 (circular)"

# 2. A bare mpirun across the hosts: NP from the world size.
threads "$SRC/examples/mlp.gsl" -np 4 > "$T/want_bare.txt" 2> "$T/err_bare_threads.txt" || fail "thread mlp.gsl"
(cd "$T/work" && timeout $((60 * S)) "$MH_DIR/netns_rsh.sh" --argv gslnode1 mpirun $MPIARGS --hostfile "$T/hosts" \
  -np 4 "$GSL" run "$SRC/examples/mlp.gsl" < /dev/null) > "$T/bare.txt" 2> "$T/err_bare.txt" ||
  fail "bare mpirun -np 4 gsl run examples/mlp.gsl"
check_same "$T/want_bare.txt" "$T/bare.txt" "bare mpirun -np 4 gsl run examples/mlp.gsl"

# 3. Files. save() on rank 0's host: the private directory of gslnode1
# (the real one) has it, gslnode2's does not; its load fails there.
# (This run names the hosts with --host and no -np: NP is their 4 slots.)
(cd "$T/work/private" && timeout $((60 * S)) "$MH_DIR/netns_rsh.sh" --argv gslnode1 "$GSL" run "$MH_DIR/write_files.gsl" \
  --mpi --host gslnode1:2,gslnode2:2 --mpirun-args "$MPIARGS" < /dev/null) > "$T/write.txt" 2> "$T/err_write.txt" ||
  fail "write_files.gsl with --host gslnode1:2,gslnode2:2"
grep -qx "saved on 4 ranks" "$T/write.txt" || fail "write_files.gsl did not run on 4 ranks"
[ -s "$T/work/private/x.npy" ] || fail "save() wrote no private/x.npy on gslnode1 (rank 0's host)"
two_hosts private "$MH_DIR/read_files.gsl" -np 4 > "$T/read.txt" 2> "$T/err_read.txt" && fail "load of a file gslnode2 lacks succeeded"
want="$MH_DIR/read_files.gsl:6:11: error: x.npy: no such file on host gslnode2"
grep -qxF "$want" "$T/err_read.txt" || fail "no message '$want'"
echo "ok   load of a file only gslnode1 has: $want"
# The same program with the file in the shared directory.
cp "$T/work/private/x.npy" "$T/work/x.npy"
two_hosts . "$MH_DIR/read_files.gsl" -np 4 > "$T/read.txt" 2> "$T/err_read2.txt" || fail "load of a shared file"
threads "$MH_DIR/read_files.gsl" -np 4 > "$T/want_read.txt" 2> "$T/err_read_threads.txt" || fail "thread load"
check_same "$T/want_read.txt" "$T/read.txt" "load of a file on the shared file system"

# Checkpoints: written by rank 0 (gslnode1); --resume needs the file on
# every host.
RESUME="$SRC/tests/training/resume.gsl -np 4 --no-progress"
two_hosts private $RESUME > "$T/full.txt" 2> "$T/err_full.txt" || fail "two-host training run"
[ -s "$T/work/private/mid.safetensors" ] || fail "save_checkpoint wrote nothing on gslnode1 (rank 0's host)"
two_hosts private $RESUME --resume mid.safetensors > "$T/resumed.txt" 2> "$T/err_resume.txt" &&
  fail "--resume from a file gslnode2 lacks succeeded"
want="error: mid.safetensors: no such file on host gslnode2 (--resume reads the checkpoint on every host: put it on a file system the hosts share, or copy it to the same path on each host)"
grep -qF "$want" "$T/err_resume.txt" || fail "no message '$want'"
echo "ok   --resume from a file only gslnode1 has: $want"
cp "$T/work/private/mid.safetensors" "$T/work/mid.safetensors"
two_hosts . $RESUME --resume mid.safetensors > "$T/resumed.txt" 2> "$T/err_resume2.txt" || fail "--resume from the shared file"
grep -E '^step ([6-9]|1[01]) |^final' "$T/full.txt" > "$T/want_resumed.txt"
check_same "$T/want_resumed.txt" "$T/resumed.txt" "--resume from a shared checkpoint"

# 4. A rank killed on gslnode2.
(cd "$T/work" && exec "$MH_DIR/netns_rsh.sh" --argv gslnode1 "$GSL" run "$SRC/tests/faults/collectives.gsl" --mpi \
  -np 4 --hostfile "$T/hosts" --mpirun-args "$MPIARGS" < /dev/null) > "$T/kill.txt" 2> "$T/err_kill.txt" &
bg=$!
victim=""
i=0
while [ $i -lt $((600 * S)) ] && [ -z "$victim" ]; do
  if grep -q '^step' "$T/kill.txt" 2> /dev/null; then
    for p in $(ip netns pids "${GSL_MH_NS}2"); do
      if tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qx "OMPI_COMM_WORLD_RANK=2"; then victim=$p; fi
    done
  fi
  kill -0 "$bg" 2> /dev/null || fail "the run ended before the kill"
  sleep 0.1
  i=$((i + 1))
done
[ -n "$victim" ] || fail "no process of rank 2 on gslnode2"
kill -9 "$victim"
t0=$(date +%s)
i=0
while kill -0 "$bg" 2> /dev/null && [ $i -lt $((100 * S)) ]; do sleep 0.1; i=$((i + 1)); done
kill -0 "$bg" 2> /dev/null && fail "the run still runs $((10 * S)) s after rank 2 was killed"
wait "$bg"
rc=$?
bg=""
[ "$rc" != 0 ] || fail "the run exited 0 after a rank was killed"
want="gsl: error: rank 2 on host gslnode2 was killed by signal 9 (Killed); the other ranks were stopped"
grep -qxF "$want" "$T/err_kill.txt" || fail "no message '$want'"
left=""
for n in 1 2; do
  for p in $(ip netns pids "${GSL_MH_NS}$n"); do
    st=$(ps -o stat= -p "$p" 2> /dev/null)
    case "$st" in "" | Z*) ;; *) left="$left $p" ;; esac
  done
done
[ -z "$left" ] || { ps -o pid,stat,cmd -p $left; fail "processes left on the hosts:$left"; }
echo "ok   rank 2 killed on gslnode2: every rank ended within $(($(date +%s) - t0)) s: $want"

echo "PASS: two hosts, $(($(date +%s) - start)) s"
