#!/bin/sh
# generate_test.sh GSL EXAMPLES: examples/transformer.gsl trains the copy
# task into a temp folder, then examples/generate.gsl loads its checkpoint
# with load_checkpoint (params only, under another -np and sharding too)
# and greedily writes the second half of held-out sequences: it must be
# the copy of the first half. load_checkpoint of another model's
# checkpoint is a clear error.
set -u
GSL=$1
EX=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
fail() { echo "FAIL: $*"; exit 1; }

"$GSL" run "$EX/transformer.gsl" --no-progress -np 2 -D STEPS=120 > train.txt || { cat train.txt; fail "training"; }
tail -n1 train.txt
[ -f transformer.safetensors ] || fail "no checkpoint written"
for np in 2 4; do
  "$GSL" run "$EX/generate.gsl" --no-progress -np $np > gen.txt 2> err.txt || { cat err.txt; fail "generate at -np $np"; }
  # The printed prompts (first half) and generated rows must be the same
  # lines, and every token copied.
  sed -n '/^prompts:/,/^generated:/p' gen.txt | sed '1d;$d' > prompts.txt
  sed -n '/^generated:/,/^copied/p' gen.txt | sed '1d;$d' > generated.txt
  [ -s prompts.txt ] || { cat gen.txt; fail "no prompts printed at -np $np"; }
  cmp -s prompts.txt generated.txt || { cat gen.txt; fail "generated tokens are not the copy at -np $np"; }
  grep -qx "copied 56 of 56 tokens" gen.txt || { cat gen.txt; fail "not every token copied at -np $np"; }
  echo "-np $np: $(grep '^copied' gen.txt)"
done

# load_checkpoint of another model's checkpoint names the missing param.
printf 'param other: f32[2] = zeros\nfn main() { save_checkpoint("other.safetensors") }\n' > other.gsl
"$GSL" run other.gsl > /dev/null || fail "writing the other checkpoint"
printf 'param w: f32[3] = zeros\nfn main() {\n  load_checkpoint("other.safetensors")\n  print(w)\n}\n' > load.gsl
"$GSL" run load.gsl > out.txt 2> err.txt
rc=$?
[ $rc = 1 ] || fail "missing param: exit code $rc, expected 1"
grep -q "^load.gsl:3:3: error: other.safetensors: the checkpoint has no param 'w'$" err.txt || { cat err.txt; fail "missing param: unexpected message"; }
echo "missing: $(head -n1 err.txt)"
# ... and a param of another type.
printf 'param other: f32[3] = zeros\nfn main() {\n  load_checkpoint("other.safetensors")\n}\n' > load2.gsl
"$GSL" run load2.gsl > out.txt 2> err.txt
rc=$?
[ $rc = 1 ] || fail "param type: exit code $rc, expected 1"
grep -q "^load2.gsl:3:3: error: other.safetensors: param 'other' is f32\[2\] in the checkpoint but f32\[3\] in the program$" err.txt || { cat err.txt; fail "param type: unexpected message"; }
echo "type: $(head -n1 err.txt)"
# The params it loads are the checkpoint's, and optimizer states are skipped.
printf 'param w: f32[2] = ones\noptimizer opt = adam(lr=0.5)\nfn loss() -> f32 { return sum(w * w) }\nfn main() {\n  let l = opt.minimize(loss)\n  save_checkpoint("trained.safetensors")\n  print(w)\n}\n' > train.gsl
printf 'param w: f32[2] = zeros\nfn main() {\n  load_checkpoint("trained.safetensors")\n  print(w)\n}\n' > infer.gsl
"$GSL" run train.gsl --no-progress > a.txt || fail "train.gsl"
"$GSL" run infer.gsl > b.txt || fail "infer.gsl"
cmp -s a.txt b.txt || { cat a.txt b.txt; fail "loaded params differ from the saved ones"; }
echo "loaded: $(cat b.txt)"
echo "PASS"
