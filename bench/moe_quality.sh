#!/bin/sh
# GShard's claim on real text (issue 34, part 4; docs/moe.md, "Quality at
# equal FLOPs"): a byte-level Transformer LM on the Debian fortunes corpus,
# dense against mixture-of-experts at equal FLOPs per token, the same
# steps, seeds, data order, optimizer and learning-rate schedule
# (bench/moe_quality/*.gsl). Every routing (GShard top-2, Switch top-1,
# expert choice) at every E and capacity factor, SEEDS seeds each.
#
#   bench/moe_quality.sh GSL OUT_DIR
#
# Settings from the environment (defaults in brackets):
#   NP        ranks (threads) per run [1]
#   STEPS     training steps [600]
#   SEEDS     [0 1 2]
#   ES        experts per MoE layer [4 8 16]
#   ROUTINGS  top2 switch ec [all three]
#   CFS       capacity factors [1.0 1.25 2.0]
#   EXTRA     more gsl arguments for every run, e.g. "-D D=128 -D LP=4"
#             (the same for dense and MoE) []
#   NICE      the runs' niceness [10]
#
# Equal FLOPs per token (the expert FFNs against the dense FFN they replace,
# H hidden units): top-2 experts have H / 2 hidden units and a capacity of
# CF x 2 x GS / E tokens per group of GS; Switch experts H units, CF x GS /
# E; expert choice H / CF units (rounded), CF x GS / E tokens (CF experts
# per token on average). The routed tokens cost the dense FFN's FLOPs;
# the capacity's empty slots are computed too (CF times the routed work
# for top-2 and Switch) and show in the step time, not in the count.
#
# Each run writes OUT_DIR/logs/NAME.jsonl (--log); a run whose log already
# reaches the last step is not run again, so an interrupted bench goes on
# where it stopped. The compile cache is OUT_DIR/cache. Then
# bench/moe_quality_report.py prints the validation curves (medians over
# the seeds), final validation losses, steps to the dense model's final
# validation loss, tokens/s and drop rates, writes OUT_DIR/report.txt and,
# with gnuplot, draws OUT_DIR/moe_quality.svg. Never used as a test: a
# full run is 3 + 81 runs (about 30-40 minutes on 2 cores).
set -eu
gsl=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
out=$2
mkdir -p "$out/logs"
out=$(cd "$out" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
np=${NP:-1}
steps=${STEPS:-600}
seeds=${SEEDS:-0 1 2}
es=${ES:-4 8 16}
routings=${ROUTINGS:-top2 switch ec}
cfs=${CFS:-1.0 1.25 2.0}
extra=${EXTRA:-}
nice=${NICE:-10}
H=$(awk '$1 == "const" && $2 == "H" { print $4 }' "$src/bench/moe_quality/model.gsl")
for a in $extra; do case "$a" in H=*) H=${a#H=} ;; esac; done

# run NAME PROGRAM SEED ARGS...: one training run, unless its log is complete.
run() {
  name=$1 prog=$2 seed=$3
  shift 3
  log="$out/logs/$name.jsonl"
  if [ -f "$log" ] && grep -q "\"step\":$steps," "$log"; then return; fi
  echo "run $name: $prog -np $np --seed $seed $* $extra" >&2
  # shellcheck disable=SC2086 # extra is a list of words
  (cd "$out" && nice -n "$nice" "$gsl" run "$src/bench/moe_quality/$prog.gsl" -np "$np" --seed "$seed" \
     -D STEPS="$steps" "$@" $extra --cache-dir "$out/cache" --no-progress --log "$log.part" > "$out/logs/$name.out" 2>&1) ||
    { cat "$out/logs/$name.out" >&2; echo "error: run $name failed" >&2; exit 1; }
  mv "$log.part" "$log"
}

{
  echo "np $np"; echo "steps $steps"; echo "seeds $seeds"; echo "es $es"; echo "routings $routings"
  echo "cfs $cfs"; echo "extra $extra"; echo "H $H"
  echo "cpu $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(nproc) cores"
} > "$out/config.txt"

# Seeds outermost, so that a stopped bench has every setting for its first seeds.
for seed in $seeds; do
  run "dense_s$seed" dense "$seed"
  for e in $es; do
    for r in $routings; do
      for cf in $cfs; do
        case $r in
          top2) kr=2; he=$((H / 2)) ;;
          switch) kr=1; he=$H ;;
          ec) kr=1; he=$(awk -v h="$H" -v cf="$cf" 'BEGIN { printf "%d", h / cf + 0.5 }') ;;
          *) echo "error: unknown routing $r" >&2; exit 1 ;;
        esac
        run "${r}_E${e}_cf${cf}_s$seed" "$r" "$seed" -D E="$e" -D CF="$cf" -D KR="$kr" -D HE="$he"
      done
    done
  done
done

python3 "$src/bench/moe_quality_report.py" "$out" | tee "$out/report.txt"
