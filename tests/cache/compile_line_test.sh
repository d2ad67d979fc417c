#!/bin/bash
# The compile line of `gsl run` on a real terminal (tmux, 120 x 40):
#   compile_line_test.sh GSL [TMUX]
# A cold cache shows `compiling NAME (rank program, N ops)... S s` and a
# warm one `... loaded from cache, S s`; with stderr not a terminal there
# is no compile line.
set -u
. "$(dirname "$0")/../tools/tmux_terminal.sh"
tmux_terminal run "$@"
cmd="'$gsl' run examples/mlp.gsl -np 4 --cache-dir '$tmp/c' >/dev/null"
start "cd '$src' && $cmd; echo '[cold done]'; $cmd; echo '[warm done]'; sleep 60"
wait_for '[warm done]' 30 || fail "the runs did not finish"
screen | grep -qE '^compiling [A-Za-z_0-9.]+ \(rank program, [0-9,]+ ops\)\.\.\. [0-9]+\.[0-9] s$' ||
  fail "no compile line with its seconds on the cold run"
screen | grep -qE '^compiling [A-Za-z_0-9.]+ \(rank program, [0-9,]+ ops\)\.\.\. loaded from cache, [0-9]+\.[0-9] s$' ||
  fail "no 'loaded from cache' line on the warm run"
cold=$(screen | sed -n '1,/\[cold done\]/p' | grep -c '^compiling .*\.\.\. [0-9]')
warm=$(screen | sed -n '/\[cold done\]/,/\[warm done\]/p' | grep -c 'loaded from cache')
[ "$cold" -gt 0 ] && [ "$warm" = "$cold" ] || fail "cold run compiled $cold, warm run loaded $warm"
# Not a terminal: no compile line.
(cd "$src" && "$gsl" run examples/mlp.gsl -np 4 --cache-dir "$tmp/c" 2>"$tmp/err" >/dev/null) || fail "piped run failed"
grep -q compiling "$tmp/err" && fail "a compile line with stderr not a terminal"
echo PASS
