#!/bin/sh
# train_ratio.sh GSL EXAMPLES PROGRAM NP [--mpi]: issue 16's done-when,
# "the Transformer and MoE examples train in bf16 mixed precision to within
# 2% of their f32 loss at step 200": trains examples/PROGRAM for 200 steps
# at -np NP (threads, or OpenMPI ranks with --mpi) in f32 and with
# --autocast bf16, and requires |loss_bf16 / loss_f32 - 1| <= 0.02 on the
# `step 199` line (the 200th step).
#
# Sizes are shrunk with -D so that the whole suite stays cheap on two
# cores (docs/mixed-precision.md): the Transformer runs with B=8 sequences
# of S=8 tokens (default 16 x 16), the MoE example with S=8 (B stays 16,
# so that every rank's MoE group holds at least 32 tokens) and its metrics
# printed only at steps 0 and 199 (EVERY=200). At -np 1 the Transformer's
# data axis is 1 (DP=1); the other sizes are the examples' own.
set -u
GSL=$1
EXAMPLES=$2
PROGRAM=$3
NP=$4
MPI=${5:-}
fail() { echo "FAIL: $*"; exit 1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1  # the examples save a checkpoint into the working directory

case "$PROGRAM" in
  transformer.gsl) SIZES="-D B=8 -D S=8"; [ "$NP" = 1 ] && SIZES="$SIZES -D DP=1" ;;
  moe.gsl) SIZES="-D S=8 -D EVERY=200" ;;
  *) fail "unknown program $PROGRAM" ;;
esac

# loss MODE: the loss printed at step 199 of a run (MODE: f32 or bf16).
loss() {
  ac=""
  [ "$1" = bf16 ] && ac="--autocast bf16"
  # shellcheck disable=SC2086 # SIZES, MPI and ac are lists of words
  "$GSL" run "$EXAMPLES/$PROGRAM" -np "$NP" $MPI -D STEPS=200 $SIZES $ac --no-progress > "$1.txt" 2> "$1.err" \
    || { cat "$1.err"; fail "$PROGRAM -np $NP $MPI ($1) exited with an error"; }
  l=$(awk '$1 == "step" && $2 == "199" && $3 == "loss" { print $4 }' "$1.txt")
  [ -n "$l" ] || { cat "$1.txt"; fail "$PROGRAM -np $NP $MPI ($1) printed no step 199 loss"; }
  echo "$l"
}
f32=$(loss f32) || { echo "$f32"; exit 1; }
bf16=$(loss bf16) || { echo "$bf16"; exit 1; }
awk -v f="$f32" -v b="$bf16" -v what="$PROGRAM -np $NP $MPI" 'BEGIN {
  r = b / f; d = r - 1; if (d < 0) d = -d
  printf "%s: step 199 loss f32 %s bf16 %s ratio %.5f\n", what, f, b, r
  if (!(f > 0) || d > 0.02) { print "FAIL: bf16 loss is not within 2% of f32 loss"; exit 1 }
  print "PASS" }'
