#!/usr/bin/env node
// Sanity checks of the extension manifest: package.json contributes the gsl
// language (.gsl) and its grammar (scopeName source.gsl, file present), and
// language-configuration.json is valid JSON whose regular expressions compile.
'use strict';
const fs = require('fs');
const path = require('path');
const dir = __dirname;
const fails = [];
const read = (f) => JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8'));
const pkg = read('package.json');
const lang = (pkg.contributes.languages || []).find((l) => l.id === 'gsl');
if (!lang) fails.push('contributes.languages has no id "gsl"');
else {
  if (!(lang.extensions || []).includes('.gsl')) fails.push('language gsl does not claim .gsl');
  if (!lang.configuration || !fs.existsSync(path.join(dir, lang.configuration)))
    fails.push('language gsl: configuration file missing');
}
const gr = (pkg.contributes.grammars || []).find((g) => g.language === 'gsl');
if (!gr) fails.push('contributes.grammars has no grammar for gsl');
else {
  if (gr.scopeName !== 'source.gsl') fails.push(`grammar scopeName ${gr.scopeName}, expected source.gsl`);
  const g = read(gr.path);
  if (g.scopeName !== gr.scopeName) fails.push(`${gr.path}: scopeName ${g.scopeName} != ${gr.scopeName}`);
}
if (Object.keys(pkg.dependencies || {}).length) fails.push('package.json must have devDependencies only');
const conf = read('language-configuration.json');
if (!conf.comments || conf.comments.lineComment !== '#') fails.push('lineComment is not #');
if (!(conf.autoClosingPairs || []).some((p) => p.open === '"')) fails.push('no auto-closing quote');
for (const re of [conf.wordPattern, conf.indentationRules.increaseIndentPattern,
                  conf.indentationRules.decreaseIndentPattern,
                  ...(conf.onEnterRules || []).flatMap((r) => [r.beforeText, r.afterText])]) {
  if (re === undefined) continue;
  try { new RegExp(re); } catch (e) { fails.push(`bad regex ${re}: ${e.message}`); }
}
const inc = new RegExp(conf.indentationRules.increaseIndentPattern);
const dec = new RegExp(conf.indentationRules.decreaseIndentPattern);
if (!inc.test('fn main() {') || inc.test('# {') || !dec.test('  }')) fails.push('indentation rules do not handle { }');
for (const f of fails) console.log('manifest: ' + f);
console.log(`manifest: package.json and language-configuration.json, ${fails.length} problem(s)`);
process.exit(fails.length ? 1 : 0);
