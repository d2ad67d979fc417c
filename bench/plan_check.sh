#!/usr/bin/env bash
# plan_check.sh [GSL]: gsl plan's predictions against measured step times
# (issue 33, part 3). For each case it asks `gsl plan --candidates` for
# every plan its search evaluated, keeps up to $PLANS (24) of them with
# distinct predictions (evenly over the predicted range, the chosen plan
# always among them), runs each for $STEPS (40) training steps and takes
# the median step time of the last half from --log's elapsed_s. Per case
# it prints Kendall's tau-b between predicted and measured step time, the
# regret (measured step of the chosen plan / the best measured), the worst
# prediction error |predicted - measured| / measured, and the search time.
# The machine model is the one `gsl calibrate` wrote ($GSL_MACHINE_DIR or
# the compile cache's directory); run `gsl calibrate` (and `gsl calibrate
# --mpi`) on a quiet machine first. Name the CPU beside the figures.
set -eu
gsl=${1:-build/gsl}
gsl=$(realpath "$gsl")
src=$(cd "$(dirname "$0")/.." && pwd)
PLANS=${PLANS:-24}
STEPS=${STEPS:-40}
CASES=${CASES:-"lm:L=2,D=32:2 lm:L=2,D=32:4 lm:L=2,D=256:4 lm:L=8,D=32:4 lm:L=2,D=32:2:mpi"}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "plan_check on $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $PLANS plans a case, $STEPS steps each"
for case in $CASES; do
  IFS=: read -r prog defs np mpi <<<"$case"
  dir="$work/$prog-${defs//[=,]/_}-$np${mpi:+-mpi}"
  mkdir -p "$dir"
  cp "$src/tests/plan/lm_bare.gsl" "$dir/lm.gsl"
  dflags=()
  for d in ${defs//,/ }; do dflags+=(-D "$d"); done
  (cd "$dir" && "$gsl" plan lm.gsl -np "$np" "${dflags[@]}" ${mpi:+--mpi} --candidates cand >plan.txt)
  python3 - "$dir" "$gsl" "$np" "$STEPS" "$PLANS" "$mpi" "${dflags[@]}" <<'PY'
import json, os, re, statistics, subprocess, sys
d, gsl, np_, steps, plans, mpi = sys.argv[1:7]
dflags = sys.argv[7:]
steps, plans = int(steps), int(plans)
cands = [c for c in json.load(open(f"{d}/cand/candidates.json")) if c["ok"]]
# Distinct predictions; the chosen plan first.
byp = {}
for c in sorted(cands, key=lambda c: (not c["chosen"], c["predicted_seconds"])):
    byp.setdefault(round(c["predicted_seconds"], 12), c)
uniq = sorted(byp.values(), key=lambda c: c["predicted_seconds"])
chosen = next(c for c in uniq if c["chosen"]) if any(c["chosen"] for c in uniq) else uniq[0]
if len(uniq) > plans:
    idx = sorted({round(i * (len(uniq) - 1) / (plans - 1)) for i in range(plans)})
    pick = [uniq[i] for i in idx]
    if chosen not in pick:
        pick[-1] = chosen
else:
    pick = uniq
def measure(c):
    log = f"{d}/log.jsonl"
    cmd = [gsl, "run", f"{d}/cand/{c['file']}", "-np", np_, "-D", f"STEPS={steps}", *dflags, "--log", log, "--no-progress"]
    if mpi:
        cmd.append("--mpi")
    subprocess.run(cmd, cwd=d, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    e = [json.loads(l)["elapsed_s"] for l in open(log)]
    dt = [b - a for a, b in zip(e, e[1:])]
    return statistics.median(dt[len(dt) // 2:])
for c in pick:
    c["measured"] = measure(c)
def tau_b(x, y):
    n = len(x); conc = disc = tx = ty = 0
    for i in range(n):
        for j in range(i + 1, n):
            a, b = x[i] - x[j], y[i] - y[j]
            if a == 0 and b == 0: continue
            if a == 0: tx += 1
            elif b == 0: ty += 1
            elif (a > 0) == (b > 0): conc += 1
            else: disc += 1
    den = ((conc + disc + tx) * (conc + disc + ty)) ** 0.5
    return (conc - disc) / den if den else float("nan")
p = [c["predicted_seconds"] for c in pick]
m = [c["measured"] for c in pick]
tau = tau_b(p, m)
regret = chosen["measured"] / min(m)
worst = max(abs(a - b) / b for a, b in zip(p, m))
search = re.search(r"evaluated in ([0-9.]+) s", open(f"{d}/plan.txt").read()).group(1)
name = os.path.basename(d)
print(f"{name:28s} plans {len(pick):3d}  tau {tau:+.2f}  regret {regret:.2f}  worst error {worst:.2f}  "
      f"search {search} s  chosen: predicted {chosen['predicted_seconds']*1e3:.3f} ms, measured {chosen['measured']*1e3:.3f} ms, "
      f"best measured {min(m)*1e3:.3f} ms")
PY
done
