#!/bin/sh
# The bounded fuzz run of `make test` (ctest: fuzz_frontend; docs/fuzzing.md).
#
#   run_fuzz.sh FUZZ_BUILD_DIR SOURCE_DIR LENGTH [libFuzzer options...]
#
# LENGTH is SECONDS (a number: fuzz that long, `make fuzz`) or runs=N (a
# fixed number of executions, the seeds' included: what ctest's
# fuzz_frontend does, with a fixed -seed; docs/fuzzing.md says how close
# two such runs are).
#
# 1. Builds gsl_fuzz_frontend in FUZZ_BUILD_DIR (configuring it with
#    clang-19 first when needed; a no-op when it is up to date).
# 2. Replays every input under tests/fuzz/regressions/ (each once).
# 3. Fuzzes for LENGTH, seeded with every .gsl file under
#    examples/, stdlib/, tests/ and editors/samples/ (collected now into a
#    fresh temporary corpus, never copied into the tree; files over 8 KiB
#    are left out), with tests/fuzz/gsl.dict.
# Any finding (crash, internal error, sanitizer report, timeout, out of
# memory) fails the run; libFuzzer leaves the input as
# FUZZ_BUILD_DIR/findings/crash-* (or timeout-*, oom-*): reproduce it with
#   FUZZ_BUILD_DIR/tests/fuzz/gsl_fuzz_frontend FILE
# and, once fixed, add it as a regression (tests/fuzz/regressions/ or tests/diag/).
set -eu
build=$1 src=$2 length=$3
shift 3
case $length in
  runs=*) limit="-runs=${length#runs=}" what="${length#runs=} executions" ;;
  *)      limit="-max_total_time=$length" what="$length s" ;;
esac
fuzzer=$build/tests/fuzz/gsl_fuzz_frontend

if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$src" -B "$build" -DGSL_FUZZ=ON -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 >"$build.configure.log" 2>&1 ||
    { cat "$build.configure.log"; exit 1; }
fi
cmake --build "$build" --target gsl_fuzz_frontend -j "${JOBS:-$(nproc)}" >"$build/build.log" 2>&1 ||
  { tail -50 "$build/build.log"; exit 1; }

# ASan/UBSan: stop at the first report; symbolised stacks when llvm-symbolizer is there.
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
for s in llvm-symbolizer-19 /usr/lib/llvm-19/bin/llvm-symbolizer; do
  if command -v "$s" >/dev/null 2>&1; then export ASAN_SYMBOLIZER_PATH="$(command -v "$s")"; break; fi
done

limits="-timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024"
maxlen=8192  # the largest input tried; larger seeds (generated ones) are left out

# 2. Regressions: every input that ever crashed.
regs=$(find "$src/tests/fuzz/regressions" -type f ! -name README.md | sort)
if [ -n "$regs" ]; then
  n=$(echo "$regs" | wc -l)
  # shellcheck disable=SC2086
  "$fuzzer" $limits $regs >"$build/regressions.log" 2>&1 ||
    { cat "$build/regressions.log"; echo "FAIL: a regression input of tests/fuzz/regressions crashes again"; exit 1; }
  echo "replayed $n regression inputs: ok"
fi

# 3. A fresh corpus: the seeds, then what the run finds.
work=$(mktemp -d "${TMPDIR:-/tmp}/gsl-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
corpus=${GSL_FUZZ_CORPUS:-$work/corpus}  # GSL_FUZZ_CORPUS=DIR keeps the corpus between runs
mkdir -p "$corpus" "$work/seeds" "$build/findings"
i=0 big=0
for f in $(find "$src/examples" "$src/stdlib" "$src/tests" "$src/editors/samples" -name '*.gsl' -type f | sort); do
  if [ "$(wc -c <"$f")" -gt "$maxlen" ]; then big=$((big + 1)); continue; fi
  i=$((i + 1))
  cp "$f" "$work/seeds/$i-$(basename "$f")"
done
echo "seeds: $i .gsl files (and $big over $maxlen bytes left out)"

status=0
# shellcheck disable=SC2086
"$fuzzer" $limits -max_len=$maxlen $limit -print_final_stats=1 -dict="$src/tests/fuzz/gsl.dict" \
  -artifact_prefix="$build/findings/" "$@" "$corpus" "$work/seeds" >"$build/fuzz.log" 2>&1 || status=$?
# Coverage after the seeds (INITED) and at the end (DONE), and the totals.
grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)' "$build/fuzz.log" || true
grep -E '^stat::' "$build/fuzz.log" || true
echo "corpus: $(ls "$corpus" | wc -l) inputs in $corpus"
if [ "$status" -ne 0 ]; then
  grep -v '^#[0-9]' "$build/fuzz.log" | tail -80
  echo "FAIL: the fuzzer found a problem (exit $status); input saved in $build/findings/"
  exit 1
fi
echo "PASS: $what of fuzzing${*:+ ($*)}, no findings"
