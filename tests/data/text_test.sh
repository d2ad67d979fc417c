#!/bin/sh
# text_test.sh GSL PYTHON ROOT: a byte-level LM (tests/data/text_lm.gsl)
# trained from a text file by text_bytes, with evaluate's validation loss
# every 25 steps. The corpus is a slice of the project's README (real
# English, no download). At -np 1, 2 and 4 and -np 2 --mpi:
#   - every training batch and the validation batches are the same, exactly
#     (their digests: the split and the shuffle do not depend on -np);
#   - every step's loss and every val_loss within 1e-5 relative of -np 1's;
#   - each rank reads the same number of bytes, together what -np 1 reads
#     (each reads only its rows: the "data" events of --trace);
#   - val_loss is in the --log records of the evaluation steps, only those,
#     and on the progress line.
# Another --seed shuffles the training windows otherwise and leaves the
# validation batches as they were.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
GSL=$1 PY=$2 ROOT=$3
. "$HERE/common.sh"

head -c 25000 "$ROOT/README.md" > corpus.txt
run() {  # run NAME ARGS...: log.NAME, trace.NAME, err.NAME (the progress lines)
  name=$1
  shift
  "$GSL" run "$HERE/text_lm.gsl" --log "log.$name" --trace "trace.$name" "$@" > "out.$name" 2> "err.$name" ||
    { cat "err.$name"; fail "$*"; }
}
run np1 -np 1
grep -q "val_loss" err.np1 || { cat err.np1; fail "no val_loss on the progress line"; }
for r in "np2 -np 2" "np4 -np 4" "mpi2 -np 2 --mpi" "seed5 -np 2 --seed 5"; do
  set -- $r
  name=$1
  shift
  run "$name" "$@"
  "$PY" - "$name" "$2" <<'PY' || fail "$*"
import json, sys
name, np_ = sys.argv[1], int(sys.argv[2])
def records(n):
    return [json.loads(l) for l in open("log." + n)]
def read_bytes(n):
    read = {}
    for e in json.load(open("trace." + n))["traceEvents"]:
        if e.get("cat") == "data":
            read[e["pid"]] = read.get(e["pid"], 0) + e["args"]["bytes"]
    return read
ref, got = records("np1"), records(name)
assert len(ref) == len(got) == 150, (len(ref), len(got))
evals = [r["step"] for r in ref if "val_loss" in r]
assert evals == list(range(25, 151, 25)), evals
val = ["val_loss", "val_first", "val_digest"]
for a, b in zip(ref, got):
    assert a["step"] == b["step"]
    assert [k in b for k in val] == [a["step"] in evals] * 3, b
if name == "seed5":
    # Another order of the training windows; the same validation batches.
    assert sum(a["digest"] != b["digest"] for a, b in zip(ref, got)) > 140
    assert all(a.get("val_digest") == b.get("val_digest") for a, b in zip(ref, got))
    print("--seed 5: other training batches, the same validation batches")
    sys.exit(0)
worst = 0.0
for a, b in zip(ref, got):
    assert a["digest"] == b["digest"], ("training batch", a, b)
    assert a.get("val_digest") == b.get("val_digest"), ("validation batches", a, b)
    for k in ["loss", "val_loss", "val_first"]:
        if k in a:
            worst = max(worst, abs(a[k] - b[k]) / abs(a[k]))
assert worst <= 1e-5, worst
r1, rn = read_bytes("np1"), read_bytes(name)
assert sorted(rn) == list(range(np_)), rn
assert len(set(rn.values())) == 1 and sum(rn.values()) == r1[0], (r1, rn)
print("  the same %d training batches and validation batches, losses within %.1e; each of %d ranks read %d bytes"
      % (len(got), worst, np_, rn[0]))
PY
  echo "$*: ok"
done
last=$(tail -n 1 log.np1)
echo "-np 1, last record: $last"
echo "PASS"
