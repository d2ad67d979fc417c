#!/bin/sh
# Thread ranks beyond the core count (docs/cluster.md, "Thread ranks"):
# the steady training step of examples/transformer.gsl and examples/moe.gsl
# at -np 2, 8 and 64, and the ratios -np 64 / -np 2. The transformer runs
# on its default mesh (at -np 64: data 16 x model 4) and again on the mesh
# of 2 data-parallel ways (-D DP=2: at -np 64, 4 heads over 32 model ways,
# 28 of them padding), whose extra work at -np 64 is the mesh's, not the
# runtime's.
#
# The step is taken from --log: (elapsed_s at the last step - elapsed_s at
# step WARM) / (steps in between), so compiles and the first steps are left
# out. The sides alternate (2, 8, 64, 2, 8, 64, ...) for REPS rounds and the
# fastest round of each counts (the machine may be shared).
#   bench/np_scaling.sh [path/to/gsl]      (REPS=3 STEPS=80 WARM=10)
set -eu
GSL=${1:-build/gsl}
REPS=${REPS:-3}
STEPS=${STEPS:-80}
WARM=${WARM:-10}
DIR=$(cd "$(dirname "$0")/.." && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

step_ms() {  # example np [-D ...] -> ms per steady step
  ex=$1 np=$2
  shift 2
  # shellcheck disable=SC2086
  (cd "$TMP" && "$GSL" run "$DIR/examples/$ex.gsl" -np "$np" "$@" -D STEPS="$STEPS" --no-progress \
      --log "$TMP/log.jsonl" >/dev/null 2>&1) || { echo "gsl run $ex -np $np $* failed" >&2; exit 1; }
  python3 - "$TMP/log.jsonl" "$WARM" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
w = int(sys.argv[2])
print("%.3f" % ((rows[-1]["elapsed_s"] - rows[w - 1]["elapsed_s"]) / (len(rows) - w) * 1e3))
EOF
}

case "$GSL" in /*) ;; *) GSL="$(pwd)/$GSL" ;; esac
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
for case in "transformer" "transformer -D DP=2" "moe"; do
  # shellcheck disable=SC2086
  set -- $case
  ex=$1
  shift
  best2= best8= best64=
  r=0
  while [ $r -lt "$REPS" ]; do
    for np in 2 8 64; do
      t=$(step_ms "$ex" $np "$@")
      eval "b=\${best$np}"
      if [ -z "$b" ] || python3 -c "import sys; sys.exit(0 if $t < $b else 1)"; then eval "best$np=$t"; fi
    done
    r=$((r + 1))
  done
  printf '%-20s step ms: -np 2 %s  -np 8 %s  -np 64 %s  ratio 64/2 %s\n' "$case" "$best2" "$best8" "$best64" \
    "$(python3 -c "print('%.1fx' % ($best64 / $best2))")"
done
