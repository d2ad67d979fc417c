#!/bin/sh
# progress_line.sh GSL: the progress line (stderr, not a terminal) numbers
# steps as the program's loop does, counts the loop's steps done, and shows
# each metric of the step it is printed for, or says at which earlier step
# a metric was logged. `gsl run --stats json` names the command it belongs to.
set -u
gsl=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
cat > p.gsl <<'G'
const STEPS = 20
param w: f32[4] = ones
optimizer opt = sgd(lr=0.01)
fn loss() -> f32 { return sum(w * w) }
fn main() {
  for step in 0..STEPS {
    let l = opt.minimize(loss)
    if step % 8 == 0 or step == STEPS - 1 { log_metric("val_loss", l * 2.0) }
  }
}
G
cat > want.txt <<'W'
step 0  1/20  loss 4.0  val_loss 8.0
step 1  2/20  loss 3.8416002  val_loss 8.0 (step 0)
step 3  4/20  loss 3.5433698  val_loss 8.0 (step 0)
step 5  6/20  loss 3.2682915  val_loss 8.0 (step 0)
step 7  8/20  loss 3.0145683  val_loss 8.0 (step 0)
step 9  10/20  loss 2.7805417  val_loss 5.7903824 (step 8)
step 11  12/20  loss 2.5646832  val_loss 5.7903824 (step 8)
step 13  14/20  loss 2.3655822  val_loss 5.7903824 (step 8)
step 15  16/20  loss 2.181938  val_loss 5.7903824 (step 8)
step 17  18/20  loss 2.0125499  val_loss 4.191066 (step 16)
step 19  20/20  loss 1.8563119  val_loss 3.7126238
W
fail=0
"$gsl" run p.gsl 2> err.txt > out.txt || { echo "FAIL: run"; cat err.txt; fail=1; }
sed 's/  ETA [0-9]*s$//' err.txt > got.txt
cmp -s want.txt got.txt || { echo "FAIL: progress lines"; diff want.txt got.txt; fail=1; }
"$gsl" run p.gsl --stats json > out.txt 2> err.txt
rc=$?
[ $rc = 2 ] || { echo "FAIL: run --stats json: exit $rc, expected 2"; fail=1; }
[ "$(cat err.txt)" = "gsl: usage error: --stats is an option of gsl compile, which prints the per-rank costs without running: gsl compile FILE -np N --stats json" ] ||
  { echo "FAIL: run --stats json message:"; cat err.txt; fail=1; }
[ $fail = 0 ] && echo PASS
exit $fail
