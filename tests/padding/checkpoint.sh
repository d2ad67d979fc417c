#!/bin/sh
# checkpoint.sh GSL: tests/padding/checkpoint.gsl trained with padded
# params at -np 3 and -np 7 (and unsharded at -np 1), each checkpoint
# loaded at -np 1: the loaded run must print the training run's numbers,
# and every run those of -np 1 (rel 1e-5, tests/sharding/run_equivalence.sh's
# comparison). Prints PASS or FAIL.
set -u
GSL=$1
HERE=$(cd "$(dirname "$0")" && pwd)
case $GSL in /*) ;; *) GSL=$(pwd)/$GSL ;; esac
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gsl-padckpt.XXXXXX") || exit 2
trap 'rm -rf "$WORK"' EXIT INT TERM
fail=0
for np in 1 3 7; do
  mkdir "$WORK/np$np"
  (cd "$WORK/np$np" && "$GSL" run "$HERE/checkpoint.gsl" -np "$np" -D MP="$np" > train.out 2> train.err &&
   "$GSL" run "$HERE/checkpoint.gsl" -np 1 -D MODE=1 > load.out 2> load.err) || {
    echo "FAIL: a run at -np $np exited with an error"; cat "$WORK/np$np"/*.err; fail=1; continue; }
done
[ $fail -eq 0 ] || { echo FAIL; exit 1; }
# Every output against the -np 1 training run's, numbers within rel 1e-5.
cmp_out() {
  awk -v ref="$1" '
    function isnum(t) { return t ~ /^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$/ }
    function abs(x) { return x < 0 ? -x : x }
    function tok(line, arr, s) { s = line; gsub(/[][(),]/, " & ", s); return split(s, arr, /[ \t]+/) }
    {
      if ((getline want < ref) <= 0) { print "extra line " FNR; bad = 1; exit 1 }
      na = tok(want, ta); nb = tok($0, tb)
      if (na != nb) { print "line " FNR ": token counts differ"; bad = 1; exit 1 }
      for (i = 1; i <= na; i++) {
        if (ta[i] == tb[i]) continue
        if (isnum(ta[i]) && isnum(tb[i])) {
          d = abs(ta[i] - tb[i]); mx = abs(ta[i]) > abs(tb[i]) ? abs(ta[i]) : abs(tb[i])
          if (d <= 1e-6 || d <= 1e-5 * mx) continue
        }
        print "line " FNR ": " ta[i] " vs " tb[i]; bad = 1; exit 1
      }
    }
    END { if (!bad && (getline want < ref) > 0) { print "missing lines"; exit 1 } exit bad }
  ' "$2"
}
ref=$WORK/np1/train.out
for np in 1 3 7; do
  for f in train load; do
    if cmp_out "$ref" "$WORK/np$np/$f.out"; then
      echo "ok   -np $np $f"
    else
      echo "FAIL: -np $np $f differs from -np 1 train"; fail=1
    fi
  done
done
[ $fail -eq 0 ] && echo PASS || echo FAIL
exit $fail
