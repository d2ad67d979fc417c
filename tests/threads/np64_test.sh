#!/bin/sh
# Thread ranks far beyond the cores (docs/cluster.md, "Thread ranks"): the
# transformer example trained at -np 64 (fibers on the machine's cores; its
# default 16 x 4 mesh, and the 2 x 32 mesh of -D DP=2 whose model axis pads
# 4 heads over 32 ways) prints the same losses and accuracies as at -np 2,
# within 1e-5 relative. Every collective of the step goes through the
# rendezvous pool, the spin lock and the combined all_reduces.
# Usage: np64_test.sh GSL SOURCE_DIR
set -u
GSL=$1
SRC=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
run() {  # run OUT ARGS...: the printed lines of 6 steps
  out=$1
  shift
  "$GSL" run "$SRC/examples/transformer.gsl" -D STEPS=6 --no-progress "$@" > "$out" 2> err.txt ||
    { echo "FAIL: gsl run $*"; cat err.txt; exit 1; }
}
run np2.txt -np 2
run np64.txt -np 64
run np64dp2.txt -np 64 -D DP=2
python3 - np2.txt np64.txt np64dp2.txt <<'PY' || exit 1
import sys
def numbers(path):
    out = []
    for line in open(path):
        if line.startswith("step"):
            w = line.split()
            out.append([float(w[i]) for i in (1, 3, 6)])  # step, loss, accuracy
    return out
ref = numbers(sys.argv[1])
if len(ref) != 2:
    sys.exit("FAIL: expected 2 printed steps at -np 2, got %d" % len(ref))
for path in sys.argv[2:]:
    got = numbers(path)
    if len(got) != len(ref):
        sys.exit("FAIL: %s printed %d steps, -np 2 printed %d" % (path, len(got), len(ref)))
    for a, b in zip(ref, got):
        for x, y in zip(a, b):
            if abs(x - y) > 1e-5 * max(abs(x), 1e-30):
                sys.exit("FAIL: %s: %s differs from -np 2's %s" % (path, b, a))
print("PASS: -np 64 (16 x 4 and 2 x 32) prints -np 2's", ref)
PY
