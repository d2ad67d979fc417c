#!/bin/sh
# classifier_test.sh GSL PYTHON EXAMPLES: examples/classifier.gsl trained
# from NumPy's default-dtype .npy files (float64 inputs, int64 labels,
# written by make_blobs.py) reaches the same held-out accuracy at -np 1, 2
# and 4 and under --mpi (well above chance), the batches shuffled by
# --seed; a value that does not fit in f32 is an error naming the file and
# the index.
set -u
GSL=$1
PY=$2
EX=$3
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/common.sh"

"$PY" "$HERE/make_blobs.py" . || fail "make_blobs.py"
acc() { grep '^step 160 ' "$1" | sed 's/.*test accuracy //'; }
"$GSL" run "$EX/classifier.gsl" --no-progress -np 1 --log log.jsonl > np1.txt || { cat np1.txt; fail "-np 1"; }
# log_metric("accuracy", ...) after every 32nd step: in that step's --log
# record (as printed), in no other; the throughput is examples/s.
"$PY" - log.jsonl np1.txt <<'PY' || fail "--log records"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
printed = {int(l.split()[1]): float(l.split()[-1]) for l in open(sys.argv[2]) if l.startswith("step ")}
assert len(recs) == 160, len(recs)
for r in recs:
    assert list(r)[:4] == ["step", "loss", "examples_per_s", "elapsed_s"], r
    if r["step"] % 32 == 0:
        assert r["accuracy"] == printed[r["step"]], (r, printed)
    else:
        assert "accuracy" not in r, r
print("log: accuracy in", sum("accuracy" in r for r in recs), "records")
PY
want=$(acc np1.txt)
[ -n "$want" ] || { cat np1.txt; fail "no final accuracy at -np 1"; }
above_chance "$want" 0.25
for run in "-np 2" "-np 4" "-np 2 --mpi"; do
  "$GSL" run "$EX/classifier.gsl" --no-progress $run > out.txt 2> err.txt || { cat err.txt; fail "$run"; }
  got=$(acc out.txt)
  same_accuracy "$got" "$want" "$run" np1.txt out.txt
  echo "$run: accuracy $got"
done
echo "-np 1: accuracy $want"
# Another --seed shuffles the batches otherwise: another loss curve.
"$GSL" run "$EX/classifier.gsl" --no-progress --seed 5 > seed5.txt || fail "--seed 5"
cmp -s np1.txt seed5.txt && fail "--seed 5 printed the same losses"
# A float64 value beyond f32's range.
"$PY" -c "
import numpy as np
x = np.load('blobs_x.npy'); x[3, 2] = 1e39; np.save('blobs_x.npy', x)"
"$GSL" run "$EX/classifier.gsl" --no-progress > out.txt 2> err.txt
rc=$?
[ $rc = 1 ] || fail "value out of range: exit code $rc, expected 1"
grep -q "error: blobs_x.npy: float64 value 1e+39 at index 50 does not fit in f32$" err.txt || { cat err.txt; fail "value out of range: unexpected message"; }
echo "range: $(head -n1 err.txt)"
echo "PASS"
