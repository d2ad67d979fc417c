#!/usr/bin/env bash
# Headless Vim test of editors/vim: syntax groups at the positions asserted in
# editors/vim/tests/*.gsl, the ftplugin/indent settings, and re-indenting the
# samples. Usage: run_tests.sh [WORK_DIR]. Exit 0 pass, 1 fail, 77 skip (no vim).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=${1:-$(mktemp -d)}
mkdir -p "$work"

if ! command -v vim >/dev/null 2>&1; then
  echo "SKIP: vim is not installed"; exit 77
fi
if ! vim --version | grep -q '+syntax'; then
  echo "SKIP: this vim has no +syntax"; exit 77
fi

res="$work/vim_test_result.txt"
rm -f "$res"
tests=$(printf "'%s'," "$here"/tests/*.gsl)
samples=$(printf "'%s'," "$root"/editors/samples/*.gsl)
timeout 120 vim -Nu NONE -i NONE -n -es \
  -c "let &rtp = '$here,' . &rtp" -c 'filetype plugin indent on' -c 'syntax on' \
  -c "let g:gsl_test_out = '$res'" \
  -c "execute 'source' fnameescape('$here/tests/check_syntax.vim')" \
  -c "call GslRunSuite([${tests%,}], [${samples%,}])" </dev/null >/dev/null 2>&1
rc=$?
if [ ! -f "$res" ]; then
  echo "FAIL: vim exited ($rc) without a report: an error in the Vim scripts?"
  echo "  try: vim -Nu NONE -c 'set rtp^=$here' -c 'syntax on' -c 'filetype on' $here/tests/keywords.gsl"
  exit 1
fi
cat "$res"
[ "$rc" -eq 0 ] || exit 1
