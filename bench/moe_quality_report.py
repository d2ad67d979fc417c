#!/usr/bin/env python3
"""The report of bench/moe_quality.sh: reads OUT_DIR/config.txt and
OUT_DIR/logs/*.jsonl (gsl run --log), prints

- the validation curves: each setting's val_loss at every evaluation, the
  median over its seeds;
- per setting (median over the seeds): the final validation loss, the
  steps to reach the dense model's final validation loss (the median of
  the dense seeds' last val_loss; linear between evaluations; "-" when not
  reached) and their ratio to the run's steps, the step time and tokens/s
  (median of the per-step differences of elapsed_s after the first WARM
  steps: evaluation steps and the machine's hiccups fall out of the
  median), and the dropped fraction (mean over the MoE layers and over
  the steps, and over the last 20% of the steps);

writes OUT_DIR/curves.dat (gnuplot's input) and, when gnuplot is
installed, draws OUT_DIR/moe_quality.svg: one panel per routing and E, the
dense curve and one curve per capacity factor.
  python3 bench/moe_quality_report.py OUT_DIR
"""
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys

WARM = 20


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def read_run(path):
    recs = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                recs.append(json.loads(line))
    val = [(r["step"], r["val_loss"]) for r in recs if "val_loss" in r]
    el = [(r["step"], r["elapsed_s"]) for r in recs]
    diffs = [b[1] - a[1] for a, b in zip(el, el[1:]) if a[0] >= WARM and b[0] == a[0] + 1]
    if not diffs:  # a run shorter than the warm-up: every step after the first
        diffs = [b[1] - a[1] for a, b in zip(el, el[1:]) if a[0] >= 1 and b[0] == a[0] + 1]
    last = recs[-1]
    steps_run = len(recs)
    tokens = round(last["tokens_per_s"] * last["elapsed_s"] / steps_run) if steps_run else 0
    drops = [statistics.mean(l["dropped"] for l in r["moe"]) for r in recs if "moe" in r]
    tail = drops[int(0.8 * len(drops)):] if drops else []
    return {
        "val": val,
        "final": val[-1][1] if val else None,
        "step_s": statistics.median(diffs) if diffs else None,
        "tokens": tokens,
        "drop": statistics.mean(drops) if drops else None,
        "drop_tail": statistics.mean(tail) if tail else None,
        "steps": recs[-1]["step"] if recs else 0,
    }


def steps_to(val, target):
    """The first step at which the validation curve reaches target (linear
    between evaluations), or None."""
    prev = None
    for s, v in val:
        if v <= target:
            if prev is None or prev[1] == v:
                return float(s)
            s0, v0 = prev
            return s0 + (s - s0) * (v0 - target) / (v0 - v)
        prev = (s, v)
    return None


def main():
    out = sys.argv[1]
    cfg = {}
    with open(os.path.join(out, "config.txt")) as f:
        for line in f:
            k, _, v = line.rstrip("\n").partition(" ")
            cfg[k] = v
    steps = int(cfg["steps"])
    runs = {}
    pat = re.compile(r"^(dense|top2|switch|ec)(?:_E(\d+)_cf([0-9.]+))?_s(\d+)\.jsonl$")
    for name in sorted(os.listdir(os.path.join(out, "logs"))):
        m = pat.match(name)
        if not m:
            continue
        r = read_run(os.path.join(out, "logs", name))
        if r["steps"] != steps:
            continue  # unfinished
        key = (m.group(1), int(m.group(2) or 0), m.group(3) or "")
        runs.setdefault(key, {})[int(m.group(4))] = r
    if ("dense", 0, "") not in runs:
        print("no finished dense run in", out)
        return 1
    order = {"dense": 0, "top2": 1, "switch": 2, "ec": 3}
    keys = sorted(runs, key=lambda k: (order[k[0]], k[1], float(k[2] or 0)))
    dense = runs[("dense", 0, "")]
    target = median([r["final"] for r in dense.values()])
    dense_step = median([r["step_s"] for r in dense.values()])

    def label(k):
        return "dense" if k[0] == "dense" else f"{k[0]} E={k[1]} CF={k[2]}"

    print(f"MoE vs dense at equal FLOPs per token: byte-level LM on the fortunes corpus, -np {cfg['np']}, "
          f"{steps} steps, seeds {cfg['seeds']}")
    if cfg.get("extra"):
        print("extra arguments:", cfg["extra"])
    print("machine:", cfg.get("cpu", "?"))
    print()
    # The curves.
    evals = sorted({s for r in dense.values() for s, _ in r["val"]})
    curves = {}
    for k in keys:
        per = {}
        for r in runs[k].values():
            for s, v in r["val"]:
                per.setdefault(s, []).append(v)
        curves[k] = [(s, median(per.get(s, []))) for s in evals]
    print("validation loss (nats per byte), median over seeds, at step:")
    every = max(1, -(-len(evals) // 12))  # at most 12 columns, the last evaluation among them
    show = [s for i, s in enumerate(evals) if (len(evals) - 1 - i) % every == 0]
    print(f"{'setting':<24}" + "".join(f"{s:>8d}" for s in show))
    for k in keys:
        d = dict(curves[k])
        print(f"{label(k):<24}" + "".join(f"{d[s]:8.4f}" if d.get(s) is not None else f"{'-':>8}" for s in show))
    print()
    print(f"target: the dense model's final validation loss (median of {len(dense)} seeds) = {target:.4f}")
    print("final val, vs dense, steps to (the target), ratio (steps to / steps): medians over the seeds;")
    print("lower: the seeds whose final val is below the dense run's of the same seed (same data order);")
    print("ms/step, x dense, tokens/s: from these runs' logs, as they ran (bench/moe_step_time.sh times")
    print("alternating pairs); dropped: the mean over the steps and the MoE layers, then over the last 20%")
    print(f"{'setting':<24}{'seeds':>6}{'final val':>10}{'vs dense':>9}{'lower':>6}{'steps to':>9}{'ratio':>7}"
          f"{'ms/step':>9}{'x dense':>8}{'tokens/s':>9}{'dropped':>9}{'last 20%':>9}")
    rows, prows = [], []
    for k in keys:
        rs = runs[k]
        fin = median([r["final"] for r in rs.values()])
        reach = [steps_to(r["val"], target) for r in rs.values()]
        # a seed that never reaches the target counts as infinitely late
        st = statistics.median([x if x is not None else math.inf for x in reach])
        step_s = median([r["step_s"] for r in rs.values()])
        tok = median([r["tokens"] for r in rs.values()])
        drop = median([r["drop"] for r in rs.values()])
        tail = median([r["drop_tail"] for r in rs.values()])
        rows.append((k, fin, st))
        lower = sum(1 for seed, r in rs.items() if seed in dense and r["final"] < dense[seed]["final"])
        paired = sum(1 for seed in rs if seed in dense)
        # paired: each seed against the dense run of the same seed (same batches)
        pdiff = median([r["final"] - dense[seed]["final"] for seed, r in rs.items() if seed in dense])
        pst = statistics.median([(lambda x: x if x is not None else math.inf)(steps_to(r["val"], dense[seed]["final"]))
                                 for seed, r in rs.items() if seed in dense] or [math.inf])
        prows.append((k, pdiff, pst))
        print(f"{label(k):<24}{len(rs):>6}{fin:10.4f}{fin - target:+9.4f}"
              + (f"{lower:>4}/{paired}" if k[0] != "dense" else f"{'':>6}")
              + (f"{st:9.0f}{st / steps:7.2f}" if math.isfinite(st) else f"{'-':>9}{'-':>7}")
              + f"{1000 * step_s:9.2f}{step_s / dense_step:8.2f}{tok / step_s:9.0f}"
              + (f"{100 * drop:8.1f}%{100 * tail:8.1f}%" if drop is not None else f"{'-':>9}{'-':>9}"))
    print()
    print("paired by seed (each seed's MoE run against the dense run of the same seed; medians over the seeds):")
    print(f"{'setting':<24}{'final - dense':>14}{'steps to dense final':>22}{'ratio':>7}")
    for k, d, st in prows:
        if k[0] == "dense":
            continue
        print(f"{label(k):<24}{d:+14.4f}" + (f"{st:22.0f}{st / steps:7.2f}" if math.isfinite(st) else f"{'-':>22}{'-':>7}"))
    moe = [r for r in rows if r[0][0] != "dense"]
    if moe:
        best = min(moe, key=lambda r: r[1])
        fastest = min(moe, key=lambda r: r[2])
        print()
        print(f"lowest final validation loss: {label(best[0])} {best[1]:.4f} (dense {target:.4f}, "
              f"{best[1] - target:+.4f}); steps to the dense final: "
              + (f"{best[2]:.0f} of {steps} ({best[2] / steps:.2f}x)" if math.isfinite(best[2]) else "not reached"))
        print(f"fewest steps to the dense final: {label(fastest[0])} "
              + (f"{fastest[2]:.0f} ({fastest[2] / steps:.2f}x), final {fastest[1]:.4f}"
                 if math.isfinite(fastest[2]) else "none reached it"))
        goal = [r for r in moe if math.isfinite(r[2]) and r[2] <= 0.75 * steps and r[1] < target]
        print("settings reaching it in <= 0.75x the steps and ending lower (the goal):",
              ", ".join(label(r[0]) for r in goal) if goal else "none")

    # gnuplot's input: one block per setting (two blank lines apart), "step median".
    dat = os.path.join(out, "curves.dat")
    with open(dat, "w") as f:
        for k in keys:
            f.write(f"# {label(k)}\n")
            for s, v in curves[k]:
                if v is not None:
                    f.write(f"{s} {v:.6f}\n")
            f.write("\n\n")
    if shutil.which("gnuplot"):
        plot(out, keys, curves, cfg, steps, target, "svg")
        if os.environ.get("MOE_QUALITY_PNG"):  # a preview of the same figure
            plot(out, keys, curves, cfg, steps, target, "png")
    else:
        print("(no gnuplot: no figure; `apt-get install gnuplot-nox`)")
    return 0


def plot(out, keys, curves, cfg, steps, target, kind):
    index = {k: i for i, k in enumerate(keys)}
    routings = [r for r in ("top2", "switch", "ec") if any(k[0] == r for k in keys)]
    es = sorted({k[1] for k in keys if k[0] != "dense"})
    cfs = sorted({k[2] for k in keys if k[0] != "dense"}, key=float)
    names = {"top2": "GShard top-2", "switch": "Switch top-1", "ec": "expert choice"}
    colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"]
    vals = [v for k in keys for s, v in curves[k] if v is not None and s >= steps // 3]
    lo, hi = min(vals), max(vals)
    pad = 0.05 * (hi - lo)
    svg = os.path.join(out, "moe_quality." + kind)
    rows, cols = len(routings), len(es)
    terminal = "svg" if kind == "svg" else "pngcairo"
    g = [f"set terminal {terminal} size {330 * cols + 40},{260 * rows + 60} font 'sans,11' background '#ffffff'",
         f"set output '{svg}'",
         f"set multiplot layout {rows},{cols} title \"Validation loss (nats/byte, median of seeds {cfg['seeds']}), "
         f"byte-level LM on fortunes, equal FLOPs per token, -np {cfg['np']}\"",
         f"set xrange [{steps // 3}:{steps}]", f"set yrange [{lo - pad:.4f}:{hi + pad:.4f}]",
         "set grid", "set key top right font ',9'", "set xlabel 'step' offset 0,0.5", "set ylabel 'val loss' offset 1.5,0",
         "set tics font ',9'"]
    dat = os.path.join(out, "curves.dat")
    dense_i = index[("dense", 0, "")]
    for r in routings:
        for e in es:
            g.append(f"set title '{names[r]}, E = {e}' font ',11'")
            parts = [f"'{dat}' index {dense_i} using 1:2 with lines lw 2.5 lc rgb '#000000' title 'dense'",
                     f"{target:.6f} with lines dt 3 lw 1 lc rgb '#555555' notitle"]
            for j, cf in enumerate(cfs):
                k = (r, e, cf)
                if k in index:
                    parts.append(f"'{dat}' index {index[k]} using 1:2 with lines lw 1.8 lc rgb '{colours[j % 5]}' "
                                 f"title 'CF {cf}'")
            g.append("plot " + ", ".join(parts))
    g.append("unset multiplot")
    subprocess.run(["gnuplot"], input="\n".join(g) + "\n", text=True, check=True)
    print(f"figure: {svg}")


if __name__ == "__main__":
    sys.exit(main())
