#!/usr/bin/env python3
"""The 600B MoE model with pipeline stages (examples/gshard_600b_pipeline.gsl).

1. `gsl compile ... -np 2048 --stats json` at PP = 1, 2 (L = 36) and
   PP = 1, 2, 4 (L = 32, so that the 16 layer pairs split into 4 stages):
   param_bytes_per_rank equals the count by hand from the shapes, and the
   stacked groups' replicated members are the only part that drops, by PP
   (the experts are split over all NP devices either way; embeddings,
   positions, unembedding and the final norm are replicated). At PP = 1 it
   is examples/gshard_600b.gsl's 3700637696 bytes.
2. A small instance trains pipelined (-np 4, PP = 2, MB = 2 and 4) with the
   losses of the unpipelined run (PP = 1, MB = 1) to 1e-5 relative, for 6
   steps. (MoE routing is discontinuous: after ~8 steps the different order
   of the gradients' sums over microbatches flips a routing decision and
   the runs drift apart by ~1e-4, at PP = 1 with MB = 2 as well.)

usage: gshard_600b.py GSL SOURCE_DIR
"""
import json
import os
import subprocess
import sys
import tempfile

gsl, src = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
prog = os.path.join(src, "examples", "gshard_600b_pipeline.gsl")
orig = os.path.join(src, "examples", "gshard_600b.gsl")


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def param_bytes(path, defs):
    cmd = [gsl, "compile", path, "-np", "2048", "--stats", "json"]
    for d in defs:
        cmd += ["-D", d]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        fail(" ".join(cmd) + "\n" + r.stdout + r.stderr)
    return json.loads(r.stdout)["param_bytes_per_rank"]


# By hand, f32 params per rank at -np 2048 (M = 1024, H = 8192, NH x HD = M,
# E = 2048, V = 64000, S = 1024).
M, H, E, V, S, NP = 1024, 8192, 2048, 64000, 1024, 2048
rest = V * M + S * M + M * V + 2 * M                  # emb, pos, unemb, lno_g/b
dense_pair = 4 * M * M + 4 * M + 2 * M * H + H + M      # attention, 2 norms, FFN
sparse_repl = 4 * M * M + 4 * M + M * E                 # attention, 2 norms, gate
expert_pair = 2 * M * H * E // NP                       # wi + wx of E / NP experts


def expected(L, PP):
    LP = L // 2
    groups = LP * (dense_pair + sparse_repl) // PP     # split over the stages
    experts = LP * expert_pair                          # LP / PP layers x PP x the experts per device
    return 4 * (rest + groups + experts), 4 * LP * (dense_pair + sparse_repl)


base = param_bytes(orig, [])
if base != 3700637696:
    fail(f"examples/gshard_600b.gsl: param_bytes_per_rank {base}, expected 3700637696")
for L, pps in ((36, (1, 2)), (32, (1, 2, 4))):
    one = None
    for pp in pps:
        got = param_bytes(prog, [f"L={L}", f"PP={pp}", f"MB={pp}"])
        want, groups = expected(L, pp)
        if got != want:
            fail(f"L={L} PP={pp}: param_bytes_per_rank {got}, by hand {want}")
        if pp == 1:
            one = got
            if L == 36 and got != base:
                fail(f"PP=1: {got} bytes, examples/gshard_600b.gsl has {base}")
        elif one - got != groups - groups // pp:
            fail(f"L={L} PP={pp}: {one - got} bytes fewer than PP=1, expected the groups' {groups} bytes / {pp}")
        print(f"ok: -np 2048 L={L} PP={pp}: param_bytes_per_rank {got} (groups' replicated members "
              f"{groups // pp} = {groups} / {pp})")

STEPS = 6
small = ["L=4", "M=8", "H=16", "NH=2", "E=4", "V=16", "S=8", "B=8", "GS=8", f"STEPS={STEPS}"]


def losses(pp, mb, tmp):
    log = os.path.join(tmp, f"log_{pp}_{mb}.jsonl")
    cmd = [gsl, "run", prog, "-np", "4", "-D", f"PP={pp}", "-D", f"MB={mb}", "--log", log, "--no-progress",
           "--no-cache"]
    for d in small:
        cmd += ["-D", d]
    r = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
    if r.returncode != 0:
        fail(" ".join(cmd) + "\n" + r.stdout + r.stderr)
    with open(log) as f:
        return [json.loads(line)["loss"] for line in f]


with tempfile.TemporaryDirectory() as tmp:
    ref = losses(1, 1, tmp)
    worst = 0.0
    for pp, mb in ((2, 2), (2, 4)):
        got = losses(pp, mb, tmp)
        if len(got) != STEPS or len(ref) != STEPS:
            fail(f"PP={pp} MB={mb}: {len(got)} and {len(ref)} losses, expected {STEPS}")
        for step, (a, b) in enumerate(zip(got, ref)):
            rel = abs(a - b) / max(abs(b), 1e-30)
            worst = max(worst, rel)
            if rel > 1e-5:
                fail(f"-np 4 PP={pp} MB={mb}: step {step + 1} loss {a} vs {b} unpipelined (rel {rel:.2e})")
        print(f"ok: -np 4 PP={pp} MB={mb}: {STEPS} losses equal the unpipelined run's")
    print(f"PASS (worst relative difference {worst:.2e})")
