#!/usr/bin/env python3
"""MoE telemetry against a NumPy recount on fixed inputs (issue 34).

  telemetry_test.py GSL SOURCE_DIR

Runs tests/moe/telemetry.gsl (two MoE layers, top-2 with the second expert
always wanted, 3 SGD steps) on fixed random inputs at -np 2 (threads) with
--log and --trace, once with E = 4 experts (every expert's count in the
log) and once with E = 32 (min/mean/max). The program saves each step's
router logits (an aux output of opt.minimize). From those logits alone this
script recounts GShard's top-2 gating with capacity (stdlib/moe.gsl
top2_gating) in float64 NumPy: tokens per expert, dropped fraction,
overload (max/mean), router entropy and the aux loss of every layer and
step, and requires the --log JSONL records (parsed with json), the trace's
counter events and the progress line to carry them. Prints PASS, or FAIL
and exits 1. Exit 77 (skipped) without NumPy.
"""
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("SKIP: no NumPy")
    sys.exit(77)

GSL, SRC = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
PROGRAM = os.path.join(SRC, "tests", "moe", "telemetry.gsl")
G, S, M, STEPS, LAYERS = 4, 24, 8, 3, 2
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def close(got, want, rel, what):
    if not (abs(got - want) <= rel * max(1.0, abs(want))):
        fail("%s: got %r, the NumPy recount %r" % (what, got, want))


def recount(logits, C):
    """top2_gating with policy MOE_ALL on logits [G, S, E], in float64."""
    z = logits.astype(np.float64)
    Gn, Sn, E = z.shape
    srt = np.sort(z, axis=-1)
    # The routing must not hinge on float rounding: the top three logits
    # of every token are apart.
    gap = min(np.min(srt[..., -1] - srt[..., -2]), np.min(srt[..., -2] - srt[..., -3])) if E >= 3 else 1
    assert gap > 1e-4, "fixture has a near tie between logits (%g): pick another seed" % gap
    p = np.exp(z - z.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    eye = np.eye(E)
    mask1 = eye[np.argmax(z, -1)]
    aux = np.mean(mask1.mean(axis=1) * p.mean(axis=1)) * E * E
    mask2 = eye[np.argmax(np.where(mask1 > 0, -np.inf, z), -1)]
    pos1 = np.cumsum(mask1, axis=1) - mask1  # exclusive
    kept1 = mask1 * (pos1 < C)
    pos2 = np.cumsum(mask2, axis=1) - mask2 + kept1.sum(axis=1, keepdims=True)
    kept2 = mask2 * (pos2 < C)
    tokens = (kept1 + kept2).sum(axis=(0, 1))
    dropped = 1.0 - tokens.sum() / (mask1.sum() + mask2.sum())
    entropy = np.mean(-(p * np.log(p)).sum(-1))
    return {"tokens": tokens, "dropped": dropped, "overload": tokens.max() / tokens.mean(),
            "entropy": entropy, "aux": aux}


def check_layer(got, want, E, what):
    if got.get("layer") is None:
        fail(what + ": no layer number")
    if E <= 16:
        if got.get("tokens") != [int(t) for t in want["tokens"]]:
            fail("%s tokens: got %r, the NumPy recount %r" % (what, got.get("tokens"), want["tokens"].tolist()))
        if "tokens_min" in got:
            fail(what + ": min/mean/max logged for E <= 16")
    else:
        if "tokens" in got:
            fail(what + ": every expert's count logged for E > 16")
        close(got.get("tokens_min", -1), want["tokens"].min(), 0, what + " tokens_min")
        close(got.get("tokens_max", -1), want["tokens"].max(), 0, what + " tokens_max")
        close(got.get("tokens_mean", -1), want["tokens"].mean(), 1e-6, what + " tokens_mean")
    close(got["dropped"], want["dropped"], 1e-6, what + " dropped")
    close(got["overload"], want["overload"], 1e-5, what + " overload")
    close(got["entropy"], want["entropy"], 1e-5, what + " entropy")
    close(got["aux"], want["aux"], 1e-5, what + " aux")


def run(E):
    C = int(np.ceil(2.0 * S / E))
    with tempfile.TemporaryDirectory() as d:
        np.save(os.path.join(d, "x.npy"), np.random.default_rng(7).normal(size=(G, S, M)).astype(np.float32))
        cmd = [GSL, "run", PROGRAM, "-np", "2", "-D", "E=%d" % E, "--log", "log.jsonl", "--trace", "trace.json"]
        r = subprocess.run(cmd, cwd=d, capture_output=True, text=True)
        if r.returncode != 0:
            fail("E=%d: gsl run exited %d:\n%s%s" % (E, r.returncode, r.stdout, r.stderr))
            return
        with open(os.path.join(d, "log.jsonl")) as f:
            records = [json.loads(line) for line in f]
        with open(os.path.join(d, "trace.json")) as f:
            trace = json.load(f)
        want = []  # [step][layer]
        for s in range(STEPS):
            logits = np.load(os.path.join(d, "logits%d.npy" % s))
            if logits.shape != (LAYERS, G, S, E):
                fail("E=%d: logits%d.npy has shape %r" % (E, s, logits.shape))
                return
            want.append([recount(logits[l], C) for l in range(LAYERS)])
        stderr = r.stderr
    # Sanity of the fixture: some tokens dropped, the load not balanced.
    if not any(w["dropped"] > 0 for ws in want for w in ws) or not any(w["overload"] > 1 for ws in want for w in ws):
        fail("E=%d: the fixture drops nothing or is balanced: the test would not see a wrong count" % E)

    # --log: one record per step, "moe" with both layers, "first" with layer 0.
    if [rec.get("step") for rec in records] != list(range(1, STEPS + 1)):
        fail("E=%d: log steps %r" % (E, [rec.get("step") for rec in records]))
        return
    for s, rec in enumerate(records):
        layers = rec.get("moe")
        if not isinstance(layers, list) or len(layers) != LAYERS:
            fail("E=%d step %d: 'moe' is %r" % (E, s, layers))
            continue
        for l in range(LAYERS):
            if layers[l].get("layer") != l:
                fail("E=%d step %d: layer %d numbered %r" % (E, s, l, layers[l].get("layer")))
            check_layer(layers[l], want[s][l], E, "E=%d log step %d moe layer %d" % (E, s, l))
        first = rec.get("first")
        if not isinstance(first, list) or len(first) != 1:
            fail("E=%d step %d: 'first' is %r" % (E, s, first))
        else:
            check_layer(first[0], want[s][0], E, "E=%d log step %d first" % (E, s))

    # The trace: counter events on rank 0, per step and layer, in order.
    counters = [e for e in trace["traceEvents"] if e.get("ph") == "C"]
    if any(e.get("pid") != 0 or e.get("cat") != "moe" for e in counters):
        fail("E=%d: a counter event off rank 0 or not of category moe" % E)
    for l in range(LAYERS):
        main = [e for e in counters if e["name"] == "moe[%d]" % l]
        tok = [e for e in counters if e["name"] == "moe[%d] tokens" % l]
        if len(main) != STEPS or len(tok) != STEPS:
            fail("E=%d: %d 'moe[%d]' and %d 'moe[%d] tokens' counter events, expected %d each"
                 % (E, len(main), l, len(tok), l, STEPS))
            continue
        if sorted(e["ts"] for e in main) != [e["ts"] for e in main]:
            fail("E=%d: counter events out of time order" % E)
        for s in range(STEPS):
            w = want[s][l]
            a = main[s]["args"]
            what = "E=%d trace step %d layer %d" % (E, s, l)
            if set(a) != {"dropped", "overload", "entropy", "aux"}:
                fail("%s: series %r" % (what, sorted(a)))
                continue
            for k in ("dropped", "overload", "entropy", "aux"):
                close(a[k], w[k], 1e-5, what + " " + k)
            t = tok[s]["args"]
            if E <= 16:
                close(len(t), E, 0, what + " token series")
                for e in range(E):
                    close(t.get("e%d" % e, -1), w["tokens"][e], 0, what + " tokens e%d" % e)
            else:
                if set(t) != {"min", "mean", "max"}:
                    fail("%s: token series %r" % (what, sorted(t)))
                    continue
                close(t["min"], w["tokens"].min(), 0, what + " tokens min")
                close(t["max"], w["tokens"].max(), 0, what + " tokens max")
                close(t["mean"], w["tokens"].mean(), 1e-6, what + " tokens mean")

    # The progress line of the last step: the mean dropped fraction over
    # the layers and the largest overload.
    last = [line for line in stderr.splitlines() if line.startswith("step %d " % (STEPS - 1))]
    w = want[STEPS - 1]
    summary = "moe drop %.1f%% over %.2f" % (100 * sum(x["dropped"] for x in w) / LAYERS, max(x["overload"] for x in w))
    first = "first drop %.1f%% over %.2f" % (100 * w[0]["dropped"], w[0]["overload"])
    if not last or summary not in last[-1] or first not in last[-1]:
        fail("E=%d: the last progress line %r lacks %r and %r" % (E, last[-1] if last else None, summary, first))
    print("E=%d: %d steps x %d layers recounted (dropped %s, overload %s)" % (
        E, STEPS, LAYERS, ", ".join("%.4f" % x["dropped"] for x in want[-1]),
        ", ".join("%.4f" % x["overload"] for x in want[-1])))


for experts in (4, 32):
    run(experts)
if failures:
    print("FAIL: %d mismatches" % len(failures))
    sys.exit(1)
print("PASS")
