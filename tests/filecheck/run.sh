#!/usr/bin/env bash
# run.sh GSL FILECHECK TEST.gsl: compile TEST with the stage named by its
# `# EMIT:` line (default ir) and check the output with FileCheck.
set -euo pipefail
gsl=$1 filecheck=$2 test=$3
emit=$(sed -n 's/^# EMIT: *//p' "$test" | head -n1)
[ -n "$emit" ] || emit=ir
# shellcheck disable=SC2086
"$gsl" compile "$test" --emit $emit | "$filecheck" --match-full-lines --strict-whitespace=false "$test"
