#!/usr/bin/env bash
# The editors' word lists against GSL's own tables, both ways: every name is
# in the editor's list and the list has no name GSL does not have.
# The names come from the tables themselves, printed by gsl_surface_names
# (editors/tests/surface_names.cpp): the op-table builtins, the host builtins,
# the param initialisers, and the operators of frontend/Operators.cpp.
#   Vim (textual, editors/vim/syntax/gsl.vim): the `syn keyword` lists of
#     gslBuiltin, gslHostBuiltin (plus its `\<batch\>` match), gslInitializer
#     and gslWordOperator; and, in Vim itself if installed, every operator in
#     `y = x OP x` is gslOperator/gslWordOperator over all of its characters.
#   TextMate (editors/tests/lists_tm.js, node without node_modules).
# (editors_drift checks the other direction for the grammar's keywords and
# the optimizer/dataset constructors, which have no table to print.)
# Usage: lists_test.sh NAMES_BIN [WORK_DIR]. Exit 0 ok, 1 drift, 77 skip
# (no gsl_surface_names binary; without vim or node that half is skipped).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${1:-}
work=${2:-$(mktemp -d)}
mkdir -p "$work"
vimsyn=$root/editors/vim/syntax/gsl.vim
tm=$root/editors/vscode/syntaxes/gsl.tmLanguage.json

if [ -z "$bin" ] || [ ! -x "$bin" ]; then
  echo "SKIP: no gsl_surface_names binary (configure from the root CMakeLists.txt)"
  exit 77
fi
names="$work/names.txt"
"$bin" >"$names" || { echo "FAIL: $bin failed"; exit 1; }
of_kind() { awk -v k="$1" '$1 == k { print $2 }' "$names" | sort -u; }
for k in builtin host init wordop operator; do
  [ -n "$(of_kind $k)" ] || { echo "FAIL: $bin printed no '$k' names"; exit 1; }
done
echo "names: $(of_kind builtin | wc -l) builtins, $(of_kind host | wc -l) host builtins," \
     "$(of_kind init | wc -l) initialisers, $(of_kind wordop | wc -l)+$(of_kind operator | wc -l) operators"

rc=0
# ---------------------------------------------------------------- Vim, textual
# The words of `syn keyword GROUP ...` lines (options such as nextgroup= and
# contained dropped) and of `syn match GROUP "\<WORD\>..."` patterns.
vim_words() {
  {
    sed -n "s/^syn keyword  *$1  *//p" "$vimsyn" | tr -s ' ' '\n' | grep -v '=' | grep -vx 'contained\|skipwhite\|skipnl'
    sed -n "s/^syn match  *$1  *\"\\\\<\\([A-Za-z_0-9]*\\)\\\\>.*/\\1/p" "$vimsyn"
  } | grep . | sort -u
}
compare() {  # KIND GROUP
  local want have
  want=$(of_kind "$1")
  have=$(vim_words "$2")
  for w in $(comm -23 <(echo "$want") <(echo "$have")); do echo "Vim: $1 '$w' is missing from $2"; rc=1; done
  for w in $(comm -13 <(echo "$want") <(echo "$have")); do echo "Vim: $2 lists '$w', which is not a GSL $1"; rc=1; done
}
compare builtin gslBuiltin
compare host gslHostBuiltin
compare init gslInitializer
compare wordop gslWordOperator

# ---------------------------------------------------------------- Vim, operators
vim_rc=77
if command -v vim >/dev/null 2>&1 && vim --version | grep -q '+syntax'; then
  ops="$work/operators.gsl" res="$work/operators_vim.txt"
  of_kind operator | sed 's/^/y = x /; s/$/ x/' >"$ops"
  of_kind wordop | sed 's/^/y = x /; s/$/ x/' >>"$ops"
  rm -f "$res"
  cat >"$work/check_ops.vim" <<'VIM'
let s:out = []
for s:l in range(1, line('$'))
  let s:op = matchstr(getline(s:l), '^y = x \zs\S\+\ze x$')
  let s:want = s:op =~# '^\a' ? 'gslWordOperator' : 'gslOperator'
  for s:c in range(7, 6 + len(s:op))
    let s:g = synIDattr(synID(s:l, s:c, 1), 'name')
    if s:g !=# s:want
      call add(s:out, "Vim: operator '" . s:op . "' column " . (s:c - 6) . ' is ' . (s:g ==# '' ? 'plain' : s:g) . ', not ' . s:want)
    endif
  endfor
endfor
call writefile(s:out + ['Vim: ' . line('$') . ' operators checked, ' . len(s:out) . ' problems'], g:gsl_out)
VIM
  timeout 120 vim -Nu NONE -i NONE -n -es \
    -c "let &rtp = '$root/editors/vim,' . &rtp" -c 'filetype plugin indent on' -c 'syntax on' \
    -c "let g:gsl_out = '$res'" -c "edit $ops" -c "source $work/check_ops.vim" -c 'qa!' </dev/null >/dev/null 2>&1
  if [ -f "$res" ]; then
    cat "$res"
    vim_rc=0
    grep -q " 0 problems$" "$res" || vim_rc=1
  else
    echo "Vim: exited without a report"
    vim_rc=1
  fi
else
  echo "Vim: not installed (+syntax); the operator half of Vim skipped"
fi

# ---------------------------------------------------------------- TextMate
tm_rc=77
if command -v node >/dev/null 2>&1; then
  node "$here/lists_tm.js" "$tm" "$names"
  tm_rc=$?
else
  echo "TextMate: node not installed; TextMate half skipped"
fi

if [ "$rc" -ne 0 ] || [ "$vim_rc" -eq 1 ] || { [ "$tm_rc" -ne 0 ] && [ "$tm_rc" -ne 77 ]; }; then
  echo "FAIL: the editors' lists and GSL's tables have drifted apart (see above)"
  exit 1
fi
if [ "$vim_rc" -eq 77 ] || [ "$tm_rc" -eq 77 ]; then
  echo "SKIP: one half could not run (the rest passed)"
  exit 77
fi
echo "PASS: the editors list exactly GSL's builtins, host builtins, initialisers and operators"
