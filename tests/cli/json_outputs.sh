#!/usr/bin/env bash
# json_outputs.sh GSL SRC: what gsl writes as JSON parses as JSON, with its
# keys in their documented order: `gsl run --log` (one object per training
# step) and `gsl compile --stats json`.
set -eu
gsl=$1 src=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
"$gsl" run "$src/tests/training/mlp_adam.gsl" --log "$dir/log.jsonl" >/dev/null 2>&1
"$gsl" compile "$src/examples/moe.gsl" --stats json >"$dir/stats.json"
python3 - "$dir/log.jsonl" "$dir/stats.json" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert lines, "the log is empty"
for i, l in enumerate(lines):
    o = json.loads(l, object_pairs_hook=lambda kv: kv)
    # mlp_adam regresses f32 rows: its throughput is examples/s (an i32
    # first input, token ids, gives "tokens_per_s").
    assert [k for k, _ in o] == ["step", "loss", "examples_per_s", "elapsed_s", "compile_s"], l
    d = dict(o)
    assert d["step"] == i + 1 and isinstance(d["loss"], float) and isinstance(d["examples_per_s"], int), l
    assert isinstance(d["compile_s"], (int, float)) and d["compile_s"] >= 0, l
s = json.load(open(sys.argv[2]), object_pairs_hook=lambda kv: kv)
assert [k for k, _ in s] == ["np", "param_bytes_per_rank", "functions"], s
fns = dict(s)["functions"]
assert fns, "no functions"
for name, f in fns:
    assert [k for k, _ in f] == ["jit_peak_bytes", "flops", "param_bytes", "peak_activation_bytes", "collectives"], name
    for kind, c in dict(f)["collectives"]:
        assert [k for k, _ in c] == ["calls", "bytes"], kind
print("PASS", len(lines), "log lines,", len(fns), "functions")
PY
