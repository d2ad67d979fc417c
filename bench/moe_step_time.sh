#!/bin/sh
# MoE step time against the dense step at equal FLOPs per token (issue 34's
# goal: at most 1.3x at -np 1, and at -np 4 with expert parallelism, the
# experts split over the ranks and the tokens moved by all_to_all, against
# the dense model's data-parallel step). The programs and the FLOPs count
# are bench/moe_quality.sh's (bench/moe_quality/*.gsl, docs/moe.md,
# "Quality at equal FLOPs"); no validation loss is computed.
#
#   bench/moe_step_time.sh GSL [NP] [PAIRS] [STEPS]
#   (defaults: NP 1, PAIRS 3, STEPS 120)
#
# Settings from the environment: SETTINGS, a list of ROUTING:E:CF
# [top2:16:1.0 top2:16:1.25 top2:16:2.0 switch:16:1.0 ... ec:16:2.0],
# EXTRA (more gsl arguments for every run, the same for both sides).
#
# One untimed run of each program first fills the compile cache, so no
# timed run compiles. Then for every setting PAIRS pairs of runs, dense and
# MoE, alternating which goes first, so a drift of the machine's load hits
# both. A run's step time is the median of the per-step differences of
# elapsed_s in its own --log after WARM = 20 steps. Prints every pair's
# times and ratio, and each setting's median ratio MoE / dense. Never used
# as a test: timings on a shared machine are noisy.
set -eu
gsl=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
np=${2:-1}
pairs=${3:-3}
steps=${4:-120}
settings=${SETTINGS:-top2:16:1.0 top2:16:1.25 top2:16:2.0 switch:16:1.0 switch:16:1.25 switch:16:2.0 ec:16:1.0 ec:16:1.25 ec:16:2.0}
extra=${EXTRA:-}
src=$(cd "$(dirname "$0")/.." && pwd)
warm=20
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
H=$(awk '$1 == "const" && $2 == "H" { print $4 }' "$src/bench/moe_quality/model.gsl")
for a in $extra; do case "$a" in H=*) H=${a#H=} ;; esac; done

# step PROGRAM ARGS...: one run; prints its median step time in ms.
step() {
  prog=$1
  shift
  # shellcheck disable=SC2086 # extra is a list of words
  "$gsl" run "$src/bench/moe_quality/$prog.gsl" -np "$np" -D STEPS="$steps" -D EVAL=1000000 "$@" $extra \
    --cache-dir "$tmp/cache" --no-progress --log "$tmp/log.jsonl" > "$tmp/out.txt" 2>&1 ||
    { cat "$tmp/out.txt" >&2; echo "error: $prog $* failed" >&2; exit 1; }
  awk -v warm="$warm" '
    { match($0, /"step":[0-9]+/); s = substr($0, RSTART + 7, RLENGTH - 7) + 0
      match($0, /"elapsed_s":[-0-9.eE+]+/); e = substr($0, RSTART + 12, RLENGTH - 12) + 0
      if (s > warm && s == ps + 1) print e - pe
      ps = s; pe = e }' "$tmp/log.jsonl" | sort -g |
    awk '{ d[NR] = $1 } END { if (NR == 0) { print "nan"; exit }
          m = (NR % 2) ? d[(NR + 1) / 2] : (d[NR / 2] + d[NR / 2 + 1]) / 2; printf "%.4f\n", 1000 * m }'
}

# args ROUTING E CF: the -D arguments of an MoE setting (equal FLOPs per token).
args() {
  case $1 in
    top2) kr=2; he=$((H / 2)) ;;
    switch) kr=1; he=$H ;;
    ec) kr=1; he=$(awk -v h="$H" -v cf="$3" 'BEGIN { printf "%d", h / cf + 0.5 }') ;;
    *) echo "error: unknown routing $1" >&2; exit 1 ;;
  esac
  echo "-D E=$2 -D CF=$3 -D KR=$kr -D HE=$he"
}

echo "MoE / dense step time at equal FLOPs per token, -np $np (threads), $steps steps (median step after $warm), $pairs pairs"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
[ -n "$extra" ] && echo "extra arguments: $extra"
step dense > /dev/null
for s in $settings; do
  IFS=: read -r r e cf <<EOF
$s
EOF
  # shellcheck disable=SC2046 # args gives a list of words
  step "$r" $(args "$r" "$e" "$cf") > /dev/null
done
: > "$tmp/summary.txt"
for s in $settings; do
  IFS=: read -r r e cf <<EOF
$s
EOF
  : > "$tmp/ratios.txt"
  p=1
  while [ "$p" -le "$pairs" ]; do
    # shellcheck disable=SC2046
    if [ $((p % 2)) -eq 1 ]; then d=$(step dense); m=$(step "$r" $(args "$r" "$e" "$cf")); order="dense, moe"
    else m=$(step "$r" $(args "$r" "$e" "$cf")); d=$(step dense); order="moe, dense"; fi
    ratio=$(awk -v a="$m" -v b="$d" 'BEGIN { printf "%.3f", a / b }')
    echo "$ratio" >> "$tmp/ratios.txt"
    printf "%-8s E=%-3s CF=%-5s pair %d (%s): MoE %s ms, dense %s ms, ratio %s\n" "$r" "$e" "$cf" "$p" "$order" "$m" "$d" "$ratio"
    p=$((p + 1))
  done
  sort -n "$tmp/ratios.txt" | awk -v s="$r E=$e CF=$cf" '{ x[NR] = $1 } END {
    m = (NR % 2) ? x[(NR + 1) / 2] : (x[NR / 2] + x[NR / 2 + 1]) / 2
    printf "%-22s median MoE/dense %.3f (pairs %s to %s)\n", s, m, x[1], x[NR] }' >> "$tmp/summary.txt"
done
echo
echo "-np $np, goal MoE/dense <= 1.3:"
cat "$tmp/summary.txt"
