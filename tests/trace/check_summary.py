"""Checks the tables of `gsl trace summary` (tests/trace/summary_test.sh).

usage: check_summary.py TRACE SUMMARY BY_RANK NP STEPS

SUMMARY and BY_RANK are the summary of TRACE without and with --by-rank, of
tests/trace/summary.gsl run at -np NP -D STEPS=STEPS. Checks the header
lines and table heads, that every function call, collective and wait of the
trace is in a row (counts and bytes summed exactly), that the training
step (line 23) ran STEPS times per rank and the evaluation (line 25) once,
and that the all_reduce over `data` is there.
"""
import json
import sys


def fail(msg):
    print("check_summary: " + msg, file=sys.stderr)
    sys.exit(1)


def tables(path):
    """The header lines and {title's first word: (head, rows)}; columns split on spaces."""
    lines = open(path).read().split("\n")
    out, i = {}, 3
    while i < len(lines):
        if not lines[i]:
            i += 1
            continue
        title, head = lines[i], lines[i + 1].split()
        rows = []
        i += 2
        while i < len(lines) and lines[i].startswith("  "):
            rows.append(lines[i].split())
            i += 1
        out[title.split()[0]] = (title, head, rows)
    return lines[:2], out


def main():
    trace, summary, by_rank, np, steps = sys.argv[1:6]
    np, steps = int(np), int(steps)
    xs = [e for e in json.load(open(trace))["traceEvents"] if e["ph"] == "X"]
    header, t = tables(summary)
    if not (header[0].startswith("trace %s: %d ranks, %d events, wall " % (trace, np, len(xs)))
            and header[0].endswith(" ms (from the start of the run to the end of its last event)")):
        fail("header line: %s" % header[0])
    if header[1] != "times summed over the ranks (--by-rank: per rank); %% wall: of the ranks' time, %d x the wall" % np:
        fail("second line: %s" % header[1])
    heads = {
        "tensor": "name line calls total ms compile ms run ms mean run ms % wall",
        "collectives": "name mesh axes calls total ms wait ms mean ms bytes sent GB/s % wall",
        "compiles": "name compiles total ms mean ms llvm cache linked",
        "compile": "phase count total ms mean ms",
        "ranks": "rank functions ms compile ms collectives ms waits wait ms % wall waiting",
    }
    for k, h in heads.items():
        if k not in t or " ".join(t[k][1]) != h:
            fail("table %s: head %s" % (k, t.get(k, ("", [], []))[1]))

    # Functions: rows (name, line) -> calls, against the trace's events.
    fns = {(r[0], r[1]): int(r[2]) for r in t["tensor"][2]}
    want = {}
    for e in xs:
        if e["cat"] == "function":
            k = (e["name"], str(e["args"]["line"]))
            want[k] = want.get(k, 0) + 1
    if fns != want:
        fail("function calls %s, the trace has %s" % (fns, want))
    steps_fn = {e["name"] for e in xs if e["cat"] == "function" and "train_step" in e.get("args", {})}
    if len(steps_fn) != 1 or fns.get((steps_fn.pop(), "23")) != np * steps:
        fail("the training step (line 23) is not %d calls: %s" % (np * steps, fns))
    if [c for (n, line), c in fns.items() if line == "25"] != [np]:
        fail("the evaluation (line 25) is not %d calls: %s" % (np, fns))
    for r in t["tensor"][2]:  # total = compile + run, compile within the call
        total, comp, run = float(r[3]), float(r[4]), float(r[5])
        if abs(total - comp - run) > 0.0015 or not 0 <= comp <= total:
            fail("function row %s: total is not compile + run" % r)
    totals = [float(r[3]) for r in t["tensor"][2]]
    if totals != sorted(totals, reverse=True):
        fail("functions not sorted by total: %s" % totals)

    # Collectives: (name, mesh, axes) -> (calls, bytes, sent).
    coll = {(r[0], r[1], r[2]): (int(r[3]), int(r[7]), int(r[8])) for r in t["collectives"][2]}
    want = {}
    for e in xs:
        if e["cat"] == "collective":
            a = e["args"]
            k = (e["name"], a["mesh"], ",".join(a["axes"]))
            c, b, s = want.get(k, (0, 0, 0))
            want[k] = (c + 1, b + a["bytes"], s + a["bytes_sent"])
    if coll != want:
        fail("collectives %s, the trace has %s" % (coll, want))
    if ("all_reduce", "m", "data") not in coll or coll[("all_reduce", "m", "data")][0] % np:
        fail("no all_reduce over data on every rank: %s" % coll)

    # Ranks: one row per rank with its wait count.
    ranks = {int(r[0]): int(r[4]) for r in t["ranks"][2]}
    waits = {r: sum(1 for e in xs if e["cat"] == "wait" and e["pid"] == r) for r in range(np)}
    if ranks != waits:
        fail("waits per rank %s, the trace has %s" % (ranks, waits))

    # --by-rank: the same functions per rank, the training step STEPS times on each.
    header, t = tables(by_rank)
    if header[1] != "times per rank; % wall: of the wall time":
        fail("--by-rank second line: %s" % header[1])
    if " ".join(t["tensor"][1]) != "rank " + heads["tensor"]:
        fail("--by-rank head: %s" % t["tensor"][1])
    per = {}
    for r in t["tensor"][2]:
        per[(int(r[0]), r[1], r[2])] = int(r[3])
    for r in range(np):
        got = {(n, line): c for (rr, n, line), c in per.items() if rr == r}
        want = {}
        for e in xs:
            if e["cat"] == "function" and e["pid"] == r:
                k = (e["name"], str(e["args"]["line"]))
                want[k] = want.get(k, 0) + 1
        if got != want:
            fail("--by-rank rank %d: %s, the trace has %s" % (r, got, want))
    print("check_summary: ok")


main()
