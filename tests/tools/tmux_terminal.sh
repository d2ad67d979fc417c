# Sourced by the tests that drive gsl on a real terminal: tmux, 120 x 40,
# on a tmux server of the test's own (-L), ended on exit.
#   . tests/tools/tmux_terminal.sh
#   tmux_terminal SESSION GSL [TMUX]
# sets gsl (an absolute path), src (the source tree), tmp (a temporary
# folder, removed on exit), T (the tmux command of the server) and SESSION,
# and defines start, screen, keys, fail and wait_for.
tmux_terminal() {
  SESSION=$1
  gsl=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
  local tmux_bin=${3:-tmux}
  src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  tmp=$(mktemp -d)
  T=("$tmux_bin" -L "gsl-$SESSION-test-$$")
  trap tmux_terminal_cleanup EXIT
}
tmux_terminal_cleanup() {
  "${T[@]}" kill-server 2>/dev/null
  rm -rf "$tmp"
}
# start CMD: runs the shell command CMD in the session's one pane.
start() { "${T[@]}" new-session -d -s "$SESSION" -x 120 -y 40 "$1" || fail "cannot start tmux"; }
screen() { "${T[@]}" capture-pane -p -t "$SESSION" 2>/dev/null; }
keys() { "${T[@]}" send-keys -t "$SESSION" "$@"; }
fail() {
  echo "FAIL: $1"
  echo "--- the terminal:"
  screen
  exit 1
}
# wait_for TEXT [SECONDS]: waits (10 s unless told) until the screen shows
# the fixed string TEXT.
wait_for() {
  for _ in $(seq 1 $((${2:-10} * 10))); do
    screen | grep -qF -- "$1" && return 0
    sleep 0.1
  done
  return 1
}
