#!/bin/bash
# The persistent compile cache (docs/compile-cache.md), through `gsl run`:
#   cache_test.sh GSL
# miss then hit (same output, nothing compiled the second time), corrupt
# and truncated entries rebuilt, a foreign entry (another key's file) and
# another gsl version miss, --no-cache writes nothing, two runs at once
# into one empty directory, the size bound (GSL_CACHE_MAX), --log's
# compile seconds.
set -u
gsl=$1
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$src" || exit 1
prog=(examples/mlp.gsl -np 4)
fail() {
  echo "FAIL: $1"
  exit 1
}
# run DIR NAME [ENV...]: runs the program into cache DIR; stdout in
# $tmp/NAME.out, the stats line in $tmp/NAME.stats.
run() {
  local dir=$1 name=$2
  shift 2
  env "$@" "$gsl" run "${prog[@]}" --cache-dir "$dir" --cache-stats >"$tmp/$name.out" 2>"$tmp/$name.err" ||
    fail "$name: gsl run failed: $(cat "$tmp/$name.err")"
  grep 'gsl: compile cache:' "$tmp/$name.err" >"$tmp/$name.stats" || fail "$name: no stats line"
}
# stat NAME FIELD: the count before FIELD (loaded, compiled, rebuilt).
stat() { sed -E "s/.* ([0-9]+) $2.*/\1/" "$tmp/$1.stats"; }
same() { cmp -s "$tmp/ref.out" "$tmp/$1.out" || fail "$1: output differs from the uncached run"; }

"$gsl" run "${prog[@]}" --no-cache --cache-dir "$tmp/none" --cache-stats >"$tmp/ref.out" 2>"$tmp/ref.err" ||
  fail "uncached run failed"
[ -e "$tmp/none" ] && fail "--no-cache created the cache directory"
grep -q '0 loaded' "$tmp/ref.err" || fail "--no-cache loaded something"

c="$tmp/c"
run "$c" miss
same miss
n=$(stat miss compiled)
[ "$n" -gt 0 ] && [ "$(stat miss loaded)" = 0 ] || fail "miss: expected only compiles: $(cat "$tmp/miss.stats")"
entries=$(ls "$c"/*.o | wc -l)
[ "$entries" = "$n" ] || fail "miss: $n compiled but $entries entries"

run "$c" hit
same hit
[ "$(stat hit compiled)" = 0 ] && [ "$(stat hit loaded)" = "$n" ] || fail "hit: $(cat "$tmp/hit.stats")"

# Flip bytes in the middle of one entry, truncate another.
set -- $(ls -S "$c"/*.o)
big=$1 second=$2
size=$(wc -c <"$big")
printf '\xde\xad\xbe\xef' | dd of="$big" bs=1 seek=$((size / 2)) conv=notrunc status=none
truncate -s $(($(wc -c <"$second") - 7)) "$second"
run "$c" corrupt
same corrupt
[ "$(stat corrupt rebuilt)" = 2 ] && [ "$(stat corrupt compiled)" = 2 ] || fail "corrupt: $(cat "$tmp/corrupt.stats")"
run "$c" repaired
[ "$(stat repaired compiled)" = 0 ] || fail "repaired: the rebuilt entries were not stored: $(cat "$tmp/repaired.stats")"

# A foreign entry: another key's file under this key's name.
set -- $(ls "$c"/*.o)
cp "$1" "$2"
run "$c" foreign
same foreign
[ "$(stat foreign rebuilt)" = 1 ] || fail "foreign: $(cat "$tmp/foreign.stats")"

# Another gsl version: every key differs.
run "$c" version GSL_CACHE_VERSION="gsl 9.9"
same version
[ "$(stat version compiled)" = "$n" ] && [ "$(stat version loaded)" = 0 ] || fail "version: $(cat "$tmp/version.stats")"

# Two runs at once into one empty directory.
p="$tmp/par"
run "$p" par1 &
pid1=$!
run "$p" par2 &
pid2=$!
wait $pid1 || fail "first concurrent run"
wait $pid2 || fail "second concurrent run"
same par1
same par2
total=$(($(stat par1 compiled) + $(stat par2 compiled)))
[ "$total" = "$n" ] || fail "concurrent: $total compiles in all, expected $n (one run compiles each key)"
[ "$(ls "$p"/*.o | wc -l)" = "$n" ] || fail "concurrent: wrong number of entries"
ls "$p" | grep -q tmp && fail "concurrent: temporary files left"

# The size bound: 3 KiB keeps only some entries, the newest.
e="$tmp/evict"
run "$e" evict GSL_CACHE_MAX=3K
same evict
bytes=$(cat "$e"/*.o | wc -c)
[ "$bytes" -le 3072 ] || fail "eviction: $bytes bytes kept, bound 3072"
[ "$(ls "$e"/*.o | wc -l)" -lt "$n" ] || fail "eviction: nothing evicted"
GSL_CACHE_MAX=lots "$gsl" run "${prog[@]}" --cache-dir "$e" >/dev/null 2>"$tmp/bad.err"
[ $? = 2 ] && grep -q "GSL_CACHE_MAX must be a size" "$tmp/bad.err" || fail "a malformed GSL_CACHE_MAX was accepted"

# --log records the compile seconds (a training program).
"$gsl" run tests/training/mlp_adam.gsl --cache-dir "$tmp/log" --log "$tmp/log.jsonl" --no-progress >/dev/null 2>&1 ||
  fail "training run failed"
grep -qE '"compile_s": ?[0-9.e+-]+\}' "$tmp/log.jsonl" || fail "--log has no compile_s: $(head -2 "$tmp/log.jsonl")"

echo PASS
