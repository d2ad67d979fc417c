# common.sh: sourced by tests/data's test scripts (POSIX sh) after they set
# HERE. Runs the test in a fresh temporary folder (removed on exit) and
# gives the checks they share.

fail() { echo "FAIL: $*"; exit 1; }

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1

# above_chance ACC CHANCE: a trained classifier's accuracy is above 0.6.
above_chance() {
  awk -v a="$1" 'BEGIN { exit !(a > 0.6) }' || fail "accuracy $1 is not above 0.6 (chance is $2)"
}

# same_accuracy GOT WANT RUN REF OUT: the accuracy at RUN is -np 1's (else
# the two outputs are shown).
same_accuracy() {
  [ "$1" = "$2" ] || { cat "$4" "$5"; fail "accuracy $1 at $3, $2 at -np 1"; }
}
