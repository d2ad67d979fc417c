#!/bin/sh
# What the MoE telemetry costs (issue 34's goal: at most 2% of the step):
# examples/moe.gsl's training step with its telemetry (-D TELEMETRY=1: the
# loss returns each MoE layer's moe_stats beside the loss, fn main
# log_moe's them into --log and the progress line) against the same
# program without it (-D TELEMETRY=0: neither), both with --log.
#
#   bench/moe_telemetry.sh GSL [NP] [STEPS] [PAIRS] [EXTRA GSL ARGS...]
#   (defaults: NP 8, as `make run`; STEPS 300; PAIRS 5)
#
# One untimed run of each side first fills the compile cache (a scratch
# one), so no timed run compiles. Then PAIRS pairs of runs, the sides
# alternating which goes first (on/off, off/on, ...), so a drift of the
# machine's load hits both. A run's step time is read from its own --log:
# (elapsed_s at the last step - elapsed_s at step WARM) / (steps between),
# WARM = 20, so the first steps (and the step-0 accuracy print between
# them) are left out; elapsed_s excludes compile time. Prints every run,
# each pair's ratio on/off, and the median ratio as the telemetry's cost
# in percent of the step. Never used as a test: run it on a quiet
# machine (2 cores shared with builds give ratios off by several percent).
set -eu
gsl=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
np=${2:-8}
steps=${3:-300}
pairs=${4:-5}
shift $(($# < 4 ? $# : 4))
extra="$*"
src=$(cd "$(dirname "$0")/.." && pwd)
warm=20
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"

# run SIDE N: one run with TELEMETRY=SIDE; prints its mean step time (ms).
run() {
  # shellcheck disable=SC2086 # extra is a list of words
  "$gsl" run "$src/examples/moe.gsl" -np "$np" -D STEPS="$steps" -D EVERY=1000000 -D TELEMETRY="$1" \
    --cache-dir "$tmp/cache" --no-progress --log "$tmp/log_$1_$2.jsonl" $extra > "$tmp/out_$1_$2.txt"
  awk -v warm="$warm" '
    { match($0, /"step":[0-9]+/); s = substr($0, RSTART + 7, RLENGTH - 7) + 0
      match($0, /"elapsed_s":[-0-9.eE+]+/); e = substr($0, RSTART + 12, RLENGTH - 12) + 0
      if (s == warm) { s0 = s; e0 = e } last = s; elast = e }
    END { if (!s0 || last <= s0) { print "nan"; exit } printf "%.4f\n", 1000 * (elast - e0) / (last - s0) }' \
    "$tmp/log_$1_$2.jsonl"
}

echo "examples/moe.gsl -np $np, $steps steps (timed from step $warm), $pairs pairs; telemetry on vs off"
run 1 0 > /dev/null
run 0 0 > /dev/null
grep -q '"moe":' "$tmp/log_1_0.jsonl" || { echo "error: the telemetry run logged no MoE telemetry"; exit 1; }
if grep -q '"moe":' "$tmp/log_0_0.jsonl"; then echo "error: the run without telemetry logged some"; exit 1; fi
: > "$tmp/ratios.txt"
p=1
while [ "$p" -le "$pairs" ]; do
  if [ $((p % 2)) -eq 1 ]; then on=$(run 1 "$p"); off=$(run 0 "$p"); order="on, off"
  else off=$(run 0 "$p"); on=$(run 1 "$p"); order="off, on"; fi
  ratio=$(awk -v a="$on" -v b="$off" 'BEGIN { printf "%.4f", a / b }')
  echo "$ratio" >> "$tmp/ratios.txt"
  printf "pair %d (%s): on %s ms/step, off %s ms/step, on/off %s\n" "$p" "$order" "$on" "$off" "$ratio"
  p=$((p + 1))
done
sort -n "$tmp/ratios.txt" | awk '{ r[NR] = $1 } END {
  m = (NR % 2) ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2
  printf "median on/off %.4f: the telemetry costs %.2f%% of the step (goal: at most 2%%)\n", m, 100 * (m - 1) }'
