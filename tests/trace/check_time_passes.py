"""Checks a `gsl compile --time-passes` report against the per-rank programs
(`gsl compile --emit spmd` of the same arguments).

usage: check_time_passes.py REPORT SPMD
"""
import re
import sys

report_path, spmd_path = sys.argv[1], sys.argv[2]
lines = open(report_path).read().splitlines()


def fail(msg):
    print("check_time_passes: %s: %s" % (report_path, msg), file=sys.stderr)
    print("\n".join(lines), file=sys.stderr)
    sys.exit(1)


# The per-rank programs, and their ops, counted from the printed IR.
programs, ops = 0, 0
for l in open(spmd_path):
    if l.startswith("func @"):
        programs += 1
    elif re.match(r"^  %\d+ = ", l):
        ops += 1
if programs == 0:
    fail("no per-rank programs in " + spmd_path)

if not lines or not lines[0].startswith("compile time"):
    fail("no header line")
if lines[1].split() != ["phase", "seconds", "%", "count"]:
    fail("bad column header: %r" % lines[1])

rows = {}
total = None
kernels = None
for l in lines[2:]:
    m = re.match(r"^  (\S.*?)\s+(\d+\.\d{4})\s+(\d+\.\d)%(?:\s+(\d+))?$", l)
    if m:
        label, sec, pct, count = m.group(1), float(m.group(2)), float(m.group(3)), m.group(4)
        if label == "total":
            if count is not None:
                fail("the total has a count")
            total = (sec, pct)
        else:
            if count is None:
                fail("row %r has no count" % label)
            if label in rows:
                fail("row %r twice" % label)
            rows[label] = (sec, pct, int(count))
        continue
    m = re.match(r"^kernels: (\d+) rank programs compiled, (\d+) ops, (\d+) kernel functions, (\d+) kernel calls$", l)
    if m:
        kernels = tuple(int(x) for x in m.groups())
        continue
    fail("unexpected line %r" % l)

if total is None:
    fail("no total row")
if kernels is None:
    fail("no kernels line")
if total[1] != 100.0:
    fail("the total is not 100%")

# Every phase: once for the front end and each global pass, once per
# per-rank program for each per-rank pass and JIT phase.
expected = {"front end": 1, "pass shape-inference": 1, "pass training": 1, "pass verify": 3}
for p in ["update-sharding", "propagation", "partition", "combine-all-reduce", "simplify", "resolve-groups",
          "verify"]:
    expected["rank pass " + p] = programs
for p in ["lower", "optimise", "codegen", "link"]:
    expected["jit " + p] = programs
for label, count in expected.items():
    if label not in rows:
        fail("no row %r" % label)
    if rows[label][2] != count:
        fail("row %r ran %d times, expected %d" % (label, rows[label][2], count))
extra = set(rows) - set(expected) - {"other"}
if extra:
    fail("unexpected rows %s" % sorted(extra))
if "other" not in rows or rows["other"][2] != 0:
    fail("no 'other' row with count 0")

# The rows are the parts of the total (each rounded to 0.1 ms, 0.1%).
sec_sum = sum(r[0] for r in rows.values())
pct_sum = sum(r[1] for r in rows.values())
if abs(sec_sum - total[0]) > 0.0001 * (len(rows) + 1):
    fail("rows sum to %.4f s, the total is %.4f s" % (sec_sum, total[0]))
if abs(pct_sum - 100.0) > 0.1 * len(rows):
    fail("rows sum to %.1f%%" % pct_sum)

n_programs, n_ops, n_kernels, n_calls = kernels
if n_programs != programs:
    fail("%d programs compiled, --emit spmd has %d" % (n_programs, programs))
if n_ops != ops:
    fail("%d ops compiled, --emit spmd has %d" % (n_ops, ops))
if not (0 < n_kernels <= n_calls <= ops):
    fail("kernel counts %d functions / %d calls for %d ops" % (n_kernels, n_calls, ops))
