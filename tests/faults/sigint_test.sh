#!/bin/sh
# SIGINT (Ctrl-C) stops `gsl run` cleanly: exit status 130, the line
# "gsl: interrupted" and a note naming the last checkpoint, no hang, no
# temp file left, and the checkpoint on
# disk complete (it resumes). Twice: between training steps, and while a
# checkpoint is being written (the TEST-ONLY hook
# GSL_TEST_FAULT=checkpoint_pause_ms holds the write open with its temp
# file on disk): the write is abandoned and the older checkpoint stays
# byte for byte.
# Usage: sigint_test.sh GSL [--mpi]     (threads by default)
# GSL_TEST_TIME_SCALE (default 1) multiplies the time limits (make test-asan).
set -u
GSL=$1
S=${GSL_TEST_TIME_SCALE:-1}
MODE=${2:-}
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d)
cd "$T" || exit 1
fail() { echo "FAIL ($MODE): $*"; echo "--- stderr:"; cat err.txt 2>/dev/null; exit 1; }
cleanup() {
  [ -n "${gsl_pid:-}" ] && kill -9 "$gsl_pid" 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT

# Waits (at most 60 s) until `cond` (a shell command) holds while the run lives.
wait_for() {
  i=0
  while ! eval "$1"; do
    kill -0 "$gsl_pid" 2>/dev/null || fail "the run ended early, waiting for: $1"
    [ $i -lt $((600 * S)) ] || fail "timed out waiting for: $1"
    sleep 0.1
    i=$((i + 1))
  done
}

# Sends SIGINT to the run; it must end within 10 s with status 130 and on
# stderr the line "gsl: interrupted", then the note on the last checkpoint
# (train.gsl trains), the extended regex NOTE (default: either note).
interrupt() {
  note=${1:-'^gsl: note: (the last checkpoint written is ck\.safetensors \(--resume ck\.safetensors continues from it\)|this run wrote no checkpoint \(.*\))$'}
  start=$(date +%s.%N)
  kill -INT "$gsl_pid"
  i=0
  while kill -0 "$gsl_pid" 2>/dev/null && [ $i -lt $((100 * S)) ]; do sleep 0.1; i=$((i + 1)); done
  kill -0 "$gsl_pid" 2>/dev/null && fail "still running $((10 * S)) s after SIGINT (hang)"
  wait "$gsl_pid"
  rc=$?
  gsl_pid=""
  elapsed=$(echo "$(date +%s.%N) - $start" | bc)
  [ "$rc" = 130 ] || fail "exit status $rc after SIGINT, expected 130"
  [ "$(grep -c . err.txt)" = 2 ] && [ "$(head -n1 err.txt)" = "gsl: interrupted" ] &&
    tail -n1 err.txt | grep -Eq "$note" \
    || fail "stderr is not 'gsl: interrupted' and the checkpoint note /$note/"
  if ls | grep -q '\.tmp\.'; then ls -la; fail "a temp file was left behind"; fi
  echo "stopped ${elapsed}s after SIGINT, exit status 130"
}

# The checkpoint must be complete: resuming from it reads every tensor.
resumes() {
  "$GSL" run "$HERE/train.gsl" $MODE -np 2 -D STEPS=0 --resume ck.safetensors > /dev/null 2> resume_err.txt \
    || { cat resume_err.txt; fail "the checkpoint left by the interrupted run does not resume"; }
}

# 1. Between steps: after two checkpoints were written.
"$GSL" run "$HERE/train.gsl" $MODE -np 2 --no-progress > out.txt 2> err.txt &
gsl_pid=$!
wait_for 'grep -q "^saved 10 " out.txt'
interrupt '^gsl: note: the last checkpoint written is ck\.safetensors \(--resume ck\.safetensors continues from it\)$'
resumes
echo "1. between steps: ok ($(tail -n1 out.txt))"

# 2. In the middle of writing a checkpoint: the older one stays as it was.
cp ck.safetensors before.safetensors
GSL_TEST_FAULT=checkpoint_pause_ms=20000 "$GSL" run "$HERE/train.gsl" $MODE -np 2 --no-progress \
  > out.txt 2> err.txt &
gsl_pid=$!
wait_for 'ls | grep -q "^ck\.safetensors\.tmp\."'
interrupt
cmp -s ck.safetensors before.safetensors || fail "the older checkpoint changed"
resumes
echo "2. during a checkpoint write: ok (temp file removed, older checkpoint intact)"
echo "PASS"
