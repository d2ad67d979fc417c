#!/bin/sh
# run.sh WRITER READER.py: WRITER writes a known checkpoint and prints its
# dump; READER.py (python3, json+struct, and safetensors when installed)
# reads the file and must print the same dump. Exit 77 (skip) without python3.
set -eu
writer=$1
reader=$2
if ! command -v python3 >/dev/null 2>&1; then
  echo "python3 not found: skipping" >&2
  exit 77
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/gsl_ckpt_compat.XXXXXX")
trap 'rm -rf "$dir"' EXIT
"$writer" "$dir/known.safetensors" > "$dir/expected.txt"
python3 "$reader" "$dir/known.safetensors" > "$dir/actual.txt"
if ! cmp -s "$dir/expected.txt" "$dir/actual.txt"; then
  echo "dumps differ (expected = C++ writer, actual = python reader):" >&2
  diff "$dir/expected.txt" "$dir/actual.txt" >&2 || true
  exit 1
fi
echo "ok: $(wc -l < "$dir/expected.txt") lines match"
