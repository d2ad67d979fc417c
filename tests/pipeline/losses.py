#!/usr/bin/env python3
"""Pipelined training equals unpipelined training.

Runs examples/transformer.gsl (L = 4 or 8 layers) for 20 steps unpipelined
(PP = 1, MB = 1) and pipelined over S stages with M microbatches, in one
round (R = 1) or circular (R = 2 rounds), at several -np, on both engines
and as MPI ranks, and checks every step's
loss against the unpipelined run's to 1e-5 relative (the microbatches
only change the order in which the gradients' sums are added).

usage: losses.py GSL SOURCE_DIR [--quick]
"""
import json
import os
import subprocess
import sys
import tempfile

gsl, src = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
prog = os.path.join(src, "examples", "transformer.gsl")
STEPS = 20

# (np, L, PP, MB, RR, extra options); circular (RR = 2) needs MB >= PP
configs = [
    (2, 4, 2, 1, 1, []), (2, 4, 2, 2, 1, []), (2, 4, 2, 4, 1, []), (2, 4, 2, 8, 1, []),
    (4, 4, 2, 2, 1, []), (4, 4, 4, 1, 1, []), (4, 4, 4, 4, 1, []), (4, 4, 1, 4, 1, []),
    (8, 4, 4, 2, 1, []), (8, 4, 2, 8, 1, []),
    (4, 4, 4, 2, 1, ["--engine", "interp"]),
    (4, 4, 2, 4, 1, ["--mpi"]),
    (2, 4, 2, 2, 2, []), (2, 4, 2, 8, 2, []), (4, 8, 4, 4, 2, []), (8, 8, 4, 8, 2, []),
    (4, 8, 4, 4, 2, ["--engine", "interp"]),
    (4, 4, 2, 4, 2, ["--mpi"]),
]


def losses(np_, L, pp, mb, rr, extra, tmp):
    log = os.path.join(tmp, f"log_{np_}_{L}_{pp}_{mb}_{rr}_{len(extra)}.jsonl")
    cmd = [gsl, "run", prog, "-np", str(np_), "-D", f"STEPS={STEPS}", "-D", f"L={L}", "-D", f"PP={pp}",
           "-D", f"MB={mb}", "-D", f"RR={rr}", "--log", log, "--no-progress", "--no-cache"] + extra
    r = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
    if r.returncode != 0:
        print("FAIL:", " ".join(cmd), "\n", r.stdout, r.stderr)
        sys.exit(1)
    with open(log) as f:
        return [json.loads(line)["loss"] for line in f]


with tempfile.TemporaryDirectory() as tmp:
    worst = 0.0
    refs = {}
    for np_, L, pp, mb, rr, extra in configs:
        if (np_, L) not in refs:
            refs[(np_, L)] = losses(np_, L, 1, 1, 1, [], tmp)
        ref = refs[(np_, L)]
        got = losses(np_, L, pp, mb, rr, extra, tmp)
        if len(got) != len(ref):
            print(f"FAIL: -np {np_} L={L} PP={pp} MB={mb} RR={rr}: {len(got)} steps, expected {len(ref)}")
            sys.exit(1)
        for step, (a, b) in enumerate(zip(got, ref)):
            rel = abs(a - b) / max(abs(b), 1e-30)
            worst = max(worst, rel)
            if rel > 1e-5:
                print(f"FAIL: -np {np_} L={L} PP={pp} MB={mb} RR={rr} {' '.join(extra)}: step {step + 1} loss {a} vs {b} "
                      f"unpipelined (rel {rel:.2e})")
                sys.exit(1)
        print(f"ok: -np {np_} L={L} PP={pp} MB={mb} RR={rr} {' '.join(extra)}: {len(got)} losses equal the unpipelined run's")
    print(f"PASS ({len(configs)} pipelined runs, worst relative difference {worst:.2e})")
