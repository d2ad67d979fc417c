#!/bin/sh
# update_sharding.sh BUILD_DIR [PAIRS]: the steady step time of
# examples/transformer.gsl with weight-update sharding (the default)
# against --no-update-sharding, the two alternated PAIRS times (default 3)
# in one run, at -np 2 and -np 4 (DP = NP: all data parallel) on the
# example's sizes and at D=256. A step's time is read from `--log`
# (elapsed_s leaves compilation out): (elapsed at the last step - at step
# 10) / the steps between. Prints each side's median and the median of the
# pairs' ratios (on / off), and the CPU it ran on.
set -u
B=${1:?usage: update_sharding.sh BUILD_DIR [PAIRS]}
PAIRS=${2:-3}
GSL=$(cd "$B" && pwd)/gsl
ROOT=$(cd "$(dirname "$0")/.." && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
echo "CPU: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1), $(nproc) cores"
step() {  # step ARGS...: seconds per steady step
  "$GSL" run "$ROOT/examples/transformer.gsl" "$@" --no-progress --log log.jsonl > /dev/null || exit 1
  python3 -c "
import json
r = [json.loads(l) for l in open('log.jsonl')]
a, b = r[9], r[-1]
print((b['elapsed_s'] - a['elapsed_s']) / (b['step'] - a['step']))"
}
for cfg in "-np 2 -D DP=2 -D STEPS=200" "-np 4 -D DP=4 -D STEPS=200" \
           "-np 2 -D DP=2 -D D=256 -D NH=4 -D HD=64 -D H=1024 -D STEPS=40" \
           "-np 4 -D DP=4 -D D=256 -D NH=4 -D HD=64 -D H=1024 -D STEPS=40"; do
  # shellcheck disable=SC2086
  step $cfg > /dev/null  # warm-up: the compile cache, fresh pages
  : > on.txt; : > off.txt; : > ratio.txt
  for _ in $(seq "$PAIRS"); do
    # shellcheck disable=SC2086
    on=$(step $cfg); off=$(step $cfg --no-update-sharding)
    echo "$on" >> on.txt; echo "$off" >> off.txt
    python3 -c "print($on / $off)" >> ratio.txt
  done
  med() { sort -g "$1" | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
  printf '%s: on %.3f ms, off %.3f ms, on/off %.3f (pairs: %s)\n' "$cfg" \
    "$(python3 -c "print($(med on.txt) * 1000)")" "$(python3 -c "print($(med off.txt) * 1000)")" "$(med ratio.txt)" \
    "$(tr '\n' ' ' < ratio.txt | sed 's/ $//')"
done
