"""Checks a `gsl run --trace` file (tests/trace/trace_test.sh).

usage: check_trace.py TRACE NP [--stats STATS_JSON FN CALLS] [--steps N]

The file must be trace-event JSON: {"traceEvents": [...], "displayTimeUnit"},
every event with name/ph/ts/pid/tid, complete ("X") events with dur >= 0,
one named process per rank 0..NP-1. --stats: on every rank, the all_reduce
events' count and bytes_sent are CALLS times what the cost model (gsl
compile --stats json) gives for function FN. --steps: every rank has N
training-step calls numbered 1..N, each holding its collectives.
"""
import json
import sys


def fail(msg):
    print("check_trace: " + msg, file=sys.stderr)
    sys.exit(1)


def main():
    args = sys.argv[1:]
    path, np = args[0], int(args[1])
    with open(path) as f:
        doc = json.load(f)
    if set(doc) != {"traceEvents", "displayTimeUnit"} or doc["displayTimeUnit"] != "ms":
        fail("top-level keys are %s" % sorted(doc))
    events = doc["traceEvents"]
    for e in events:
        for k in ("name", "ph", "ts", "pid", "tid"):
            if k not in e:
                fail("event without %s: %s" % (k, e))
        if e["ph"] not in ("X", "M"):
            fail("unexpected phase: %s" % e)
        if e["ph"] == "X" and not (isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0):
            fail("complete event without dur >= 0: %s" % e)
        if e["ph"] == "X" and e["ts"] < 0:
            fail("event before the start: %s" % e)
    names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    if names != {r: "rank %d" % r for r in range(np)}:
        fail("process tracks are %s, expected ranks 0..%d" % (names, np - 1))
    pids = {e["pid"] for e in events}
    if pids != set(range(np)):
        fail("events on pids %s" % sorted(pids))
    xs = [e for e in events if e["ph"] == "X"]
    cats = {e["cat"] for e in xs}
    for c in ("function", "collective", "wait"):
        if c not in cats:
            fail("no %s events (categories: %s)" % (c, sorted(cats)))
    if "compile" not in cats:  # the JIT engine, gsl run's default
        fail("no compile events")
    for e in xs:
        if e["cat"] == "collective":
            a = e.get("args", {})
            for k in ("kind", "bytes", "bytes_sent", "mesh", "axes"):
                if k not in a:
                    fail("collective without %s: %s" % (k, e))
    if "--stats" in args:
        i = args.index("--stats")
        with open(args[i + 1]) as f:
            stats = json.load(f)
        fn, calls = args[i + 2], int(args[i + 3])
        want = stats["functions"][fn]["collectives"]["all_reduce"]
        for r in range(np):
            ar = [e for e in xs if e["pid"] == r and e["cat"] == "collective" and e["name"] == "all_reduce"]
            got = (len(ar), sum(e["args"]["bytes_sent"] for e in ar))
            exp = (calls * want["calls"], calls * want["bytes"])
            if got != exp:
                fail("rank %d: all_reduce (calls, bytes) %s, the cost model says %s" % (r, got, exp))
    if "--steps" in args:
        n = int(args[args.index("--steps") + 1])
        for r in range(np):
            steps = [e for e in xs if e["pid"] == r and e["cat"] == "function" and "train_step" in e.get("args", {})]
            if sorted(e["args"]["train_step"] for e in steps) != list(range(1, n + 1)):
                fail("rank %d: training steps %s" % (r, [e["args"]["train_step"] for e in steps]))
            inside = [c for c in xs if c["pid"] == r and c["cat"] == "collective" and c["name"] == "all_reduce"
                      and any(s["ts"] <= c["ts"] and c["ts"] + c["dur"] <= s["ts"] + s["dur"] + 1e-3 for s in steps)]
            if not inside:
                fail("rank %d: no all_reduce inside a training step" % r)
    print("check_trace: ok (%d events, %d ranks)" % (len(events), np))


main()
