#!/bin/sh
# Sharding equivalence check: a program must print the same numbers under
# every -np, every mesh and every sharding.
#
# Usage: run_equivalence.sh GSL FILE [--mpi] [--max-np N] [--np N]
#
# Runs `GSL run FILE ARGS` once for every `# run: ARGS` header line of FILE,
# each in a fresh temporary directory (so files a program saves and loads
# are its own), and compares every printed line with the first
# configuration's output, token by token: tokens are split at white space
# and at `[ ] ( ) ,`; numbers must agree within a relative 1e-5 (absolute
# 1e-6 near zero), other tokens exactly. Any failing run (exit code not 0)
# or any difference fails the test, with the configurations, the line and
# the tokens that differ.
#   --mpi       runs the ranks as OpenMPI processes (`gsl run --mpi`)
#   --max-np N  skips configurations with more than N ranks
#   --np N      runs the first configuration (the reference) and those of
#               exactly N ranks only
set -u

if [ $# -lt 2 ]; then
  echo "usage: $0 GSL FILE [--mpi] [--max-np N] [--np N]" >&2
  exit 2
fi
GSL=$1
FILE=$2
shift 2
MPI=""
MAXNP=""
ONLYNP=""
while [ $# -gt 0 ]; do
  case $1 in
    --mpi) MPI="--mpi" ;;
    --max-np) shift; MAXNP=$1 ;;
    --np) shift; ONLYNP=$1 ;;
    *) echo "$0: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

case $FILE in
  /*) ;;
  *) FILE=$(pwd)/$FILE ;;
esac
case $GSL in
  */*) case $GSL in /*) ;; *) GSL=$(pwd)/$GSL ;; esac ;;
esac
if [ ! -r "$FILE" ]; then
  echo "$0: cannot read $FILE" >&2
  exit 2
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/gsl-equiv.XXXXXX") || exit 2
trap 'rm -rf "$WORK"' EXIT INT TERM

# The configurations: text after "# run:" on header lines.
sed -n 's/^#[[:space:]]*run:[[:space:]]*//p' "$FILE" > "$WORK/configs"
if [ ! -s "$WORK/configs" ]; then
  echo "FAIL: $FILE has no '# run:' lines" >&2
  exit 1
fi
# Both engines: the runs use the default (the JIT); the first configuration
# runs once more on the reference interpreter (not under --mpi, and not
# when the configurations choose the engine themselves).
if [ -z "$MPI" ] && ! head -n1 "$WORK/configs" | grep -q -- '--engine'; then
  printf '%s --engine interp\n' "$(head -n1 "$WORK/configs")" >> "$WORK/configs"
fi

fail=0
n=0
first=""
firstArgs=""
while IFS= read -r args; do
  np=$(printf '%s\n' "$args" | sed -n 's/.*-np[[:space:]=]*\([0-9][0-9]*\).*/\1/p')
  [ -n "$np" ] || np=1
  if [ -n "$MAXNP" ] && [ "$np" -gt "$MAXNP" ]; then
    continue
  fi
  if [ -n "$ONLYNP" ] && [ -n "$first" ] && [ "$np" -ne "$ONLYNP" ]; then
    continue
  fi
  n=$((n + 1))
  label="$args${MPI:+ $MPI}"
  dir="$WORK/c$n"
  mkdir "$dir"
  # shellcheck disable=SC2086  # args are split on purpose
  (cd "$dir" && exec "$GSL" run "$FILE" $args $MPI) > "$dir/out" 2> "$dir/err" < /dev/null
  rc=$?
  if [ $rc -ne 0 ]; then
    echo "FAIL: gsl run $label exited with $rc"
    sed 's/^/  | /' "$dir/err" | head -40
    sed 's/^/  > /' "$dir/out" | tail -10
    fail=1
    continue
  fi
  if [ ! -s "$dir/out" ]; then
    echo "FAIL: gsl run $label printed nothing"
    fail=1
    continue
  fi
  if [ -z "$first" ]; then
    first="$dir/out"
    firstArgs=$label
    echo "ok   [$label] reference, $(wc -l < "$dir/out") lines"
    continue
  fi
  if awk -v ref="$first" -v refArgs="$firstArgs" -v args="$label" '
    function isnum(t) { return t ~ /^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$/ }
    function abs(x) { return x < 0 ? -x : x }
    function tokens(line, arr,   s) {
      s = line
      gsub(/[][(),]/, " & ", s)
      return split(s, arr, /[ \t]+/)
    }
    function close_enough(a, b,   d, m) {
      a += 0; b += 0
      d = abs(a - b)
      m = abs(a) > abs(b) ? abs(a) : abs(b)
      return d <= 1e-6 || d <= 1e-5 * m
    }
    function report(msg) {
      if (bad < 10) {
        printf "FAIL: [%s] differs from [%s] at line %d: %s\n", args, refArgs, FNR, msg
        printf "  [%s]: %s\n  [%s]: %s\n", refArgs, want, args, $0
      }
      bad++
    }
    {
      if ((getline want < ref) <= 0) { want = "<none>"; report("extra line"); next }
      na = tokens(want, ta); nb = tokens($0, tb)
      if (na != nb) { report("different number of tokens"); next }
      for (i = 1; i <= na; i++) {
        if (ta[i] == tb[i]) continue
        if (isnum(ta[i]) && isnum(tb[i]) && close_enough(ta[i], tb[i])) continue
        report("token " i ": " ta[i] " vs " tb[i])
        break
      }
    }
    END {
      while ((getline want < ref) > 0) { FNR++; $0 = "<none>"; report("missing line") }
      exit bad ? 1 : 0
    }
  ' "$dir/out"; then
    echo "ok   [$label]"
  else
    fail=1
  fi
done < "$WORK/configs"

if [ $n -eq 0 ]; then
  echo "FAIL: no configuration of $FILE runs with at most $MAXNP ranks"
  exit 1
fi
if [ $fail -ne 0 ]; then
  echo "FAIL: $FILE"
  if [ -n "$first" ]; then
    echo "reference output [$firstArgs]:"
    sed 's/^/  > /' "$first" | head -60
  fi
  exit 1
fi
echo "PASS: $FILE ($n configurations)"
exit 0
