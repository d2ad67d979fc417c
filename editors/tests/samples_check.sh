#!/usr/bin/env bash
# The samples are valid GSL programs, not just valid syntax: runs
#   gsl check FILE --np 4
# (parse, types, shapes, shardings) on every editors/samples/*.gsl and requires
# exit status 0. --np 4 gives every mesh of the samples valid sizes
# (e.g. [data: 2, model: NP / 2]). A library sample without fn main
# (layers.gsl) is checked on its own as well.
# Usage: samples_check.sh [GSL_BINARY]. Exit 0 ok, 1 fail, 77 skip (no
# GSL_BINARY given: a standalone `cmake -S editors` found no gsl; pass
# -DGSL_EXECUTABLE=/path/to/gsl there).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
gsl=${1:-}
np=4

if [ -z "$gsl" ]; then
  echo "SKIP: no gsl binary; configure from the root CMakeLists.txt, or pass -DGSL_EXECUTABLE=/path/to/gsl"
  exit 77
fi
if [ ! -x "$gsl" ]; then
  echo "FAIL: $gsl is not an executable (build the target gsl first)"
  exit 1
fi

fails=0
n=0
for f in "$root"/editors/samples/*.gsl; do
  n=$((n + 1))
  rel=${f#"$root"/}
  if out=$("$gsl" check "$f" --np "$np" 2>&1); then
    echo "ok:   gsl check $rel --np $np"
  else
    rc=$?
    echo "FAIL: gsl check $rel --np $np exited $rc:"
    sed 's/^/    /' <<<"$out"
    fails=$((fails + 1))
  fi
done
[ "$n" -gt 0 ] || { echo "FAIL: no samples in $root/editors/samples"; exit 1; }
if [ "$fails" -ne 0 ]; then
  echo "FAIL: $fails of $n samples are not valid GSL programs"
  exit 1
fi
echo "PASS: all $n samples pass gsl check --np $np"
