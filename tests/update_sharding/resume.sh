#!/bin/sh
# resume.sh GSL: a checkpoint written at -np 4 with the Adam states stored
# split over `data` (weight-update sharding) resumes bit for bit under the
# same settings, and to the same lines (rel 1e-5) with --no-update-sharding,
# at -np 2 and at -np 1; and one written with --no-update-sharding resumes
# with update sharding on.
set -u
GSL=$1
HERE=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
close() {  # close WANT GOT: the same lines, numbers within rel 1e-5
  [ "$(wc -l < "$1")" = "$(wc -l < "$2")" ] || return 1
  paste -d'|' "$1" "$2" | awk -F'|' '
    { n = split($1, a, " "); m = split($2, b, " "); if (n != m) exit 1
      for (i = 1; i <= n; i++) {
        if (a[i] == b[i]) continue
        x = a[i] + 0; y = b[i] + 0; d = x - y; if (d < 0) d = -d
        s = (x < 0 ? -x : x); if (d > 1e-5 * s + 1e-6) exit 1 } }
    END { if (NR == 0) exit 1 }'
}
P="$HERE/resume.gsl"
"$GSL" run "$P" --no-progress -np 4 -D DP=4 > full.txt || fail "full run"
cp mid.safetensors split.safetensors
grep -E '^step ([6-9]|1[01]) |^final' full.txt > want.txt
run() {  # run NAME CHECKPOINT ARGS...: a resumed run's lines
  name=$1 ck=$2
  shift 2
  cp "$ck" ck.safetensors
  "$GSL" run "$P" --no-progress --resume ck.safetensors "$@" > "$name.txt" || fail "resumed run $*"
}
run same split.safetensors -np 4 -D DP=4
cmp -s want.txt same.txt || { diff want.txt same.txt; fail "resumed with the same settings: not bit for bit"; }
for cfg in "-np 4 -D DP=4 --no-update-sharding" "-np 2 -D DP=2" "-np 1"; do
  # shellcheck disable=SC2086
  run other split.safetensors $cfg
  close want.txt other.txt || { paste want.txt other.txt; fail "resumed at $cfg differs"; }
done
# The other way: states written whole, resumed split.
"$GSL" run "$P" --no-progress -np 4 -D DP=4 --no-update-sharding > full_off.txt || fail "full run, no update sharding"
close full.txt full_off.txt || { paste full.txt full_off.txt; fail "update sharding changes the losses"; }
cp mid.safetensors whole.safetensors
run split_from_whole whole.safetensors -np 4 -D DP=4
close want.txt split_from_whole.txt || { paste want.txt split_from_whole.txt; fail "whole states resumed split differ"; }
echo "PASS: resumed bit for bit with the same settings; the same lines without update sharding, at -np 2 and 1, and from whole states"
