#!/bin/sh
# examples/moe.gsl on 64 OpenMPI processes (128 experts) with small sizes,
# two training steps on the fortunes corpus: every rank runs, the loss,
# routing and validation loss print, the checkpoint is written, and the
# samples print. On the 2-core CI machine the interpreter engine is
# used: 64 processes each JIT-compiling would take most of the CI budget.
#   moe_np64.sh GSL SOURCE_DIR
set -eu
gsl=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
"$gsl" run "$src/examples/moe.gsl" -np 64 --mpi --engine interp --no-progress \
  -D B=64 -D S=8 -D D=8 -D NH=2 -D HD=4 -D H=16 -D STEPS=2 -D EVERY=1 -D EVAL_BATCHES=1 > out.txt 2>&1 || {
  cat out.txt
  echo "FAIL: gsl run exited with an error"
  exit 1
}
cat out.txt
grep -q "^experts 128 capacity 1 per group of 8 tokens" out.txt || { echo "FAIL: header"; exit 1; }
grep -q "^step 1 loss [0-9.]* cross-entropy" out.txt || { echo "FAIL: no step 1"; exit 1; }
[ -s moe.safetensors ] || { echo "FAIL: no checkpoint"; exit 1; }
grep -q "^samples " out.txt || { echo "FAIL: no samples"; exit 1; }
echo PASS
