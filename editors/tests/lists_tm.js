#!/usr/bin/env node
// editors_lists, TextMate half: the word lists of syntaxes/gsl.tmLanguage.json
// against NAMES (the output of gsl_surface_names: `KIND NAME` lines).
//   builtin -> support.function.builtin.gsl, host -> support.function.builtin.host.gsl,
//   init -> support.constant.initializer.gsl, wordop -> keyword.operator.logical.gsl:
//   the words of the grammar's `\b(?:a|b|c)\b` (or `\bword\b`) rules with
//   that scope must be exactly the names of that kind, none missing, none extra.
//   operator: the grammar's `operators` rules, tried in order at the
//   operator's first character as TextMate does, must match the whole
//   operator with a keyword.operator.* scope (`//` is one token, not two).
// Needs only node (no node_modules). Usage: node lists_tm.js GRAMMAR NAMES.
// Exit 0 ok, 1 drift.
'use strict';
const fs = require('fs');

const [grammarPath, namesPath] = process.argv.slice(2);
const grammar = JSON.parse(fs.readFileSync(grammarPath, 'utf8'));
const names = fs.readFileSync(namesPath, 'utf8').split('\n').filter(Boolean).map((l) => l.split(' '));
const ofKind = (k) => new Set(names.filter(([kind]) => kind === k).map(([, n]) => n));

const rules = [];  // every {match, name} rule of the grammar
(function walk(x) {
  if (Array.isArray(x)) return x.forEach(walk);
  if (!x || typeof x !== 'object') return;
  if (typeof x.match === 'string' && typeof x.name === 'string') rules.push(x);
  Object.values(x).forEach(walk);
})(grammar);

function words(scope) {
  const s = new Set();
  for (const r of rules) {
    if (r.name !== scope) continue;
    const m = /^\\b(?:\(\?:([A-Za-z0-9_|]+)\)|([A-Za-z0-9_]+))\\b$/.exec(r.match);
    if (m) (m[1] || m[2]).split('|').forEach((w) => s.add(w));
  }
  return s;
}

const fails = [];
const scopes = {
  builtin: 'support.function.builtin.gsl',
  host: 'support.function.builtin.host.gsl',
  init: 'support.constant.initializer.gsl',
  wordop: 'keyword.operator.logical.gsl',
};
for (const [kind, scope] of Object.entries(scopes)) {
  const want = ofKind(kind), have = words(scope);
  if (!want.size) fails.push(`no names of kind '${kind}' given`);
  for (const w of want) if (!have.has(w)) fails.push(`${kind} '${w}' is missing from the ${scope} list`);
  for (const w of have) if (!want.has(w)) fails.push(`${scope} lists '${w}', which is not a GSL ${kind}`);
}

const ops = ((grammar.repository || {}).operators || {}).patterns || [];
if (!ops.length) fails.push('no repository.operators patterns in the grammar');
for (const op of ofKind('operator')) {
  let hit = null;
  for (const p of ops) {
    const re = new RegExp(p.match, 'y');
    const m = re.exec(op);
    if (m) { hit = { text: m[0], name: p.name }; break; }
  }
  if (!hit) fails.push(`operator '${op}' is not matched by the operators rules`);
  else if (hit.text !== op || !/^keyword\.operator\./.test(hit.name))
    fails.push(`operator '${op}' is tokenized as '${hit.text}' (${hit.name}), not as one operator`);
}

for (const f of fails) console.log('tmLanguage: ' + f);
console.log(`tmLanguage: ${names.length} names checked, ${fails.length} problems`);
process.exit(fails.length ? 1 : 0);
