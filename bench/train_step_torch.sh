#!/bin/bash
# The Transformer example's training step at a wider model against
# PyTorch's, both single-threaded on one core, in paired runs:
#   bench/train_step_torch.sh BUILD_DIR [D NH HD H] [PAIRS]
# (default D=256, 8 heads of 32, FFN 1024; B=16, S=16, V=16, 2 layers as the
# example). Each side times N1 = 10 and N2 = 60 steps after a warm-up and
# reports the process CPU time per step of the difference (other
# processes' use of the shared cores is not counted); the pairs alternate gsl and
# PyTorch (Debian's python3-torch in /usr/bin/python3) and the ratio
# gsl/PyTorch of every pair is printed with their median. Never a test:
# timings vary with the load.
set -eu
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
D=${2:-256} NH=${3:-8} HD=${4:-32} H=${5:-1024} pairs=${6:-3}
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
. "$src/bench/openblas_env.sh"
ratios=()
for ((p = 0; p < pairs; ++p)); do
  g=$("$build/bench/bench_train_step" width "$D" "$NH" "$HD" "$H" 10 60 | awk '/^gsl/ {print $2}')
  t=$(/usr/bin/python3 "$src/bench/train_step_torch.py" 16 16 16 "$D" "$NH" "$HD" "$H" 2 10 60 2>/dev/null |
      awk '/^torch/ {print $2}')
  r=$(awk -v g="$g" -v t="$t" 'BEGIN {printf "%.3f", g / t}')
  ratios+=("$r")
  echo "pair $((p + 1)): gsl $g ms/step  PyTorch $t ms/step  ratio gsl/PyTorch $r  (load $(cut -d' ' -f1 /proc/loadavg))"
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR] = $1} END {printf "D=%s step, ratio gsl/PyTorch time (median of %d pairs) = %s\n", "'"$D"'", NR, a[int((NR + 1) / 2)]}'
