#!/bin/sh
# gsl trace summary (docs/trace.md): the tables of a trace of
# tests/trace/summary.gsl at -np 2, checked against what the program
# predicts (the training step STEPS times per rank, the evaluation once) and
# against the trace's own events; a bad file is a clean error, exit 1.
#   usage: summary_test.sh GSL SOURCE_DIR
set -eu
GSL=$1 SRC=$2 T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T"
fail() {
  echo "FAIL: $1" >&2
  exit 1
}

"$GSL" run "$SRC/tests/trace/summary.gsl" -np 2 -D STEPS=3 --no-cache --no-progress --trace t.json > run.out
"$GSL" trace summary t.json > sum.txt || fail "gsl trace summary exited $?"
"$GSL" trace summary t.json --by-rank > rank.txt || fail "gsl trace summary --by-rank exited $?"
python3 "$SRC/tests/trace/check_summary.py" t.json sum.txt rank.txt 2 3 || fail "the tables (above)"

# A bad file: one line on stderr, nothing on stdout, exit 1.
expect_error() {  # FILE MESSAGE
  set +e
  "$GSL" trace summary "$1" > out.txt 2> err.txt
  rc=$?
  set -e
  [ "$rc" = 1 ] || fail "$1: exit $rc"
  [ ! -s out.txt ] || fail "$1: output $(cat out.txt)"
  [ "$(cat err.txt)" = "$2" ] || fail "$1: the message is '$(cat err.txt)', expected '$2'"
}
echo 'not json' > bad.json
expect_error bad.json "gsl: error: 'bad.json' is not JSON: parse error at line 1, column 2: syntax error while parsing value - invalid literal; last read: 'no'"
echo '{"events": []}' > other.json
expect_error other.json "gsl: error: 'other.json' is not a trace of gsl run --trace: it has no \"traceEvents\" array"
echo '{"traceEvents": [{"ph": "X", "name": "f", "cat": "function", "ts": 0, "pid": 0, "tid": 0}]}' > nodur.json
expect_error nodur.json "gsl: error: 'nodur.json': trace event 0 has no \"dur\" number"
expect_error missing.json "gsl: error: cannot read 'missing.json': No such file or directory"
echo PASS
