#!/usr/bin/env bash
# interrupt_hint.sh GSL: Ctrl-C (SIGINT) during training says where the last
# checkpoint is (and --resume continues from it), or that there is none.
set -u
gsl=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
cat > train.gsl <<'G'
param w: f32[64] = ones
optimizer opt = sgd(lr=0.000001)
fn loss() -> f32 { return sum(w * w) }
fn main() {
  for step in 0..100000000 {
    let l = opt.minimize(loss)
    if SAVE and step % 50 == 0 { save_checkpoint("ck.safetensors") }
  }
}
G
fail=0
# run SAVE: starts a long run, interrupts it once it is training (after the
# first checkpoint when SAVE), and leaves its stderr in err.txt.
run() {
  sed "s/SAVE/$1/" train.gsl > t.gsl
  "$gsl" run t.gsl --no-progress 2>err.txt &
  pid=$!
  for _ in $(seq 1 1800); do
    if [ "$1" = true ]; then [ -f ck.safetensors ] && break; else sleep 2; break; fi
    sleep 0.1
  done
  sleep 0.5
  kill -INT $pid
  wait $pid
  rc=$?
  [ "$rc" = 130 ] || { echo "FAIL: exit code $rc, expected 130"; fail=1; }
}
run false
grep -qx "gsl: note: this run wrote no checkpoint (--checkpoint-every N PATH, or save_checkpoint(path) in the training loop, writes one to --resume from)" err.txt ||
  { echo "FAIL: no 'no checkpoint' note"; cat err.txt; fail=1; }
run true
grep -qx "gsl: note: the last checkpoint written is ck.safetensors (--resume ck.safetensors continues from it)" err.txt ||
  { echo "FAIL: no 'last checkpoint' note"; cat err.txt; fail=1; }
sed "s/SAVE/false/; s/0..100000000/0..3/" train.gsl > r.gsl
"$gsl" run r.gsl --resume ck.safetensors --no-progress 2>err.txt ||
  { echo "FAIL: --resume from the checkpoint"; cat err.txt; fail=1; }
[ $fail = 0 ] && echo PASS
exit $fail
