#!/bin/sh
# bench/moe_quality.sh end to end at toy sizes (the bench itself takes
# about 40 minutes and is not a test): one seed, E = 4, CF 1.0, every
# routing and the dense model, 20 steps of a D = 16 model, a validation
# loss every 10 steps over one batch. Checks that every run finishes, that
# the report has the curves, the table row of each setting (dense first)
# and its paired part, and, when gnuplot is installed, that the figure is
# an SVG with a panel per routing. bench/moe_step_time.sh runs one pair of
# one setting. No numbers are checked: toy sizes say nothing.
#   quality_smoke.sh GSL SOURCE_DIR
set -eu
gsl=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
small="-D WARMUP=5 -D EVAL=10 -D EVAL_BATCHES=1 -D D=16 -D NH=2 -D HD=8 -D H=32"
STEPS=20 SEEDS=0 ES=4 CFS=1.0 NICE=0 EXTRA="$small" "$src/bench/moe_quality.sh" "$gsl" "$tmp/out" > "$tmp/report.txt" 2>&1 || {
  cat "$tmp/report.txt"; echo "FAIL: bench/moe_quality.sh exited with an error"; exit 1; }
cat "$tmp/report.txt"
for r in dense "top2 E=4 CF=1.0" "switch E=4 CF=1.0" "ec E=4 CF=1.0"; do
  grep -q "^$r  *1 " "$tmp/report.txt" || { echo "FAIL: no table row for $r"; exit 1; }
  grep -q "^$r  *[0-9]\.[0-9]\{4\}  *[0-9]\.[0-9]\{4\}$" "$tmp/report.txt" || { echo "FAIL: no curve for $r"; exit 1; }
done
grep -q "^paired by seed" "$tmp/report.txt" || { echo "FAIL: no paired table"; exit 1; }
grep -q "^lowest final validation loss: " "$tmp/report.txt" || { echo "FAIL: no summary"; exit 1; }
[ "$(find "$tmp/out/logs" -name "*.jsonl" | wc -l)" -eq 4 ] || { echo "FAIL: not 4 logs"; exit 1; }
if command -v gnuplot > /dev/null; then
  [ "$(grep -c "Switch top-1, E = 4\|GShard top-2, E = 4\|expert choice, E = 4" "$tmp/out/moe_quality.svg")" -ge 3 ] ||
    { echo "FAIL: the figure lacks a panel"; exit 1; }
fi
SETTINGS="switch:4:1.0" EXTRA="$small" "$src/bench/moe_step_time.sh" "$gsl" 1 1 40 > "$tmp/time.txt" 2>&1 || {
  cat "$tmp/time.txt"; echo "FAIL: bench/moe_step_time.sh exited with an error"; exit 1; }
cat "$tmp/time.txt"
grep -q "^switch E=4 CF=1.0  *median MoE/dense [0-9.]* (pairs" "$tmp/time.txt" || { echo "FAIL: no step-time ratio"; exit 1; }
echo PASS
