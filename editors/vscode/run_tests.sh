#!/usr/bin/env bash
# Runs the TextMate grammar unit tests (editors/vscode/tests/*.gsl, in the
# vscode-tmgrammar-test format) with the VS Code tokenizer.
# Exit 0 pass, 1 fail, 77 skip (node_modules cannot be installed).
set -u
dir=$(cd "$(dirname "$0")" && pwd)
"$dir/ensure_node_modules.sh" || exit $?
cd "$dir" || exit 1
node check_manifest.js || exit 1
n=$(cat tests/*.gsl | grep -Ec '^#[[:space:]]*(\^+|<-+)[[:space:]]')
echo "vscode-tmgrammar-test: $(ls tests/*.gsl | wc -l) files, $n assertion lines"
exec node_modules/.bin/vscode-tmgrammar-test --compact \
  -g syntaxes/gsl.tmLanguage.json 'tests/*.gsl'
