#!/bin/sh
# text_rss.sh GSL ROOT: the text_bytes reader streams. The same program
# (tests/data/text_lm.gsl, 20 steps, evaluate over at most 2 batches) on a
# corpus of 1 MB and on one of 100 MB made by repeating it: the peak RSS
# (/usr/bin/time -v, "Maximum resident set size") grows by less than 20 MB,
# the run reading each file whole once to check it is text. Both runs on
# the interpreter (no JIT compile, whose memory would blur the figure) at
# -np 2 (two readers).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
GSL=$1 ROOT=$2
. "$HERE/common.sh"
[ -x /usr/bin/time ] || { echo "SKIP: no /usr/bin/time (Debian package time)"; exit 77; }

# 1 MiB of English: the README over and over.
: > one.txt
while [ "$(wc -c < one.txt)" -lt 1048576 ]; do cat "$ROOT/README.md" >> one.txt; done
head -c 1048576 one.txt > corpus1.txt
i=0
while [ $i -lt 100 ]; do cat corpus1.txt; i=$((i + 1)); done > corpus100.txt
[ "$(wc -c < corpus100.txt)" = 104857600 ] || fail "corpus100.txt is not 100 MiB"
# The program, reading corpus.txt: as text_lm.gsl, 20 steps, every
# evaluation on 2 batches.
sed -e 's/^const STEPS = .*/const STEPS = 20/' -e 's/^const EVERY = .*/const EVERY = 10/' \
    -e 's/evaluate(\([a-z]*\), text)/evaluate(\1, text, batches=2)/' "$HERE/text_lm.gsl" > lm.gsl
peak() {  # peak FILE: the run's peak RSS in KB
  ln -sf "$1" corpus.txt
  /usr/bin/time -v "$GSL" run lm.gsl -np 2 --engine interp --no-progress --log "log.$1" > out.txt 2> time.txt ||
    { cat time.txt; fail "run on $1"; }
  grep -q '"val_loss"' "log.$1" || fail "no val_loss logged on $1"
  sed -n 's/^[[:space:]]*Maximum resident set size (kbytes): //p' time.txt
}
small=$(peak corpus1.txt)
big=$(peak corpus100.txt)
[ -n "$small" ] && [ -n "$big" ] || fail "no peak RSS measured"
echo "peak RSS: 1 MiB corpus $small KB, 100 MiB corpus $big KB"
[ $((big - small)) -lt 20480 ] || fail "the peak RSS grew by $((big - small)) KB with the corpus (limit 20480)"
echo "PASS"
