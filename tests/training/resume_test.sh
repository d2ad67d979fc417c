#!/bin/sh
# resume_test.sh GSL: a run resumed from a checkpoint continues bit for bit
# (same printed lines as the uninterrupted run), under another -np too;
# a truncated or mismatched checkpoint is a clear error (exit 1).
set -u
GSL=$1
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
fail() { echo "FAIL: $*"; exit 1; }

"$GSL" run "$HERE/resume.gsl" --no-progress > full.txt || fail "full run"
cp mid.safetensors saved.safetensors
grep -E '^step ([6-9]|1[01]) |^final' full.txt > want.txt
for np in 1 2 4; do
  cp saved.safetensors ck.safetensors
  "$GSL" run "$HERE/resume.gsl" --no-progress -np $np -D DP=1 --resume ck.safetensors > resumed.txt \
    || fail "resumed run at -np $np"
  if [ "$np" = 1 ]; then
    cmp -s want.txt resumed.txt || { diff want.txt resumed.txt; fail "resumed run differs from the uninterrupted one"; }
  else
    # Other shardings: the same lines, numbers within rel 1e-5.
    paste -d'|' want.txt resumed.txt | awk -F'|' '
      { n = split($1, a, " "); m = split($2, b, " "); if (n != m) exit 1
        for (i = 1; i <= n; i++) {
          if (a[i] == b[i]) continue
          x = a[i] + 0; y = b[i] + 0; d = x - y; if (d < 0) d = -d
          s = (x < 0 ? -x : x); if (d > 1e-5 * s + 1e-6) exit 1 } }
      END { if (NR == 0) exit 1 }' || { paste want.txt resumed.txt; fail "resumed run at -np $np differs"; }
    [ "$(wc -l < resumed.txt)" = "$(wc -l < want.txt)" ] || fail "resumed run at -np $np printed other lines"
  fi
done
echo "resume: bit-for-bit at -np 1, same lines at -np 2 and 4"

# A truncated checkpoint.
head -c 100 saved.safetensors > broken.safetensors
"$GSL" run "$HERE/resume.gsl" --no-progress --resume broken.safetensors > out.txt 2> err.txt
rc=$?
[ $rc = 1 ] || fail "truncated checkpoint: exit code $rc, expected 1"
grep -q "broken.safetensors" err.txt || { cat err.txt; fail "truncated checkpoint: message does not name the file"; }
grep -qi "truncated\|header" err.txt || { cat err.txt; fail "truncated checkpoint: message does not say what is wrong"; }
echo "truncated: $(head -n1 err.txt)"

# A checkpoint of another model (missing param).
printf 'param other: f32[2] = zeros\nfn main() { save_checkpoint("other.safetensors") }\n' > other.gsl
"$GSL" run other.gsl > /dev/null || fail "writing the other checkpoint"
"$GSL" run "$HERE/resume.gsl" --no-progress --resume other.safetensors > out.txt 2> err.txt
rc=$?
[ $rc = 1 ] || fail "mismatched checkpoint: exit code $rc, expected 1"
grep -q "has no param 'w'" err.txt || { cat err.txt; fail "mismatched checkpoint: unclear message"; }
echo "mismatch: $(head -n1 err.txt)"
echo "PASS"
