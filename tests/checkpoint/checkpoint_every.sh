#!/usr/bin/env bash
# checkpoint_every.sh GSL: `gsl run --checkpoint-every N PATH` writes a
# checkpoint after every N-th training step (no save_checkpoint in the
# program): a run resumed from it ends where an uninterrupted run ends;
# Ctrl-C names it and --resume continues from it; the flag's usage errors.
set -u
gsl=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
fail=0
cat > train.gsl <<'G'
const STEPS = 120
param w: f32[4] = ones
optimizer opt = adam(lr=0.01)
fn loss() -> f32 { return sum(w * w * w * w) }
fn main() {
  print("start", start_step())
  for step in start_step()..STEPS { let l = opt.minimize(loss) }
  print(w)
}
G
# 120 steps straight, and 120 steps with a checkpoint every 50 (the last at
# step 100), then resumed from it: the same params.
"$gsl" run train.gsl --no-progress > full.txt || { echo "FAIL: full run"; fail=1; }
"$gsl" run train.gsl --no-progress --checkpoint-every 50 ck.safetensors -np 2 > every.txt ||
  { echo "FAIL: --checkpoint-every run"; fail=1; }
cmp -s full.txt every.txt || { echo "FAIL: --checkpoint-every changed the run"; cat full.txt every.txt; fail=1; }
"$gsl" run train.gsl --no-progress --resume ck.safetensors > resumed.txt || { echo "FAIL: --resume"; fail=1; }
head -n1 resumed.txt | grep -qx "start 100" || { echo "FAIL: the checkpoint is not step 100"; cat resumed.txt; fail=1; }
[ "$(tail -n1 resumed.txt)" = "$(tail -n1 full.txt)" ] ||
  { echo "FAIL: resumed from step 100, another result"; cat full.txt resumed.txt; fail=1; }
ls -a | grep -q '\.tmp' && { echo "FAIL: a temporary file is left"; ls -a; fail=1; }

# Ctrl-C: the note names the checkpoint, which --resume continues from.
sed 's/const STEPS = 120/const STEPS = 100000000/' train.gsl > long.gsl
rm -f ck2.safetensors
"$gsl" run long.gsl --no-progress --checkpoint-every 20 ck2.safetensors > long.txt 2> err.txt &
pid=$!
for _ in $(seq 1 1800); do
  [ -f ck2.safetensors ] && break
  sleep 0.1
done
sleep 0.5
kill -INT $pid
wait $pid
rc=$?
[ "$rc" = 130 ] || { echo "FAIL: exit code $rc, expected 130"; fail=1; }
grep -qx "gsl: note: the last checkpoint written is ck2.safetensors (--resume ck2.safetensors continues from it)" err.txt ||
  { echo "FAIL: no 'last checkpoint' note"; cat err.txt; fail=1; }
sed 's/const STEPS = 120/const STEPS = 0/' train.gsl > r.gsl
"$gsl" run r.gsl --no-progress --resume ck2.safetensors > r.txt 2> err.txt || { echo "FAIL: --resume ck2"; cat err.txt; fail=1; }
start=$(head -n1 r.txt | sed 's/^start //')
[ -n "$start" ] && [ "$start" -gt 0 ] && [ $((start % 20)) = 0 ] ||
  { echo "FAIL: the interrupted run's checkpoint is at step '$start', not a multiple of 20"; fail=1; }

# Usage errors.
usage() {  # usage EXPECTED ARGS...
  want=$1
  shift
  "$gsl" run "$@" > out.txt 2> err.txt
  rc=$?
  [ $rc = 2 ] || { echo "FAIL: $*: exit code $rc, expected 2"; fail=1; }
  grep -qxF "$want" err.txt || { echo "FAIL: $*: unexpected message"; cat err.txt; fail=1; }
}
usage "gsl: usage error: --checkpoint-every takes a number of steps >= 1 and a path, got '0'" \
  train.gsl --checkpoint-every 0 ck.safetensors
usage "gsl: usage error: --checkpoint-every takes a number of steps >= 1 and a path, got '5x'" \
  train.gsl --checkpoint-every 5x ck.safetensors
cat > infer.gsl <<'G'
param w: f32[4] = ones
fn main() { print(w) }
G
usage "gsl: usage error: --checkpoint-every: the program does not train (it declares no optimizer)" \
  infer.gsl --checkpoint-every 10 ck.safetensors
[ $fail = 0 ] && echo PASS
exit $fail
