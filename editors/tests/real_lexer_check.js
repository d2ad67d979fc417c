#!/usr/bin/env node
// Compares both editors' highlighting of GSL files with the tokens of the real
// lexer (the ANTLR lexer generated from grammar/GSL.g4, dumped by TokenDump.java).
//   node real_lexer_check.js TOKENS.tsv VIM_GROUPS.tsv|- FILE...
// TOKENS.tsv: FILE LINE COL KIND TEXT (TokenDump). VIM_GROUPS.tsv: FILE LINE
// g,g,... (GslDumpGroups in editors/vim/tests/check_syntax.vim), or '-' to skip
// Vim. The TextMate half is skipped (and reported) when node_modules is missing.
// For every token the expected highlighting class follows from its kind and
// the tokens around it (e.g. the ID after 'fn' is a function name, IDs inside
// @shard dims are mesh axes); every character outside tokens that is not
// blank must be a comment, and no character of a token may be a comment.
// Exit 0 ok, 1 mismatch, 77 if neither editor could be checked.
'use strict';
const fs = require('fs');
const path = require('path');

// ------------------------------------------------------------ expectations
// Each class: tm = RegExp for the innermost TextMate scope; vim = allowed groups.
const C = (tm, vim) => ({ tm, vim: new Set(vim) });
const OP = ['gslOperator'];
const KIND = {
  "'import'": C(/^keyword\.control\.import\.gsl$/, ['gslInclude']),
  "'with'": C(/^keyword\.control\.import\.gsl$/, ['gslInclude']),
  "'if'": C(/^keyword\.control\.conditional\.gsl$/, ['gslConditional']),
  "'else'": C(/^keyword\.control\.conditional\.gsl$/, ['gslConditional']),
  "'for'": C(/^keyword\.control\.loop\.gsl$/, ['gslRepeat']),
  "'in'": C(/^keyword\.control\.loop\.gsl$/, ['gslRepeat']),
  "'return'": C(/^keyword\.control\.flow\.return\.gsl$/, ['gslReturn']),
  "'and'": C(/^keyword\.operator\.logical\.gsl$/, ['gslWordOperator']),
  "'or'": C(/^keyword\.operator\.logical\.gsl$/, ['gslWordOperator']),
  "'not'": C(/^keyword\.operator\.logical\.gsl$/, ['gslWordOperator']),
  "'fn'": C(/^storage\.type\.function\.gsl$/, ['gslStorage']),
  "'param'": C(/^storage\.type\.param\.gsl$/, ['gslStorage']),
  "'mesh'": C(/^storage\.type\.mesh\.gsl$/, ['gslStorage']),
  "'const'": C(/^storage\.type\.const\.gsl$/, ['gslStorage']),
  "'let'": C(/^storage\.type\.let\.gsl$/, ['gslStorage']),
  "'optimizer'": C(/^storage\.type\.optimizer\.gsl$/, ['gslStorage']),
  "'dataset'": C(/^storage\.type\.dataset\.gsl$/, ['gslStorage']),
  "'true'": C(/^constant\.language\.boolean\.gsl$/, ['gslBoolean']),
  "'false'": C(/^constant\.language\.boolean\.gsl$/, ['gslBoolean']),
  "'load'": C(/^support\.function\.builtin\.host\.gsl$/, ['gslHostBuiltin']),
  "'@shard'": C(/^storage\.modifier\.annotation\.shard\.gsl$/, ['gslAnnotation']),
  "'@replicate'": C(/^storage\.modifier\.annotation\.replicate\.gsl$/, ['gslAnnotation']),
  "'@pipeline'": C(/^storage\.modifier\.annotation\.pipeline\.gsl$/, ['gslAnnotation']),
  "'_'": C(/^constant\.language\.replicated\.gsl$/, ['gslReplicated']),
  DTYPE: C(/^support\.type\.primitive\.gsl$/, ['gslType']),
  INT: C(/^constant\.numeric\.integer\.gsl$/, ['gslNumber']),
  FLOAT: C(/^constant\.numeric\.float\.gsl$/, ['gslFloat']),
  "'**'": C(/^keyword\.operator\.power\.gsl$/, OP),
  "'->'": C(/^keyword\.operator\.arrow\.gsl$/, OP),
  "'..'": C(/^keyword\.operator\.range\.gsl$/, OP),
  "'='": C(/^keyword\.operator\.assignment\.gsl$/, ['gslOperator', 'gslMeshEq']),
  "'@'": C(/^keyword\.operator\.matmul\.gsl$/, OP),
  "','": C(/^punctuation\.separator\.comma\.gsl$/, ['gslDelimiter']),
  "':'": C(/^punctuation\.separator\.(colon|key-value)\.gsl$/, ['gslDelimiter']),
  "'.'": C(/^punctuation\.accessor\.gsl$/, ['gslAccessor']),
};
for (const op of ['==', '!=', '<', '<=', '>', '>='])
  KIND[`'${op}'`] = C(/^keyword\.operator\.comparison\.gsl$/, OP);
for (const op of ['+', '-', '*', '/', '//', '%'])
  KIND[`'${op}'`] = C(/^keyword\.operator\.arithmetic\.gsl$/, OP);
for (const b of ['(', ')', '[', ']', '{', '}'])
  KIND[`'${b}'`] = C(/^punctuation\.section\./, ['', 'gslDelimiter']);

const ID_CLASS = {
  fnName: C(/^entity\.name\.function\.gsl$/, ['gslFuncDef']),
  call: C(/^(entity\.name\.function\.call|support\.function\.(builtin(\.host)?|constructor)|support\.constant\.initializer)\.gsl$/,
          ['gslFuncCall', 'gslBuiltin', 'gslHostBuiltin', 'gslInitializer', 'gslConstructor']),
  object: C(/^variable\.other\.object\.gsl$/, ['']),
  method: C(/^entity\.name\.function\.member\.gsl$/, ['gslMethodCall']),
  np: C(/^constant\.language\.np\.gsl$/, ['gslPredefined']),
  meshName: C(/^entity\.name\.type\.mesh\.gsl$/, ['gslMeshName']),
  annotMesh: C(/^entity\.name\.type\.mesh\.gsl$/, ['gslAnnotMesh']),
  meshAxisDecl: C(/^variable\.other\.constant\.mesh-axis\.gsl$/, ['gslMeshAxisDecl']),
  annotAxis: C(/^variable\.other\.constant\.mesh-axis\.gsl$/, ['gslMeshAxis']),
  constName: C(/^variable\.other\.constant\.gsl$/, ['gslConstName']),
  paramName: C(/^variable\.other\.definition\.param\.gsl$/, ['gslParamName']),
  optimizerName: C(/^variable\.other\.definition\.optimizer\.gsl$/, ['gslOptimizerName']),
  datasetName: C(/^variable\.other\.definition\.dataset\.gsl$/, ['gslDatasetName']),
  letName: C(/^variable\.other\.definition\.gsl$/, ['gslLetName']),
  fnParam: C(/^variable\.parameter\.function\.gsl$/, ['']),
  kwArg: C(/^variable\.parameter\.keyword-argument\.gsl$/, ['']),
  other: C(/^(variable\.other\.gsl|support\.function\.(builtin(\.host)?|constructor)\.gsl|support\.constant\.initializer\.gsl)$/,
           ['', 'gslBuiltin', 'gslHostBuiltin', 'gslInitializer', 'gslConstructor']),
};

// Classifies the ID tokens of one file from the token sequence.
function classifyIds(toks) {
  const stack = [];            // open brackets: {ch, role}
  for (let i = 0; i < toks.length; i++) {
    const t = toks[i], prev = toks[i - 1] || {}, prev2 = toks[i - 2] || {}, next = toks[i + 1] || {};
    const top = stack[stack.length - 1] || {};
    if (t.kind === "'('" || t.kind === "'['" || t.kind === "'{'") {
      let role = 'group';
      if (t.kind === "'('" && (prev.kind === "'@shard'" || prev.kind === "'@replicate'")) role = 'annot';
      else if (t.kind === "'['" && top.role === 'annot') role = 'dims';
      else if (t.kind === "'('" && top.role === 'dims') role = 'dims';
      else if (t.kind === "'['" && prev.kind === "'='" && prev2.kind === 'ID' && (toks[i - 3] || {}).kind === "'mesh'") role = 'mesh';
      else if (t.kind === "'('" && prev.kind === 'ID' && prev2.kind === "'fn'") role = 'params';
      else if (t.kind === "'('" && (prev.kind === 'ID' || prev.kind === "'load'")) role = 'call';
      stack.push({ ch: t.kind, role });
      continue;
    }
    if (t.kind === "')'" || t.kind === "']'" || t.kind === "'}'") { stack.pop(); continue; }
    if (t.kind !== 'ID') continue;
    let cls = 'other';
    if (prev.kind === "'fn'") cls = 'fnName';
    else if (prev.kind === "'mesh'") cls = 'meshName';
    else if (prev.kind === "'const'") cls = 'constName';
    else if (prev.kind === "'param'") cls = 'paramName';
    else if (prev.kind === "'optimizer'") cls = 'optimizerName';
    else if (prev.kind === "'dataset'") cls = 'datasetName';
    else if (prev.kind === "'let'") cls = 'letName';
    else if (top.role === 'annot' && prev.kind === "'('") cls = 'annotMesh';
    else if (top.role === 'dims') cls = 'annotAxis';
    else if (top.role === 'mesh' && next.kind === "':'") cls = 'meshAxisDecl';
    else if (top.role === 'params' && next.kind === "':'") cls = 'fnParam';
    else if (top.role === 'call' && next.kind === "'='") cls = 'kwArg';
    else if (next.kind === "'.'") cls = 'object';
    else if (prev.kind === "'.'" && next.kind === "'('") cls = 'method';
    else if (next.kind === "'('") cls = 'call';
    else if (t.text === 'NP') cls = 'np';
    t.idClass = cls;
  }
  return toks;
}

// `let (a, b) = ...`: the names in the parens are bindings.
function markLetTuples(toks) {
  for (let i = 0; i + 1 < toks.length; i++) {
    if (toks[i].kind === "'let'" && toks[i + 1].kind === "'('") {
      for (let j = i + 2; j < toks.length && toks[j].kind !== "')'"; j++)
        if (toks[j].kind === 'ID') toks[j].idClass = 'letName';
    }
  }
}

// ------------------------------------------------------------ main
async function main() {
  const [tokFile, vimFile, ...files] = process.argv.slice(2);
  const byFile = new Map(files.map((f) => [f, []]));
  for (const line of fs.readFileSync(tokFile, 'utf8').split('\n')) {
    if (!line) continue;
    const [file, l, c, kind, ...rest] = line.split('\t');
    if (!byFile.has(file)) continue;
    byFile.get(file).push({ file, line: +l, col: +c, kind, text: rest.join('\t') });
  }
  const src = new Map(files.map((f) => [f, fs.readFileSync(f, 'utf8').split(/\r?\n/)]));
  for (const f of files) {
    src.get(f).forEach((text, i) => {
      if (/[^\x00-\x7f]/.test(text)) {
        console.log(`${f}:${i + 1}: non-ASCII character; keep the samples ASCII (columns differ per tool)`);
        process.exit(1);
      }
    });
  }

  // TextMate scopes per character: tm.get(file)[line][col] = {scopes, start, end}
  let tm = null;
  const vscodeDir = path.resolve(__dirname, '..', 'vscode');
  try {
    require.resolve('vscode-textmate', { paths: [vscodeDir] });
    const { tokenizeFiles } = require('./tm_tokenize.js');
    tm = new Map(files.map((f) => [f, []]));
    for (const t of await tokenizeFiles(files)) {
      const rows = tm.get(t.file);
      rows[t.line] = rows[t.line] || [];
      for (let c = t.col; c < t.end; c++) rows[t.line][c] = t;
    }
  } catch (e) {
    console.log('TextMate: node_modules missing (run npm ci in editors/vscode); TextMate half skipped');
    tm = null;
  }
  let vim = null;
  if (vimFile !== '-') {
    vim = new Map(files.map((f) => [f, []]));
    for (const line of fs.readFileSync(vimFile, 'utf8').split('\n')) {
      if (!line) continue;
      const [file, l, groups] = line.split('\t');
      if (vim.has(file)) vim.get(file)[+l] = (groups || '').split(',');
    }
  }
  if (!tm && !vim) { console.log('SKIP: neither editor could be checked'); process.exit(77); }

  const fails = [];
  const counts = { tm: 0, vim: 0 };
  const kinds = new Set();
  for (const f of files) {
    const toks = byFile.get(f);
    classifyIds(toks);
    markLetTuples(toks);
    const covered = new Map();   // "line:col" -> true for chars inside tokens
    for (const t of toks) {
      kinds.add(t.kind);
      const where = `${path.relative(process.cwd(), f)}:${t.line}:${t.col + 1} ${t.kind} ${JSON.stringify(t.text)}`;
      for (let c = t.col; c < t.col + t.text.length; c++) covered.set(`${t.line}:${c}`, true);
      let cls;
      if (t.kind === 'STRING') cls = null;
      else if (t.kind === 'ID') cls = ID_CLASS[t.idClass];
      else cls = KIND[t.kind];
      if (cls === undefined) { fails.push(`${where}: no expectation for token kind ${t.kind} (update real_lexer_check.js)`); continue; }
      const prev = toks[toks.indexOf(t) - 1] || {}, prev2 = toks[toks.indexOf(t) - 2] || {};
      const einsum = t.kind === 'STRING' && prev.kind === "'('" && prev2.text === 'einsum';
      // ---- TextMate
      if (tm) {
        counts.tm++;
        const row = tm.get(f)[t.line] || [];
        const chars = [];
        for (let c = t.col; c < t.col + t.text.length; c++) chars.push(row[c]);
        if (chars.some((x) => !x)) { fails.push(`${where}: TextMate: no token`); }
        else if (t.kind === 'STRING') {
          const want = einsum ? 'string.quoted.double.einsum.gsl' : 'string.quoted.double.gsl';
          const bad = chars.find((x) => !x.scopes.includes(want));
          if (bad) fails.push(`${where}: TextMate: ${JSON.stringify(bad.text)} is ${bad.scopes.slice(1).join(' ')}, expected inside ${want}`);
        } else {
          const first = chars[0], last = chars[chars.length - 1];
          const inner = first.scopes[first.scopes.length - 1];
          if (first !== last || first.col !== t.col || first.end !== t.col + t.text.length)
            fails.push(`${where}: TextMate token ${JSON.stringify(first.text)} does not match the lexer token`);
          else if (!cls.tm.test(inner))
            fails.push(`${where}: TextMate: ${inner}, expected ${cls.tm}${t.kind === 'ID' ? ' (' + t.idClass + ')' : ''}`);
        }
        if (chars.some((x) => x && x.scopes.some((s) => s.startsWith('comment.'))))
          fails.push(`${where}: TextMate: part of the token is a comment`);
      }
      // ---- Vim
      if (vim) {
        counts.vim++;
        const row = vim.get(f)[t.line] || [];
        const gs = row.slice(t.col, t.col + t.text.length);
        if (t.kind === 'STRING') {
          const ok = einsum ? ['gslEinsumSpec', 'gslEinsumIndex', 'gslEinsumArrow', 'gslEinsumComma', 'gslEscape']
                            : ['gslString', 'gslEscape'];
          const bad = gs.find((g) => !ok.includes(g));
          if (bad !== undefined || gs[0] !== (einsum ? 'gslEinsumSpec' : 'gslString'))
            fails.push(`${where}: Vim: groups ${[...new Set(gs)].join(',')}, expected ${ok.join('/')}`);
        } else if (new Set(gs).size !== 1) {
          fails.push(`${where}: Vim: the token is split over groups ${gs.join(',')}`);
        } else if (!cls.vim.has(gs[0])) {
          fails.push(`${where}: Vim: ${gs[0] || '(none)'}, expected ${[...cls.vim].map((g) => g || '(none)').join('/')}${t.kind === 'ID' ? ' (' + t.idClass + ')' : ''}`);
        }
        if (gs.includes('gslComment')) fails.push(`${where}: Vim: part of the token is a comment`);
      }
    }
    // ---- characters outside tokens: blanks, or comments
    src.get(f).forEach((text, i) => {
      for (let c = 0; c < text.length; c++) {
        if (/\s/.test(text[c]) || covered.has(`${i + 1}:${c}`)) continue;
        const where = `${path.relative(process.cwd(), f)}:${i + 1}:${c + 1} ${JSON.stringify(text[c])} (skipped by the lexer)`;
        if (tm) {
          counts.tm++;
          const x = (tm.get(f)[i + 1] || [])[c];
          if (!x || !x.scopes.includes('comment.line.number-sign.gsl'))
            fails.push(`${where}: TextMate: ${x ? x.scopes.slice(1).join(' ') : 'no token'}, expected a comment`);
        }
        if (vim) {
          counts.vim++;
          const g = (vim.get(f)[i + 1] || [])[c];
          if (g !== 'gslComment' && g !== 'gslTodo') fails.push(`${where}: Vim: ${g || '(none)'}, expected gslComment`);
        }
      }
    });
  }
  for (const x of fails) console.log(x);
  const n = [...byFile.values()].reduce((a, t) => a + t.length, 0);
  console.log(`real lexer: ${n} tokens of ${kinds.size} kinds in ${files.length} files;` +
              ` TextMate ${tm ? counts.tm + ' checks' : 'skipped'}, Vim ${vim ? counts.vim + ' checks' : 'skipped'};` +
              ` ${fails.length} mismatch(es)`);
  if (fails.length) process.exit(1);
  process.exit(tm && vim ? 0 : 77);
}
main().catch((e) => { console.error(e); process.exit(1); });
