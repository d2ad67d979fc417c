#!/usr/bin/env node
// Tokenizes GSL files with the VS Code TextMate engine (vscode-textmate +
// vscode-oniguruma, both installed as dependencies of vscode-tmgrammar-test in
// editors/vscode/node_modules) and prints one JSON object per token:
//   {"file": F, "line": L (1-based), "col": C (0-based), "end": E, "text": T, "scopes": [...]}
// Usage: node tm_tokenize.js FILE...        (exit 77 when node_modules is missing)
// or require('./tm_tokenize.js').tokenizeFiles(files) from another script.
'use strict';
const fs = require('fs');
const path = require('path');

const vscodeDir = path.resolve(__dirname, '..', 'vscode');
function need(name) {
  try {
    return require(require.resolve(name, { paths: [vscodeDir] }));
  } catch (e) {
    console.error(`tm_tokenize: cannot load '${name}' from ${vscodeDir}/node_modules ` +
                  `(run 'npm ci' in editors/vscode): ${e.message}`);
    process.exit(77);
  }
}
const vsctm = need('vscode-textmate');
const oniguruma = need('vscode-oniguruma');

// Returns the tokens of the given files: [{file, line, col, end, text, scopes}].
async function tokenizeFiles(files) {
  const wasmPath = require.resolve('vscode-oniguruma/release/onig.wasm', { paths: [vscodeDir] });
  await oniguruma.loadWASM(fs.readFileSync(wasmPath).buffer);
  const grammarPath = path.join(vscodeDir, 'syntaxes', 'gsl.tmLanguage.json');
  const registry = new vsctm.Registry({
    onigLib: Promise.resolve({
      createOnigScanner: (p) => new oniguruma.OnigScanner(p),
      createOnigString: (s) => new oniguruma.OnigString(s),
    }),
    loadGrammar: async (scopeName) => {
      if (scopeName !== 'source.gsl') return null;
      return vsctm.parseRawGrammar(fs.readFileSync(grammarPath, 'utf8'), grammarPath);
    },
  });
  const grammar = await registry.loadGrammar('source.gsl');
  const out = [];
  for (const file of files) {
    const lines = fs.readFileSync(file, 'utf8').split(/\r?\n/);
    let stack = vsctm.INITIAL;
    lines.forEach((text, i) => {
      const r = grammar.tokenizeLine(text, stack);
      for (const t of r.tokens) {
        const end = Math.min(t.endIndex, text.length);
        if (end <= t.startIndex) continue;
        out.push({ file, line: i + 1, col: t.startIndex, end,
                   text: text.slice(t.startIndex, end), scopes: t.scopes });
      }
      stack = r.ruleStack;
    });
  }
  return out;
}

module.exports = { tokenizeFiles };

if (require.main === module) {
  tokenizeFiles(process.argv.slice(2)).then((toks) => {
    for (const t of toks) process.stdout.write(JSON.stringify(t) + '\n');
  }).catch((e) => { console.error(e); process.exit(1); });
}
