#!/bin/sh
# mnist_test.sh GSL PYTHON: an MNIST-sized classifier (tests/data/mnist.gsl)
# trained from .npy files written by NumPy (make_mnist.py: 60,000 uint8
# images of 28 x 28, int64 labels, 10 classes), shuffled by --seed and
# epoch, reaches the same held-out accuracy at -np 1, 2 and 4 and under
# --mpi, every step's loss within 1e-5 relative of -np 1's; each rank
# reads from the files only the rows of its block of each batch (the
# "data" events of --trace count the bytes).
set -u
GSL=$1
PY=$2
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/common.sh"

"$PY" "$HERE/make_mnist.py" . || fail "make_mnist.py"
acc() { grep '^test accuracy ' "$1" | sed 's/^test accuracy //'; }
run() {  # run NAME ARGS...: out.NAME, log.NAME, trace.NAME
  name=$1
  shift
  "$GSL" run "$HERE/mnist.gsl" --no-progress --log "log.$name" --trace "trace.$name" "$@" > "out.$name" 2> "err.$name" ||
    { cat "err.$name"; fail "$*"; }
}
run np1 -np 1
want=$(acc out.np1)
[ -n "$want" ] || { cat out.np1; fail "no accuracy at -np 1"; }
above_chance "$want" 0.1
echo "-np 1: accuracy $want"
for r in "np2 -np 2" "np4 -np 4" "mpi2 -np 2 --mpi"; do
  set -- $r
  name=$1
  shift
  run "$name" "$@"
  got=$(acc "out.$name")
  same_accuracy "$got" "$want" "$*" out.np1 "out.$name"
  # Every step's loss as at -np 1; each rank read its block of each batch
  # (B / np rows of every training step and of the 10 test batches), no more.
  "$PY" - "$name" "$2" <<'PY' || fail "$* : losses or bytes read"
import json, sys
name, np_ = sys.argv[1], int(sys.argv[2])
ref = [json.loads(l)["loss"] for l in open("log.np1")]
got = [json.loads(l)["loss"] for l in open("log." + name)]
assert len(ref) == len(got) == 640, (len(ref), len(got))
worst = max(abs(a - b) / abs(a) for a, b in zip(ref, got))
assert worst <= 1e-5, worst
read = {}
for e in json.load(open("trace." + name))["traceEvents"]:
    if e.get("cat") == "data":
        k = (e["pid"], e["args"]["file"])
        read[k] = read.get(k, 0) + e["args"]["bytes"]
want = {"mnist_x.npy": 640 * 100 * 784, "mnist_y.npy": 640 * 100 * 8,
        "mnist_test_x.npy": 10 * 1000 * 784, "mnist_test_y.npy": 10 * 1000 * 8}
for rank in range(np_):
    for f, whole in want.items():
        assert read.get((rank, f)) == whole // np_, (rank, f, read.get((rank, f)), whole // np_)
print("  losses within %.1e of -np 1; rank 0 read %d bytes of mnist_x.npy (the file has 47,040,000)"
      % (worst, read[(0, "mnist_x.npy")]))
PY
  echo "$*: accuracy $got"
done
# Another --seed shuffles the batches otherwise: another loss curve.
"$GSL" run "$HERE/mnist.gsl" --no-progress -D STEPS=20 --seed 5 --log log.seed5 > /dev/null || fail "--seed 5"
"$GSL" run "$HERE/mnist.gsl" --no-progress -D STEPS=20 --log log.seed0 > /dev/null || fail "--seed 0"
losses() { sed 's/.*"loss":\([^,]*\),.*/\1/' "$1"; }
[ "$(losses log.seed0 | wc -l)" = 20 ] || fail "-D STEPS=20: not 20 steps"
[ "$(losses log.seed0)" = "$(losses log.seed5)" ] && fail "--seed 5 logged the same losses"
echo "PASS"
