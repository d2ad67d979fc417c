#!/usr/bin/env bash
# plan_test.sh GSL SRC: `gsl plan` (runtime/AutoSharding.h) on programs with
# their annotations removed, on the default machine model (deterministic):
#  - the forward MLP: every choice searched (exhaustive), the batch split
#    over a data axis of all ranks;
#  - the Transformer LM: coordinate descent; the plan it writes (--write)
#    trains to the same losses as the program run on one rank (shardings
#    never change the numbers), and is predicted faster than as written;
#  - annotations the user wrote are kept; a memory limit no plan fits and a
#    program with an error are reported (exit 1).
set -eu
gsl=$1 src=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
export GSL_MACHINE_DIR="$dir/no-machine"
fail() { echo "FAIL: $*"; exit 1; }

"$gsl" plan "$src/tests/plan/mlp_bare.gsl" -np 4 >mlp.txt
grep -q "(exhaustive" mlp.txt || fail "mlp: not exhaustive: $(cat mlp.txt)"
grep -q "  mesh m = \[data: 4, model: 1\]" mlp.txt || fail "mlp mesh: $(cat mlp.txt)"
grep -q "  x of fn mlp: @shard(m, \[data, _\])" mlp.txt || fail "mlp batch: $(cat mlp.txt)"

cp "$src/tests/plan/lm_bare.gsl" lm.gsl
"$gsl" plan lm.gsl -np 4 --write planned.gsl >lm.txt
grep -q "(coordinate descent)" lm.txt || fail "lm method: $(cat lm.txt)"
grep -q "^wrote planned.gsl" lm.txt || fail "lm write: $(cat lm.txt)"
grep -q "@shard(m, \[data, _\])" planned.gsl || fail "the written plan has no batch split"
python3 - lm.txt <<'PY'
import re, sys
t = open(sys.argv[1]).read()
def us(label):
    m = re.search(label + r": ([0-9.]+) (us|ms) a step", t)
    assert m, (label, t)
    return float(m.group(1)) * (1000 if m.group(2) == "ms" else 1)
assert us("predicted") < us("as written"), t
PY
"$gsl" run lm.gsl -np 1 -D STEPS=4 --no-progress >one.txt 2>&1
"$gsl" run planned.gsl -np 4 -D STEPS=4 --no-progress >four.txt 2>&1
python3 - one.txt four.txt <<'PY'
import re, sys
def losses(p):
    v = [float(x) for x in re.findall(r"step \d+ loss ([0-9.e+-]+)", open(p).read())]
    assert v, open(p).read()
    return v
a, b = losses(sys.argv[1]), losses(sys.argv[2])
assert len(a) == len(b) and all(abs(x - y) <= 1e-5 * abs(x) for x, y in zip(a, b)), (a, b)
PY

# The user's annotations stay: examples/mlp.gsl has none open.
"$gsl" plan "$src/examples/mlp.gsl" -np 4 --keep-mesh >kept.txt
grep -q "1 plans of 0 open annotations" kept.txt || fail "kept: $(cat kept.txt)"

# No plan fits in 1 KiB a rank; a program with an error.
if "$gsl" plan "$src/tests/plan/mlp_bare.gsl" -np 2 --max-memory 1K >small.txt 2>&1; then fail "1K fitted"; fi
grep -q "gsl: error: no plan fits: needs .* per rank, more than the limit 1.0 KiB" small.txt || fail "$(cat small.txt)"
printf 'mesh m = [data: NP]\nparam w: f32[4, 4 = zeros\n' >bad.gsl
if "$gsl" plan bad.gsl -np 2 >bad.txt 2>&1; then fail "bad.gsl planned"; fi
grep -q "bad.gsl:2:" bad.txt || fail "$(cat bad.txt)"
echo PASS
