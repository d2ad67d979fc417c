#!/usr/bin/env bash
# expect_exit.sh CODE CMD [ARGS...]: runs CMD and fails unless it exits with
# CODE. With EXPECT_STDERR=REGEX (or EXPECT_STDOUT=REGEX) set, that stream
# must also match the extended regex. Used by CTest for gsl's exit codes
# (0 ok, 1 user error, 2 usage error).
set -u
if [ $# -lt 2 ]; then
  echo "usage: expect_exit.sh CODE CMD [ARGS...]" >&2
  exit 2
fi
want=$1
shift
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
"$@" >"$out" 2>"$err"
got=$?
fail=0
if [ "$got" != "$want" ]; then
  echo "FAIL: exit code $got, expected $want: $*" >&2
  fail=1
fi
if [ -n "${EXPECT_STDERR:-}" ] && ! grep -Eq -- "$EXPECT_STDERR" "$err"; then
  echo "FAIL: stderr does not match /$EXPECT_STDERR/: $*" >&2
  fail=1
fi
if [ -n "${EXPECT_STDOUT:-}" ] && ! grep -Eq -- "$EXPECT_STDOUT" "$out"; then
  echo "FAIL: stdout does not match /$EXPECT_STDOUT/: $*" >&2
  fail=1
fi
if [ $fail != 0 ]; then
  echo "--- stdout:" >&2; cat "$out" >&2
  echo "--- stderr:" >&2; cat "$err" >&2
fi
exit $fail
