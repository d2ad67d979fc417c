#!/usr/bin/env bash
# "Tested with the real tokenizer": generates the Java lexer/parser from
# grammar/GSL.g4 with the ANTLR tool (the same grammar the C++ front end is
# generated from), and
#   1. parses every editors/samples/*.gsl: the samples must be valid GSL, and
#      together use every token kind of the lexer and every labelled
#      alternative (# importDecl, # tupleResult, # shardAxes, ...) of the parser;
#   2. compares each lexer token with the highlighting of both editors
#      (editors/tests/real_lexer_check.js): keywords, operators, numbers,
#      strings, annotation parts, names by role, and comments between tokens.
# Usage: real_lexer_test.sh [WORK_DIR]. Exit 0 ok, 1 fail, 77 skip (no
# java/javac/antlr4 runtime, or neither editor checkable).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=${1:-$(mktemp -d)}
mkdir -p "$work"
g4="$root/grammar/GSL.g4"

runtime_jar=""
for j in "${ANTLR4_RUNTIME_JAR:-}" /usr/share/java/antlr4-runtime.jar /usr/share/java/antlr4-runtime-4*.jar; do
  [ -f "$j" ] && runtime_jar=$j && break
done
if ! command -v java >/dev/null || ! command -v javac >/dev/null || ! command -v antlr4 >/dev/null \
   || [ -z "$runtime_jar" ]; then
  echo "SKIP: needs java, javac, the antlr4 tool and the ANTLR4 Java runtime (Debian: antlr4, default-jdk)"
  exit 77
fi

# ---------------------------------------------------------------- build (cached)
key=$(cat "$g4" "$here/TokenDump.java" | md5sum | cut -c1-16)
jdir="$work/java-$key"
if [ ! -f "$jdir/classes/TokenDump.class" ]; then
  rm -rf "$work"/java-*
  mkdir -p "$jdir/gen" "$jdir/classes"
  echo "building the Java lexer/parser from grammar/GSL.g4"
  antlr4 -o "$jdir/gen" -Xexact-output-dir -no-listener -no-visitor "$g4" || exit 1
  cp "$here/TokenDump.java" "$jdir/gen/" || exit 1
  javac -nowarn -encoding UTF-8 -cp "$runtime_jar" -d "$jdir/classes" "$jdir"/gen/*.java || exit 1
fi

# ---------------------------------------------------------------- 1. parse
samples=("$root"/editors/samples/*.gsl)
tokens="$work/tokens.tsv"
alts="$work/alts.txt"
if ! java -cp "$jdir/classes:$runtime_jar" TokenDump --alts "$alts" "${samples[@]}" >"$tokens"; then
  echo "FAIL: the samples are not valid GSL (errors above)"
  exit 1
fi
echo "parsed ${#samples[@]} samples with the real grammar: $(wc -l <"$tokens") tokens"
# Coverage: every token kind of the lexer (GSL.tokens: 'literal'=N and NAME=N;
# the skipped COMMENT/WS and the ERRCHAR catch-all excepted) ...
missing=0
want_kinds=$(grep -v '^T__\|^COMMENT=\|^WS=\|^ERRCHAR=' "$jdir/gen/GSL.tokens" | sed 's/=[0-9]*$//' | sort -u)
have_kinds=$(cut -f4 "$tokens" | sort -u)
for k in $want_kinds; do
  grep -qxF -- "$k" <<<"$have_kinds" || { echo "samples never use the token $k"; missing=1; }
done
# ... and every labelled alternative of the parser rules.
want_alts=$(sed -n 's:^.*#[[:space:]]*\([a-zA-Z_][a-zA-Z_0-9]*\)[[:space:]]*$:\1:p' "$g4" | sort -u)
for a in $want_alts; do
  grep -qxF -- "$a" "$alts" || { echo "samples never use the grammar alternative # $a"; missing=1; }
done
if [ "$missing" -ne 0 ]; then
  echo "FAIL: editors/samples/*.gsl must cover all of GSL's syntax (add the forms above)"
  exit 1
fi
echo "coverage: the samples use all $(wc -w <<<"$want_kinds") token kinds and all $(wc -w <<<"$want_alts") labelled alternatives"

# ---------------------------------------------------------------- 2. compare
vimgroups=-
if command -v vim >/dev/null 2>&1 && vim --version | grep -q '+syntax'; then
  vimgroups="$work/vim_groups.tsv"
  rm -f "$vimgroups"
  files=$(printf "'%s'," "${samples[@]}")
  timeout 120 vim -Nu NONE -i NONE -n -es \
    -c "let &rtp = '$root/editors/vim,' . &rtp" -c 'filetype plugin indent on' -c 'syntax on' \
    -c "execute 'source' fnameescape('$root/editors/vim/tests/check_syntax.vim')" \
    -c "call GslDumpGroups([${files%,}], '$vimgroups')" </dev/null >/dev/null 2>&1
  [ -f "$vimgroups" ] || { echo "FAIL: vim did not dump its syntax groups"; exit 1; }
else
  echo "Vim: not installed (+syntax); Vim half skipped"
fi
if ! command -v node >/dev/null 2>&1; then
  echo "SKIP: node is not installed"
  exit 77
fi
node "$here/real_lexer_check.js" "$tokens" "$vimgroups" "${samples[@]}"
