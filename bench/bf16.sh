#!/bin/bash
# bf16 mixed precision, all measured in this invocation:
#   bench/bf16.sh BUILD_DIR [PROGRAM] [NP] [STEPS]
#   1. bench_bf16_gemm: the JIT's bf16 GEMM (vdpbf16ps) against its own f32
#      GEMM, 1024^3, single thread;
#   2. bench/bf16_torch.py: PyTorch's CPU f32 and bf16 matmul, same size,
#      one thread (Debian's python3-torch in /usr/bin/python3);
#   3. PROGRAM (default examples/transformer.gsl) at -np NP for STEPS
#      steps, f32 and --autocast bf16: wall time per step, the bytes every
#      rank's collectives sent (summed from a --trace), and the final loss.
# Prints the ratios bf16/f32. Never a test: timings vary with the load.
set -u
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
. "$src/bench/openblas_env.sh"
prog=$(cd "$src" && realpath "${2:-examples/transformer.gsl}")
np=${3:-4}
steps=${4:-50}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$build/bench/bench_bf16_gemm"
/usr/bin/python3 "$src/bench/bf16_torch.py" 1024 || echo "(PyTorch not available)"

run() {  # run NAME EXTRA-ARGS...: prints "NAME seconds bytes loss"
  local name=$1
  shift
  local t0 t1
  t0=$(date +%s.%N)
  (cd "$tmp" && "$build/gsl" run "$prog" -np "$np" -D STEPS="$steps" --no-progress --no-cache \
     --trace "$tmp/$name.json" "$@" > "$tmp/$name.out") || { echo "run $name failed"; exit 1; }
  t1=$(date +%s.%N)
  /usr/bin/python3 - "$tmp/$name.json" "$tmp/$name.out" "$name" "$t0" "$t1" "$steps" <<'PY'
import json, sys
tr = json.load(open(sys.argv[1]))
sent = sum(e.get("args", {}).get("bytes_sent", 0) for e in tr["traceEvents"] if e.get("cat") == "collective")
loss = [l.split() for l in open(sys.argv[2]) if l.startswith("step")]
last = loss[-1][loss[-1].index("loss") + 1] if loss else "?"
print("%s %.4f %d %s" % (sys.argv[3], (float(sys.argv[5]) - float(sys.argv[4])) / int(sys.argv[6]), sent, last))
PY
}
f=$(run f32)
b=$(run bf16 --autocast bf16)
echo "$(basename "$prog") -np $np, $steps steps (wall time per step includes compiling):"
echo "  f32:  $f" | awk '{printf "  f32   %.4f s/step  %d bytes sent  loss %s\n", $3, $4, $5}'
echo "  bf16: $b" | awk '{printf "  bf16  %.4f s/step  %d bytes sent  loss %s\n", $3, $4, $5}'
echo "$f $b" | awk '{printf "ratio bf16/f32: step time %.2f, bytes sent %.3f\n", $6 / $2, $7 / $3}'
