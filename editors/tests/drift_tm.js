#!/usr/bin/env node
// Drift check, TextMate half: every word listed in MANIFEST must be coloured
// by syntaxes/gsl.tmLanguage.json at its position in FILE.
// MANIFEST lines: WORD <TAB> LINE(1-based) <TAB> COL(0-based) <TAB> MODE
// MODE bare: the word alone; call: the word called as WORD(x); context: the
// word inside the construct it belongs to (e.g. `_` in @shard dims).
// "Coloured" means: the word is exactly one token, and its innermost scope is
// not a plain one (source.gsl, variable.other.gsl, a meta.* scope, or the
// entity.name.function.call.gsl of an unknown function).
// Usage: node drift_tm.js FILE MANIFEST. Exit 0 ok, 1 drift, 77 no node_modules.
'use strict';
const fs = require('fs');
const { tokenizeFiles } = require('./tm_tokenize.js');

const PLAIN = /^(source\.gsl|variable\.other\.gsl|entity\.name\.function\.call\.gsl|meta\..*)$/;

async function main() {
  const [file, manifest] = process.argv.slice(2);
  const toks = await tokenizeFiles([file]);
  const rows = fs.readFileSync(manifest, 'utf8').split('\n').filter(Boolean).map((l) => l.split('\t'));
  const fails = [];
  for (const [word, line, col, mode] of rows) {
    const l = Number(line), c = Number(col);
    const inside = toks.filter((t) => t.line === l && t.end > c && t.col < c + word.length);
    const scopes = inside.map((t) => t.scopes[t.scopes.length - 1]);
    const desc = `'${word}' (${mode}, line ${l})`;
    if (inside.length !== 1 || inside[0].col !== c || inside[0].end !== c + word.length) {
      fails.push(`${desc}: not one token: ${JSON.stringify(inside.map((t) => [t.text, t.scopes.slice(-1)[0]]))}`);
    } else if (PLAIN.test(scopes[0])) {
      fails.push(`${desc}: not highlighted (scope ${scopes[0]})`);
    }
  }
  for (const f of fails) console.log('tmLanguage: ' + f);
  console.log(`tmLanguage: ${rows.length} words checked, ${fails.length} not highlighted`);
  process.exit(fails.length ? 1 : 0);
}
main().catch((e) => { console.error(e); process.exit(1); });
