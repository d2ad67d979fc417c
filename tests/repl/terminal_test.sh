#!/bin/bash
# `gsl repl` in a real terminal (tmux, 120 x 40): libedit line editing.
#   terminal_test.sh GSL [TMUX]
# Checks: Tab completes a command (:sha -> :sharding) and a builtin
# (soft -> softmax); Ctrl-C cancels the line being typed; multi-line input
# continues with the `...> ` prompt; Up recalls the previous line;
# ~/.gsl_history is written (HOME is a temporary folder); Ctrl-D leaves.
set -u
. "$(dirname "$0")/../tools/tmux_terminal.sh"
tmux_terminal repl "$@"
home=$tmp

# The last non-empty line of the screen.
last_line() { screen | sed '/^$/d' | tail -n 1; }

# The pane keeps running a shell after gsl exits, so the screen can be read.
start "cd '$src' && HOME='$home' '$gsl' repl examples/mlp.gsl -np 4; echo \"[gsl exited: \$?]\"; sleep 60"
wait_for "gsl>" || fail "no prompt"  # (capture-pane drops trailing spaces)

keys ':sha' Tab
wait_for "gsl> :sharding" || fail ":sha<Tab> did not complete to :sharding"
keys 'w1'
wait_for "gsl> :sharding w1" || fail ":sha<Tab> did not add a space after :sharding"
keys Enter
wait_for "w1: @shard(m, [_, model]) annotated at examples/mlp.gsl:11:21" || fail ":sharding w1 printed no provenance"

keys 'soft' Tab
wait_for "gsl> softmax" || fail "soft<Tab> did not complete to softmax"
keys '(w1' C-c
wait_for "gsl> softmax(w1^C" || fail "Ctrl-C did not cancel the line"
sleep 0.3
[ "$(last_line)" = "gsl>" ] || fail "no fresh prompt after Ctrl-C (last line: '$(last_line)')"

keys 'fn f(x: f32[4, 4]) -> f32[4, 4] {' Enter
wait_for "...>" || fail "an open brace did not continue the input"
keys 'return x @shard(m, [data, _])' Enter '}' Enter
sleep 0.3
keys ':sharding f.return' Enter
wait_for "f.return: @shard(m, [data, _]) annotated at <input 1>:2:10" || fail "the multi-line fn was not added"

# Up recalls the previous line (the cancelled one never reached history).
keys Up
wait_for "gsl> :sharding f.return" || fail "Up did not recall the previous line"
sleep 0.3
[ "$(last_line)" = "gsl> :sharding f.return" ] || fail "Up recalled '$(last_line)'"
keys C-u

# Ctrl-D on an empty line leaves; the history file holds the lines.
keys C-d
wait_for "[gsl exited: 0]" || fail "Ctrl-D did not end the session with status 0"
[ -s "$home/.gsl_history" ] || fail "~/.gsl_history was not written"
grep -qF ':sharding\040w1' "$home/.gsl_history" || { cat "$home/.gsl_history"; fail "~/.gsl_history lacks ':sharding w1'"; }
if grep -qF 'softmax(w1' "$home/.gsl_history"; then fail "the cancelled line is in the history"; fi
echo "ok: completion, Ctrl-C, multi-line input, history and Ctrl-D in a terminal"
