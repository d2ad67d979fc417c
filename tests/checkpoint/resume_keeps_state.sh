#!/usr/bin/env bash
# resume_keeps_state.sh GSL READER.py: no run loses optimizer state
# (issue 28's data-loss case). A --resume at or past the training loop's
# end says so on stderr and a later save_checkpoint writes the checkpoint's
# optimizer states back (the file is byte-identical); a resumed run that
# then trains continues as an uninterrupted run would; a save with no
# states never overwrites a checkpoint that has them unless the program
# says save_checkpoint(path, optimizer=false); the states of an optimizer
# that ran no step after --resume are kept.
set -u
gsl=$1
reader=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1
fail=0
cat > train.gsl <<'G'
const STEPS = 30
param w: f32[4] = ones
optimizer opt = adam(lr=0.01)
fn loss() -> f32 { return sum(w * w * w * w) }
fn main() {
  for step in start_step()..STEPS { let l = opt.minimize(loss) }
  print(w)
  save_checkpoint("ck.safetensors")
}
G
optimizer_tensors() { python3 "$reader" "$1" | grep -c '^tensor optimizer/'; }

"$gsl" run train.gsl --no-progress > a.txt || { echo "FAIL: the 30-step run"; fail=1; }
cp ck.safetensors ck30.safetensors
[ "$(optimizer_tensors ck30.safetensors)" = 2 ] || { echo "FAIL: the checkpoint has no Adam moments"; fail=1; }

# Past the end (STEPS=5) and at the end (STEPS=30): a warning, exit 0, and
# the save writes the same file back, moments and step counter included.
for steps in 5 30; do
  cp ck30.safetensors ck.safetensors
  "$gsl" run train.gsl --no-progress -D STEPS=$steps --resume ck.safetensors > r.txt 2> err.txt
  rc=$?
  [ $rc = 0 ] || { echo "FAIL: resume with STEPS=$steps: exit $rc"; cat err.txt; fail=1; }
  want="train.gsl:6:15: warning: --resume ck.safetensors continues at step 30, at or past this loop's end ($steps): no training step runs (a later save keeps the checkpoint's optimizer states)"
  [ "$(head -n1 err.txt)" = "$want" ] || { echo "FAIL: STEPS=$steps warning:"; cat err.txt; fail=1; }
  cmp -s ck.safetensors ck30.safetensors || { echo "FAIL: STEPS=$steps: the save changed the checkpoint"; fail=1; }
done

# Then 5 more steps from that re-saved checkpoint equal 35 straight steps.
mkdir straight && (cd straight && "$gsl" run ../train.gsl --no-progress -D STEPS=35 > ../full35.txt) ||
  { echo "FAIL: the 35-step run"; fail=1; }
"$gsl" run train.gsl --no-progress -D STEPS=35 --resume ck.safetensors > r35.txt ||
  { echo "FAIL: resume to 35"; fail=1; }
cmp -s full35.txt r35.txt || { echo "FAIL: resumed to step 35, another result"; cat full35.txt r35.txt; fail=1; }

# A save with no states over a checkpoint with states: refused, file kept.
cat > nostep.gsl <<'G'
param w: f32[4] = ones
optimizer opt = adam(lr=0.01)
fn main() {
  save_checkpoint("ck.safetensors")
}
G
cp ck30.safetensors ck.safetensors
"$gsl" run nostep.gsl > out.txt 2> err.txt
rc=$?
[ $rc = 1 ] || { echo "FAIL: a stateless save over states: exit $rc"; fail=1; }
want='nostep.gsl:4:3: error: ck.safetensors holds 2 optimizer states and this save would write none (no training step has run): not overwritten; save_checkpoint("ck.safetensors", optimizer=false) writes the params alone'
[ "$(head -n1 err.txt)" = "$want" ] || { echo "FAIL: message:"; cat err.txt; fail=1; }
cmp -s ck.safetensors ck30.safetensors || { echo "FAIL: the refused save changed the file"; fail=1; }
# optimizer=false: the program asks, the params alone are written.
sed 's/save_checkpoint("ck.safetensors")/save_checkpoint("ck.safetensors", optimizer=false)/' nostep.gsl > params.gsl
"$gsl" run params.gsl > out.txt 2> err.txt || { echo "FAIL: optimizer=false"; cat err.txt; fail=1; }
[ "$(optimizer_tensors ck.safetensors)" = 0 ] || { echo "FAIL: optimizer=false wrote states"; fail=1; }

# A checkpoint without states: resuming trains from fresh moments, and the
# next save has them.
"$gsl" run train.gsl --no-progress -D STEPS=3 --resume ck.safetensors > out.txt 2> err.txt ||
  { echo "FAIL: resume from a params-only checkpoint"; cat err.txt; fail=1; }
[ "$(optimizer_tensors ck.safetensors)" = 2 ] || { echo "FAIL: no states after training from a params-only checkpoint"; fail=1; }

# Two optimizers; after --resume only opt_b steps: opt_a's states are kept.
cat > two.gsl <<'G'
const STEPS = 10
const ONLY_B = 0
param a: f32[3] = ones
param b: f32[3] = ones
optimizer opt_a = adam(lr=0.01)
optimizer opt_b = sgd(lr=0.01, momentum=0.9)
fn la() -> f32 { return sum(a * a) }
fn lb() -> f32 { return sum(b * b * b * b) }
fn main() {
  for step in start_step()..STEPS {
    if ONLY_B == 0 { let x = opt_a.minimize(la) }
    let y = opt_b.minimize(lb)
  }
  save_checkpoint("two.safetensors")
}
G
"$gsl" run two.gsl --no-progress || { echo "FAIL: two optimizers"; fail=1; }
python3 "$reader" two.safetensors | grep '^tensor optimizer/opt_a/' > a_before.txt
"$gsl" run two.gsl --no-progress -D STEPS=15 -D ONLY_B=1 --resume two.safetensors || { echo "FAIL: resume, opt_b only"; fail=1; }
python3 "$reader" two.safetensors | grep '^tensor optimizer/opt_a/' > a_after.txt
[ -s a_before.txt ] && cmp -s a_before.txt a_after.txt || { echo "FAIL: opt_a's states were not kept"; fail=1; }
python3 "$reader" two.safetensors | grep -q '^meta step/opt_a=10$' || { echo "FAIL: opt_a's step counter"; fail=1; }

# Bad input: save_checkpoint's second argument.
printf 'param w: f32[2] = ones\nfn main() {\n  save_checkpoint("x.safetensors", optimizer=1)\n}\n' > bad.gsl
"$gsl" check bad.gsl > out.txt 2> err.txt
rc=$?
[ $rc = 1 ] || { echo "FAIL: bad save_checkpoint argument: exit $rc"; fail=1; }
grep -qx 'bad.gsl:3:36: error: save_checkpoint.s second argument is optimizer=true or optimizer=false (whether to write the optimizer states)' err.txt ||
  { echo "FAIL: bad argument message:"; cat err.txt; fail=1; }

[ $fail = 0 ] && echo PASS
exit $fail
