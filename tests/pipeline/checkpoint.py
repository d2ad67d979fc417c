#!/usr/bin/env python3
"""A checkpoint written by a pipelined run resumes unpipelined, and back.

The params and optimizer states in the checkpoint are the same global
tensors whatever the stages: 6 steps pipelined (PP = 2, MB = 2) then 6
steps unpipelined from its checkpoint give the losses of 12 unpipelined
steps (1e-5 relative), and 6 unpipelined steps then 6 pipelined ones
(PP = 4, MB = 4) too.

usage: checkpoint.py GSL SOURCE_DIR
"""
import json
import os
import subprocess
import sys
import tempfile

gsl, src = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
prog = os.path.join(src, "examples", "transformer.gsl")


def run(tmp, name, steps, pp, mb, resume=None):
    log = os.path.join(tmp, name + ".jsonl")
    cmd = [gsl, "run", prog, "-np", "4", "-D", "L=4", "-D", f"STEPS={steps}", "-D", f"PP={pp}", "-D", f"MB={mb}",
           "--log", log, "--no-progress"]
    if resume:
        cmd += ["--resume", resume]
    r = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
    if r.returncode != 0:
        print("FAIL:", " ".join(cmd), "\n", r.stdout, r.stderr)
        sys.exit(1)
    with open(log) as f:
        return {d["step"]: d["loss"] for d in map(json.loads, f)}


def same(got, want, what):
    for step, loss in got.items():
        ref = want[step]
        if abs(loss - ref) > 1e-5 * abs(ref):
            print(f"FAIL: {what}: step {step} loss {loss}, the unpipelined run's {ref}")
            sys.exit(1)
    if not got:
        print(f"FAIL: {what}: no steps")
        sys.exit(1)


with tempfile.TemporaryDirectory() as tmp:
    full = run(tmp, "full", 12, 1, 1)
    run(tmp, "first_pp", 6, 2, 2)
    os.rename(os.path.join(tmp, "transformer.safetensors"), os.path.join(tmp, "pp.safetensors"))
    resumed = run(tmp, "then_plain", 12, 1, 1, "pp.safetensors")
    if sorted(resumed) != list(range(7, 13)):
        print(f"FAIL: the resumed run took steps {sorted(resumed)}, expected 7..12")
        sys.exit(1)
    same(resumed, full, "pipelined checkpoint resumed unpipelined")
    run(tmp, "first_plain", 6, 1, 1)
    os.rename(os.path.join(tmp, "transformer.safetensors"), os.path.join(tmp, "plain.safetensors"))
    same(run(tmp, "then_pp", 12, 4, 4, "plain.safetensors"), full, "unpipelined checkpoint resumed pipelined")
    print("PASS: a pipelined checkpoint resumes unpipelined and an unpipelined one pipelined, to the same losses")
