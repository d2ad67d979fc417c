#!/bin/sh
# Quality at equal compute (the GShard paper's claim): examples/moe.gsl
# against its dense twin (-D DENSE=1: block 2's FFN dense with 2 * HE hidden
# units, the FLOPs per token of top-2 routing), same task, data, steps and
# seeds, at -np 8. Prints the cross-entropy (the loss without the aux term)
# of each at a few steps, per seed, and the ratio MoE / dense of their
# means (the reference is the dense model in the same run).
#   bench/moe_vs_dense.sh GSL [SEEDS...]
set -eu
gsl=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
shift
seeds=${*:-0 1 2}
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
steps="40 60 80 100 199"
for seed in $seeds; do
  for dense in 0 1; do
    "$gsl" run "$src/examples/moe.gsl" -np 8 --no-progress --seed "$seed" -D DENSE=$dense -D EVERY=20 \
      | awk -v s="$seed" -v d="$dense" '$1 == "step" { print s, d, $2, $6 }' >> curves.txt
  done
done
echo "MoE (16 experts, top-2) vs dense FFN of equal FLOPs per token, copy task, -np 8, Adam 0.003"
echo "cross-entropy at step (seeds: $seeds)"
printf "%6s %12s %12s %16s\n" step MoE dense "ratio MoE/dense"
for st in $steps; do
  awk -v st="$st" '$3 == st { if ($2 == 0) { m += $4; nm++ } else { d += $4; nd++ } }
    END { printf "%6d %12.4f %12.4f %16.3f\n", st, m / nm, d / nd, (m / nm) / (d / nd) }' curves.txt
done
