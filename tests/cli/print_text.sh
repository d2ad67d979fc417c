#!/bin/sh
# print_text (docs/language.md, "The host script"): i32 tensors written as
# the bytes their elements are, in C order, split over 2 ranks too; a
# newline and a tab as they are, other control bytes and 127 as \xNN;
# strings and separators as print's.
#   print_text.sh GSL
set -eu
gsl=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/p.gsl" <<'GSL'
mesh m = [data: NP]

fn rows(x: i32[2, 3] @shard(m, [data, _])) -> i32[2, 3] {
  return x + 1
}

fn main() {
  let a = arange([4], axis=0) + 65
  print_text("text:", a, "|", a + 32)
  print_text(where(a == 66, 10, a))
  print_text(where(a == 66, 7, where(a == 67, 127, a)), "tab", where(a == 65, 9, a))
  print_text(rows(reshape(arange([6], axis=0), [2, 3]) + 96))
}
GSL
"$gsl" run "$dir/p.gsl" -np 2 --no-progress > "$dir/out.txt"
printf 'text: ABCD | abcd\nA\nCD\nA\\x07\\x7fD tab \tBCD\nabcdef\n' > "$dir/want.txt"
if cmp -s "$dir/want.txt" "$dir/out.txt"; then
  echo PASS
else
  echo "FAIL: print_text wrote"; od -c "$dir/out.txt"; echo "instead of"; od -c "$dir/want.txt"
  exit 1
fi
