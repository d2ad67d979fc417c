#!/bin/bash
# Pipeline parallelism's figures (issue 31, docs/pipeline.md), all measured
# in this invocation on examples/transformer.gsl:
#   bench/pipeline.sh GSL [RUNS]
# 1. Bubble: at -np 2 with S = 2 stages (compute-bound sizes: B = 128
#    sequences, L = 4, D = 256, H = 1024), M = 2, 4, 8 microbatches, R = 1
#    and 2 rounds: each rank's measured idle fraction from the trace
#    (`gsl trace summary`'s pipeline table: the iterations without a
#    microbatch of its stage plus its waits in the others, over all its
#    pipeline iterations; steps that compiled are left out) beside the
#    predicted (S - 1) / (M R + S - 1).
# 2. Memory: per-rank bytes of the layer group's params and optimizer
#    states (gsl compile --stats json; the group's share is the difference
#    between L = 8 and L = 4) at -np 4: data parallel (PP = 1, DP = 4, the
#    layers replicated) against PP = 4.
# 3. Bytes: what one training step sends per rank at -np 4 (--stats json),
#    PP = 4 (M = 4) against the data-parallel plan (DP = 4), D = 256 and
#    D = 1024 (H = 4 D).
# 4. Compile: time to the first step at -np 4 (L = 4, cold compile cache,
#    the sides alternated, median of RUNS), PP = 4 MB = 4 against PP = 1.
# Never used as a test (timings vary with the load).
set -u
gsl=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
src=$(cd "$(dirname "$0")/.." && pwd)
runs=${2:-3}
prog=$src/examples/transformer.gsl
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
echo "CPU: $cpu, $(nproc) cores"

echo
echo "1. bubble at -np 2, S = 2 (B=128 L=4 D=256 H=1024; 8 steps, the first left out)"
printf '%-6s %-3s %-6s %-10s %-10s %-10s %-9s\n' M R rank "bubble" "idle" predicted "|idle-p|"
for R in 1 2; do
  for M in 2 4 8; do
    (cd "$tmp" && "$gsl" run "$prog" -np 2 -D STEPS=8 -D B=128 -D L=4 -D D=256 -D H=1024 -D HD=64 -D PP=2 \
      -D MB=$M -D RR=$R --no-progress --trace "$tmp/t.json" >/dev/null 2>&1) || { echo "run failed: M=$M R=$R"; exit 1; }
    # rank function stage S M R calls loop bubble wait idle predicted
    "$gsl" trace summary "$tmp/t.json" | sed -n '/^pipeline stages/,$p' | awk -v M=$M -v R=$R '
      $2 ~ /^main\.5$/ {
        b = $9 / $8; d = $11 - $12; if (d < 0) d = -d
        printf "%-6s %-3s %-6s %-10.3f %-10.3f %-10.3f %-9.3f\n", M, R, $1, b, $11, $12, d }'
  done
done

stats() {  # stats ARGS...: gsl compile --stats json at -np 4
  # shellcheck disable=SC2068
  "$gsl" compile "$prog" -np 4 --stats json $@
}
field() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

echo
echo "2. memory per rank at -np 4, the layer group's share (L=8 minus L=4), D=32"
for plan in "PP=1 -D DP=4" "PP=4 -D MB=4"; do
  p8=$(stats -D L=8 -D $plan | field "d['training']['param_bytes'], d['training']['optimizer_state_bytes']")
  p4=$(stats -D L=4 -D $plan | field "d['training']['param_bytes'], d['training']['optimizer_state_bytes']")
  echo "$plan: $p8 $p4" | tr -d '(),' | awk '{printf "  %-14s 4 layers: params %d B, optimizer states %d B a rank\n", $1 " " $2 " " $3, $4 - $6, $5 - $7}'
done

echo
echo "3. bytes sent per training step and rank at -np 4 (L=4, B=16)"
for D in 256 1024; do
  sz="-D D=$D -D H=$((4 * D)) -D HD=$((D / 4)) -D L=4"
  # shellcheck disable=SC2086
  dp=$(stats $sz -D PP=1 -D DP=4 | field "d['training']['collective_bytes']")
  # shellcheck disable=SC2086
  pp=$(stats $sz -D PP=4 -D MB=4 | field "d['training']['collective_bytes'], d['training']['collectives'].get('collective_permute', {}).get('bytes', 0)")
  echo "$D $dp $pp" | tr -d '(),' | awk '{printf "  D=%-5s data parallel %10d B   PP=4 M=4 %10d B (shifts %d B, the rest: the output to every rank, the input gradient)   PP/DP %.3f\n", $1, $2, $3, $4, $3 / $2}'
done

echo
echo "4. time to the first step at -np 4, L=4, cold cache (median of $runs, alternated)"
now() { date +%s.%N; }
first_step() {  # first_step CACHE ARGS...: seconds until the first step's log line
  local cache=$1 log="$tmp/log.jsonl"
  shift
  rm -f "$log"
  local t0 pid
  t0=$(now)
  # shellcheck disable=SC2068
  (cd "$tmp" && exec "$gsl" run "$prog" -np 4 -D L=4 $@ --cache-dir "$cache" --log "$log" --no-progress \
    >/dev/null 2>&1) &
  pid=$!
  while ! [ -s "$log" ]; do
    kill -0 "$pid" 2>/dev/null || { echo "first_step: the run ended before its first step" >&2; exit 1; }
    sleep 0.01
  done
  echo "$(now) - $t0" | bc -l
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
first_step "$tmp/warmup" -D PP=1 >/dev/null  # the binary and the page cache warm
pp1=()
pp4=()
for i in $(seq 1 "$runs"); do
  pp1+=("$(first_step "$tmp/c1-$i" -D PP=1)")
  pp4+=("$(first_step "$tmp/c4-$i" -D PP=4 -D MB=4)")
done
a=$(printf '%s\n' "${pp1[@]}" | median)
b=$(printf '%s\n' "${pp4[@]}" | median)
printf '  PP=1 %.3f s   PP=4 MB=4 %.3f s   PP4/PP1 %.2fx\n' "$a" "$b" "$(echo "$b / $a" | bc -l)"
