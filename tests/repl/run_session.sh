#!/bin/sh
# Runs a scripted REPL session through a pipe (stdin not a terminal: no
# line editing, no colours) and compares the transcript with the expected
# one: tests/repl/NAME.session -> tests/repl/NAME.expected.
#   run_session.sh GSL SESSION [--update]
# The session's first line `# args: ...` gives the repl's arguments; the
# rest is typed. It runs in a fresh temporary folder in which examples/ and
# tests/ are the repository's (tests/repl/*.gsl: programs for the sessions),
# so files it saves go nowhere else. `--echo` prints each
# input after its prompt, so the output reads as a transcript.
set -eu
gsl=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
session=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
expected=${session%.session}.expected
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ln -s "$src/examples" "$tmp/examples"
ln -s "$src/tests" "$tmp/tests"
args=$(sed -n '1s/^# args: *//p' "$session")
sed 1d "$session" > "$tmp/input.txt"
cd "$tmp"
# The default machine model, whatever this machine has calibrated (docs/cost-model.md).
export GSL_MACHINE_DIR="$tmp/no-machine"
# shellcheck disable=SC2086
if ! "$gsl" repl --echo $args < input.txt > out.txt 2>&1; then
  echo "FAIL: gsl repl exited with an error"
  cat out.txt
  exit 1
fi
if [ "${3:-}" = "--update" ]; then
  cp out.txt "$expected"
  echo "updated $expected"
  exit 0
fi
if ! diff -u "$expected" out.txt; then
  echo "FAIL: the transcript of $session differs from $expected (diff above: - expected, + got)"
  exit 1
fi
echo "ok: $session"
