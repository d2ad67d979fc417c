#!/usr/bin/env bash
# json_outputs.sh GSL SRC: what gsl writes as JSON parses as JSON, with its
# keys in their documented order: `gsl run --log` (one object per training
# step) and `gsl compile --stats json`.
set -eu
gsl=$1 src=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
export GSL_MACHINE_DIR="$dir/no-machine"  # the default model, whatever this machine has calibrated
"$gsl" run "$src/tests/training/mlp_adam.gsl" --log "$dir/log.jsonl" >/dev/null 2>&1
"$gsl" compile "$src/examples/moe.gsl" --stats json >"$dir/stats.json"
mlp=$src/tests/training/mlp_adam.gsl
"$gsl" compile "$mlp" --stats json -np 1 >"$dir/train1.json"
"$gsl" compile "$mlp" --stats json -np 4 -D DP=2 -D MP=2 >"$dir/train4.json"
"$gsl" compile "$src/tests/programs/reductions.gsl" --stats json >"$dir/notrain.json"
python3 - "$dir/log.jsonl" "$dir/stats.json" "$dir/train1.json" "$dir/train4.json" "$dir/notrain.json" <<'PY'
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
assert [k for k, _ in s] == ["np", "param_bytes_per_rank", "functions", "training", "memory", "machine_model"], s
# No machine file (GSL_MACHINE_DIR is empty): the default model's seconds.
assert dict(dict(s)["machine_model"]) == {"source": "default", "transport": "threads"}, s
def seconds(p):
    assert [k for k, _ in p] == ["gemm", "other", "call", "collectives", "total"], p
    p = dict(p)
    assert all(v >= 0 for v in p.values()) and abs(p["total"] - sum(v for k, v in p.items() if k != "total")) <= 1e-12 * (1 + p["total"]), p
mem = dict(dict(s)["memory"])
assert list(mem) == ["param_bytes", "optimizer_state_bytes", "largest_computation_bytes", "total_bytes"], mem
assert mem["total_bytes"] == mem["param_bytes"] + mem["optimizer_state_bytes"] + mem["largest_computation_bytes"], mem
fns = dict(s)["functions"]
assert fns, "no functions"
for name, f in fns:
    assert [k for k, _ in f] == ["jit_peak_bytes", "flops", "param_bytes", "peak_activation_bytes", "collectives",
                                 "predicted_seconds"], name
    seconds(dict(f)["predicted_seconds"])
    # The default model: every FLOP at 100 GFLOP/s.
    assert abs(dict(dict(f)["predicted_seconds"])["gemm"] + dict(dict(f)["predicted_seconds"])["other"]
               - dict(f)["flops"] / 100e9) <= 1e-9, name
    for kind, c in dict(f)["collectives"]:
        assert [k for k, _ in c] == ["calls", "bytes"], kind
# "training": the step opt.minimize runs in fn main, bytes per rank.
keys = ["param_bytes", "grad_bytes", "optimizer_state_bytes", "input_bytes", "activation_bytes", "result_bytes",
        "peak_bytes"]
# ... then what one step sends per rank: "collective_bytes" and, by kind,
# "collectives" (calls and bytes, as a function's).
def training(path):
    t = json.load(open(path), object_pairs_hook=lambda kv: kv)
    assert [k for k, _ in t][-3:] == ["training", "memory", "machine_model"], t
    tr = dict(t)["training"]
    assert [k for k, _ in tr] == keys + ["collective_bytes", "collectives", "predicted_seconds"], tr
    tr = dict(tr)
    seconds(tr.pop("predicted_seconds"))
    sent = 0
    for kind, c in tr.pop("collectives"):
        assert [k for k, _ in c] == ["calls", "bytes"], kind
        sent += dict(c)["bytes"]
    assert tr.pop("collective_bytes") == sent, tr
    assert all(isinstance(v, int) and v >= 0 for v in tr.values()), tr
    assert tr["param_bytes"] == dict(t)["param_bytes_per_rank"], tr
    assert tr["peak_bytes"] == sum(tr[k] for k in keys[:-1] if k != "grad_bytes"), tr
    assert tr["activation_bytes"] > 0 and tr["input_bytes"] > 0, tr
    return tr
# mlp_adam: w1 [8, 16], b1 [16], w2 [16, 1], f32, all trained by Adam (m, v).
t1, t4 = training(sys.argv[3]), training(sys.argv[4])
assert t1["param_bytes"] == (8 * 16 + 16 + 16) * 4, t1
assert t1["grad_bytes"] == t1["param_bytes"] and t1["optimizer_state_bytes"] == 2 * t1["param_bytes"], t1
# data 2 x model 2: every param split over model (2 ways), so are their
# gradients and states; the step's intermediate values over data and model.
assert t4["param_bytes"] == t1["param_bytes"] // 2, t4
assert t4["grad_bytes"] == t4["param_bytes"] and t4["optimizer_state_bytes"] == 2 * t4["param_bytes"], t4
assert t4["activation_bytes"] < t1["activation_bytes"], (t1, t4)
# No training step: no "training" key (the run's "memory" still).
n = json.load(open(sys.argv[5]), object_pairs_hook=lambda kv: kv)
assert [k for k, _ in n] == ["np", "param_bytes_per_rank", "functions", "memory", "machine_model"], n
print("PASS", len(lines), "log lines,", len(fns), "functions, training", t1, t4)
PY
