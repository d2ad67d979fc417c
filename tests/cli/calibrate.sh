#!/usr/bin/env bash
# calibrate.sh GSL SRC: `gsl calibrate` writes a machine file the cost model
# reads (docs/cost-model.md): on thread ranks, then its MPI section beside
# the threads one; `gsl compile --stats json` predicts seconds with it
# (--mpi: the MPI section), the REPL's :cost names it; a broken file is a
# warning and the default model.
set -eu
gsl=$1 src=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
export GSL_MACHINE_DIR="$dir/machine"
"$gsl" calibrate --quick -np 2 >"$dir/threads.txt"
grep -q "wrote $dir/machine/machine.json" "$dir/threads.txt"
"$gsl" calibrate --quick --mpi -np 2 >"$dir/mpi.txt"
grep -q "calibrating MPI collectives on 2 ranks" "$dir/mpi.txt"
prog=$src/tests/training/mlp_adam.gsl
"$gsl" compile "$prog" -np 2 -D DP=2 --stats json >"$dir/threads.json"
"$gsl" compile "$prog" -np 2 -D DP=2 --stats json --mpi >"$dir/mpi.json"
env GSL_MACHINE_DIR="$dir/none" "$gsl" compile "$prog" -np 2 -D DP=2 --stats json >"$dir/default.json"
printf ':cost step\n' | "$gsl" repl "$prog" -np 2 -D DP=2 >"$dir/repl.txt" 2>&1
grep -q "machine model: calibrated .* collectives on threads (all_reduce" "$dir/repl.txt"
python3 - "$dir/machine/machine.json" "$dir/threads.json" "$dir/mpi.json" "$dir/default.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
assert set(m["transports"]) == {"threads", "mpi"}, m["transports"].keys()
kinds = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "collective_permute"}
for t, sec in m["transports"].items():
    assert sec["ranks"] == 2 and set(sec["collectives"]) == kinds, (t, sec)
    for k, l in sec["collectives"].items():
        assert l["latency_s"] >= 0 and l["bytes_per_s"] > 0, (t, k, l)
assert all(v > 0 for v in m["gemm_flops_per_s"].values()), m
assert m["memory_bytes_per_s"] > 0 and m["cache_bytes_per_s"] > 0 and m["elementwise_flops_per_s"] > 0 and m["call_overhead_s"] > 0, m
def step(path):
    s = json.load(open(path))
    return s["machine_model"], s["training"]["predicted_seconds"], s["training"]["collectives"]
mt, st, ct = step(sys.argv[2])
mm, sm, cm = step(sys.argv[3])
md, sd, cd = step(sys.argv[4])
assert mt["source"] == "calibrated" and mt["transport"] == "threads" and mt["cpu"] == m["cpu"], mt
assert mm["source"] == "calibrated" and mm["transport"] == "mpi", mm
assert md == {"source": "default", "transport": "threads"}, md
# The same step, the same compute; its collectives at each transport's rates.
assert st["gemm"] == sm["gemm"] and st["other"] == sm["other"], (st, sm)
def links(sec, coll):
    return sum(c["calls"] * sec["collectives"][k]["latency_s"] + c["bytes"] / sec["collectives"][k]["bytes_per_s"]
               for k, c in coll.items())
for s, t, c in ((st, "threads", ct), (sm, "mpi", cm)):
    want = links(m["transports"][t], c)
    assert abs(s["collectives"] - want) <= 1e-9 * (1 + want), (t, s, want)
    assert s["call"] == m["call_overhead_s"], s
# The default model: every FLOP at 100 GFLOP/s.
assert sd["call"] == 0, sd
print("PASS", json.dumps(st), json.dumps(sm))
PY
# A broken machine file: a warning naming it, and the default model.
echo '{"cpu": ' >"$dir/machine/machine.json"
"$gsl" compile "$prog" -np 2 -D DP=2 --stats json >"$dir/broken.json" 2>"$dir/broken.err"
grep -q "gsl: warning: $dir/machine/machine.json: not a machine file written by gsl calibrate" "$dir/broken.err"
grep -q '"source": "default"' "$dir/broken.json"
