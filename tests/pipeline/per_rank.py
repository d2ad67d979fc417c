#!/usr/bin/env python3
"""Each rank runs its own stage, in every pipelined program of the Transformer.

Compiles examples/transformer.gsl pipelined (`gsl compile --emit spmd`) at
several -np, S, M and R, and checks the per-rank programs (the training
step and the forward functions): every stage loop (attribute stage_mesh)
(the loop in a time loop's body) runs S / S = 1 iteration, the rank's own
stage, and nothing inside a loop body gathers or exchanges over the stage
axis (no all_gather, all_to_all, reduce_scatter: the stages' weights and
state stay split; the shift is the one collective_permute per iteration). A stage loop that fell back
(every rank running every stage on gathered layers) gives the same
numbers, so tests/pipeline/losses.py cannot see it; this test does.

usage: per_rank.py GSL SOURCE_DIR
"""
import os
import re
import subprocess
import sys

gsl, src = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
prog = os.path.join(src, "examples", "transformer.gsl")
# (np, L, PP, MB, RR)
configs = [(2, 4, 2, 4, 1), (2, 4, 2, 4, 2), (4, 4, 4, 4, 1), (4, 8, 4, 4, 2), (8, 4, 2, 8, 1), (8, 8, 4, 8, 2)]
fails = 0
for np_, L, pp, mb, rr in configs:
    cmd = [gsl, "compile", prog, "--emit", "spmd", "--np", str(np_), "-D", f"L={L}", "-D", f"PP={pp}",
           "-D", f"MB={mb}", "-D", f"RR={rr}"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print("FAIL:", " ".join(cmd), r.stderr)
        sys.exit(1)
    name = f"-np {np_} L={L} PP={pp} MB={mb} RR={rr}"
    mesh = re.search(r"mesh @m = \[([^\]]*)\]", r.stdout).group(1)
    stage = [a.split(":")[0].strip() for a in mesh.split(",")].index("stage")
    on_stage = re.compile(r"= (all_gather|all_to_all|reduce_scatter) .*axes = \[([0-9, ]*)\]")
    stage_loops, bad = 0, []
    time_indent = None  # the indentation of the time loop being read
    for line in r.stdout.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        if time_indent is not None and indent <= time_indent:
            time_indent = None
        if " = loop " in line and "pipeline_microbatches" in line:
            time_indent = indent
        elif time_indent is not None and indent == time_indent + 2 and " = loop " in line:
            stage_loops += 1  # the loop over the stages, in a time loop's body
            trip = re.search(r"\btrip = (\d+)", line)
            if not trip or trip.group(1) != "1":
                bad.append("a stage loop of trip " + (trip.group(1) if trip else "?") + " (expected 1)")
        m = on_stage.search(line)
        if indent >= 6 and m and str(stage) in [a.strip() for a in m.group(2).split(",")]:
            bad.append(line.strip()[:120])
    if stage_loops == 0:
        bad.append("no stage loop")
    if bad:
        fails += 1
        print(f"FAIL: {name}:", *bad[:5], sep="\n  ")
    else:
        print(f"ok: {name}: {stage_loops} stage loops, each one iteration a rank, nothing gathered over the stages "
              "in a loop")
if fails:
    sys.exit(1)
print(f"PASS ({len(configs)} programs)")
