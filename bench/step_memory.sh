#!/bin/bash
# Memory of a training step (docs/memory.md): examples/transformer.gsl at
# D=1024, 8 heads of 128, FFN 4096, L=8 (100M params, Adam; B=16, S=16,
# V=16) on one rank, against the same model in PyTorch CPU eager (one
# thread, bench/train_step_torch.py), in paired runs:
#   bench/step_memory.sh BUILD_DIR [PAIRS] [N] [M]
# Each pair runs, alternating the sides,
#   gsl with -D STEPS=N and -D STEPS=M (default 2 and 6), in a scratch
#   directory (its checkpoint goes there), and
#   PyTorch for 2+1+2 and 2+2+6 steps (warm-up, N1, N2),
# each under `perf stat -e page-faults` and `/usr/bin/time -v`, and prints
#   - page faults per steady step: (faults of the long run - faults of the
#     short run) / the difference in steps, so that start-up, first-call,
#     checkpoint and printing costs cancel;
#   - peak RSS of the long runs, and the ratio gsl / PyTorch;
#   - process CPU time per step: gsl's (user + sys) of the difference of
#     its two runs, PyTorch's as train_step_torch.py reports it (the
#     difference of its N1 and N2 steps), and the ratio;
# then the medians over the pairs, and the CPU model. Needs perf
# (linux-perf) and PyTorch (Debian's python3-torch: make bench-deps).
# Never a test: timings and fault counts vary with the load.
set -eu
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
pairs=${2:-3}
N=${3:-2}
M=${4:-6}
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
. "$src/bench/openblas_env.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
model=(-D DP=1 -D D=1024 -D NH=8 -D HD=128 -D H=4096 -D L=8)
torch_args=(16 16 16 1024 8 128 4096 8)

# measure NAME CMD...: runs CMD in $tmp under perf stat and time -v; leaves
# $tmp/NAME.faults, $tmp/NAME.rss_kb, $tmp/NAME.cpu_s and $tmp/NAME.out.
measure() {
  local name=$1
  shift
  (cd "$tmp" && perf stat -x, -e page-faults -o "$tmp/$name.perf" -- \
    /usr/bin/time -v -o "$tmp/$name.time" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err") || {
    echo "step_memory: '$*' failed:" >&2
    tail -5 "$tmp/$name.err" >&2
    exit 1
  }
  awk -F, '/page-faults/ {print $1}' "$tmp/$name.perf" >"$tmp/$name.faults"
  awk -F': ' '/Maximum resident set size/ {print $2}' "$tmp/$name.time" >"$tmp/$name.rss_kb"
  awk -F': ' '/User time/ {u = $2} /System time/ {s = $2} END {print u + s}' "$tmp/$name.time" >"$tmp/$name.cpu_s"
}
val() { cat "$tmp/$1"; }
gsl_run() { measure "$1" "$build/gsl" run "$src/examples/transformer.gsl" -np 1 "${model[@]}" -D STEPS="$2" --no-progress; }
torch_run() { measure "$1" /usr/bin/python3 "$src/bench/train_step_torch.py" "${torch_args[@]}" "$2" "$3"; }
median() { sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

gsl_run warm 2  # fills the compile cache, so that no measured run compiles
fg=() ft=() rg=() rt=() tg=() tt=()
for ((p = 1; p <= pairs; ++p)); do
  if ((p % 2)); then order="gsl torch"; else order="torch gsl"; fi
  for side in $order; do
    if [ "$side" = gsl ]; then
      gsl_run gs "$N"
      gsl_run gl "$M"
    else
      torch_run ts 1 2
      torch_run tl 2 6
    fi
  done
  f1=$(awk -v a="$(val gl.faults)" -v b="$(val gs.faults)" -v n=$((M - N)) 'BEGIN {printf "%.0f", (a - b) / n}')
  f2=$(awk -v a="$(val tl.faults)" -v b="$(val ts.faults)" 'BEGIN {printf "%.0f", (a - b) / 5}')
  r1=$(awk -v k="$(val gl.rss_kb)" 'BEGIN {printf "%.3f", k / 1048576}')
  r2=$(awk -v k="$(val tl.rss_kb)" 'BEGIN {printf "%.3f", k / 1048576}')
  t1=$(awk -v a="$(val gl.cpu_s)" -v b="$(val gs.cpu_s)" -v n=$((M - N)) 'BEGIN {printf "%.1f", (a - b) / n * 1000}')
  t2=$(awk '/^torch/ {print $2}' "$tmp/tl.out")
  fg+=("$f1") ft+=("$f2") rg+=("$r1") rt+=("$r2") tg+=("$t1") tt+=("$t2")
  printf 'pair %d: faults/step gsl %s PyTorch %s | peak RSS gsl %s GiB PyTorch %s GiB (%.3f) | CPU ms/step gsl %s PyTorch %s (%.3f) | load %s\n' \
    "$p" "$f1" "$f2" "$r1" "$r2" "$(awk -v a="$r1" -v b="$r2" 'BEGIN {print a / b}')" "$t1" "$t2" \
    "$(awk -v a="$t1" -v b="$t2" 'BEGIN {print a / b}')" "$(cut -d' ' -f1 /proc/loadavg)"
done
m() { printf '%s\n' "$@" | median; }
echo "examples/transformer.gsl -np 1 ${model[*]} (100M params, Adam) vs PyTorch eager, medians of $pairs pairs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'):"
printf 'page faults per steady step: gsl %s, PyTorch %s\n' "$(m "${fg[@]}")" "$(m "${ft[@]}")"
printf 'peak RSS: gsl %s GiB, PyTorch %s GiB, ratio gsl/PyTorch %.3f\n' "$(m "${rg[@]}")" "$(m "${rt[@]}")" \
  "$(awk -v a="$(m "${rg[@]}")" -v b="$(m "${rt[@]}")" 'BEGIN {print a / b}')"
printf 'step CPU time: gsl %s ms, PyTorch %s ms, ratio gsl/PyTorch %.3f\n' "$(m "${tg[@]}")" "$(m "${tt[@]}")" \
  "$(awk -v a="$(m "${tg[@]}")" -v b="$(m "${tt[@]}")" 'BEGIN {print a / b}')"
