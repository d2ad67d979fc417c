#!/bin/sh
# gsl trace summary (docs/trace.md): the tables of a trace of
# tests/trace/summary.gsl at -np 2, checked against what the program
# predicts (the training step STEPS times per rank, the evaluation once) and
# against the trace's own events; a bad file is a clean error, exit 1.
#   usage: summary_test.sh GSL SOURCE_DIR
set -eu
GSL=$1 SRC=$2 T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T"
fail() {
  echo "FAIL: $1" >&2
  exit 1
}

"$GSL" run "$SRC/tests/trace/summary.gsl" -np 2 -D STEPS=3 --no-cache --no-progress --trace t.json > run.out
"$GSL" trace summary t.json > sum.txt || fail "gsl trace summary exited $?"
"$GSL" trace summary t.json --by-rank > rank.txt || fail "gsl trace summary --by-rank exited $?"
python3 "$SRC/tests/trace/check_summary.py" t.json sum.txt rank.txt 2 3 || fail "the tables (above)"

# A pipeline (docs/pipeline.md): 2 stages, 4 microbatches at -np 2. Each
# rank's training-step calls carry the schedule; the table has a row per
# rank with its stage, S, M, R, the predicted bubble 1/5, and bubble time
# inside the loop time (the values are timings: only their order is
# checked). The trace has M + S - 1 = 5 forward shifts per call, and the
# backward ones a multiple of 5.
"$GSL" run "$SRC/examples/transformer.gsl" -np 2 -D STEPS=4 -D L=2 -D PP=2 -D MB=4 --no-cache --no-progress \
  --trace p.json > prun.out
"$GSL" trace summary p.json > psum.txt || fail "gsl trace summary of the pipeline exited $?"
python3 - p.json psum.txt <<'PY' || fail "the pipeline table (above)"
import json, sys
doc = json.load(open(sys.argv[1]))
ev = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
text = open(sys.argv[2]).read().splitlines()
i = next(k for k, l in enumerate(text) if l.startswith("pipeline stages"))
cols = ["rank", "function", "stage", "S", "M", "R", "calls", "loop", "bubble", "wait", "idle", "predicted"]
assert text[i + 1].split() == ["rank", "function", "stage", "S", "M", "R", "calls", "loop", "ms", "bubble", "ms",
                               "wait", "ms", "idle", "predicted"], text[i + 1]
rows = [dict(zip(cols, l.split())) for l in text[i + 2:] if l.strip()]
assert sorted(set(r["rank"] for r in rows)) == ["0", "1"], rows
for r in rows:
    assert r["stage"] == r["rank"] and (r["S"], r["M"], r["R"]) == ("2", "4", "1"), r
    assert r["predicted"] == "0.200", r
    assert int(r["calls"]) >= 1, r
    assert 0 < float(r["bubble"]) < float(r["loop"]), r
steps = [e for e in ev if e["cat"] == "function" and "train_step" in e.get("args", {})]
assert steps and all(e["args"]["pipeline_stages"] == 2 and e["args"]["pipeline_stage"] == e["pid"] for e in steps)
for f in steps:
    n = sum(1 for e in ev if e["pid"] == f["pid"] and e["tid"] == f["tid"] and e["name"] == "collective_permute"
            and f["ts"] <= e["ts"] <= f["ts"] + f["dur"])
    assert n >= 10 and n % 5 == 0, n
print("pipeline table:", len(rows), "rows")
PY

# A bad file: one line on stderr, nothing on stdout, exit 1.
expect_error() {  # FILE MESSAGE
  set +e
  "$GSL" trace summary "$1" > out.txt 2> err.txt
  rc=$?
  set -e
  [ "$rc" = 1 ] || fail "$1: exit $rc"
  [ ! -s out.txt ] || fail "$1: output $(cat out.txt)"
  [ "$(cat err.txt)" = "$2" ] || fail "$1: the message is '$(cat err.txt)', expected '$2'"
}
echo 'not json' > bad.json
expect_error bad.json "gsl: error: 'bad.json' is not JSON: parse error at line 1, column 2: syntax error while parsing value - invalid literal; last read: 'no'"
echo '{"events": []}' > other.json
expect_error other.json "gsl: error: 'other.json' is not a trace of gsl run --trace: it has no \"traceEvents\" array"
echo '{"traceEvents": [{"ph": "X", "name": "f", "cat": "function", "ts": 0, "pid": 0, "tid": 0}]}' > nodur.json
expect_error nodur.json "gsl: error: 'nodur.json': trace event 0 has no \"dur\" number"
expect_error missing.json "gsl: error: cannot read 'missing.json': No such file or directory"
echo PASS
