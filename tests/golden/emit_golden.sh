#!/usr/bin/env bash
# emit_golden.sh GSL ROOT [--update]: the compiler's IR text of every program
# under examples/ and tests/{programs,sharding,training,filecheck}, at the
# stages ir, sharded and spmd, against the stored outputs in
# tests/golden/out/ (one file per program). A refactoring of the compiler
# must leave every byte as it was; a change that means to alter the IR text
# rewrites the stored outputs with --update and shows the diff in review.
#
# GOLDEN_STAGES (default "ir sharded spmd") and GOLDEN_OUT (default
# tests/golden/out) let a refactoring snapshot other stages, such as llvm,
# into a scratch folder before and compare after: `GOLDEN_STAGES=llvm
# GOLDEN_OUT=/tmp/llvm emit_golden.sh build/gsl . --update` on the old
# build, the same without --update on the new one.
#
# Each program is compiled with the arguments of its first `# run:` line
# (sharding and training corpus), its `# EMIT:` line's extra arguments
# (filecheck), or a fixed -np for the examples (table below). Programs that
# do not compile (run-time diagnostics tests) are stored as their exit code.
set -uo pipefail
gsl=$1 root=$2 update=${3:-}
out=${GOLDEN_OUT:-$root/tests/golden/out}
stages=${GOLDEN_STAGES:-ir sharded spmd}
cd "$root" || exit 2
mkdir -p "$out"
declare -A example_args=(
  [examples/mlp.gsl]="-np 2" [examples/transformer.gsl]="-np 4"
  [examples/moe.gsl]="-np 8" [examples/gshard_600b.gsl]="-np 2048"
  [examples/gshard_600b_pipeline.gsl]="-np 2048 -D PP=2 -D MB=2" [examples/generate.gsl]="-np 4"
  [examples/classifier.gsl]="-np 4" [examples/char_lm.gsl]="-np 2")
fail=0 n=0
for f in examples/*.gsl tests/programs/*.gsl tests/sharding/*.gsl tests/training/*.gsl tests/filecheck/*.gsl; do
  [ -f "$f" ] || continue
  args=${example_args[$f]:-}
  if [ -z "$args" ]; then
    args=$(sed -n 's/^# run: *//p' "$f" | head -n1)
    emitline=$(sed -n 's/^# EMIT: *//p' "$f" | head -n1)
    [ -n "$emitline" ] && args=$(echo "$emitline" | cut -s -d' ' -f2-)
    # --mpi and run-only flags do not apply to `compile`.
    args=$(echo "$args" | sed -e 's/--mpi//g' -e 's/--seed [0-9]*//g' -e 's/--engine [a-z]*//g')
  fi
  name=$(echo "$f" | tr '/' '_')
  got=$(mktemp)
  {
    echo "## $f $args"
    for stage in $stages; do
      echo "## emit $stage"
      # shellcheck disable=SC2086
      "$gsl" compile "$f" --emit $stage $args 2>&1
      echo "## exit $?"
    done
  } > "$got"
  n=$((n + 1))
  if [ "$update" = "--update" ]; then
    mv "$got" "$out/$name.txt"
  elif ! cmp -s "$got" "$out/$name.txt"; then
    echo "FAIL: $f: IR text differs from tests/golden/out/$name.txt"
    diff "$out/$name.txt" "$got" | head -n 20
    fail=$((fail + 1))
    rm -f "$got"
  else
    rm -f "$got"
  fi
done
if [ "$update" = "--update" ]; then echo "updated $n programs"; exit 0; fi
echo "golden: $((n - fail)) passed, $fail failed"
[ "$fail" -eq 0 ]
