" Headless Vim syntax test for GSL. Usage (see run_tests.sh):
"   vim -Nu NONE -es -c 'set rtp^=editors/vim' -c 'filetype plugin indent on'
"       -c 'syntax on' -c 'let g:gsl_test_out = "RESULT"' -c 'source check_syntax.vim'
"       -c 'call GslRunSuite(["a.gsl", ...], ["sample.gsl", ...])'
"
" Test files are GSL sources with assertion lines, in the style of
" vscode-tmgrammar-test: an assertion line starts with '#', and its carets
" point at columns of the nearest source line above it:
"     let y = relu(x)
"     #       ^^^^ gslBuiltin Function
" '# <--- GROUP' asserts the first 3 columns (one per '-').
" Expectations, one or two words:
"     GROUP        synIDattr(synID(l, c, 1), "name") ==# GROUP
"     GROUP LINK   ... and GROUP is linked to LINK (`:hi def link GROUP LINK`)
"     *            any non-empty syntax group
"     !GROUP       any non-empty syntax group other than GROUP
"     -            no syntax group at all (plain text)
" GslRunSuite also checks the ftplugin's buffer-local settings and re-indents
" sample files with indent/gsl.vim. Results: one line per failure and summary
" lines, written to g:gsl_test_out; exits with :cquit (non-zero) on failure.

let s:assert_re = '^#\s*\%(\^\+\|<-\+\)\s\+\S'

function! s:LinkOf(group) abort
  let l:out = execute('highlight ' . a:group)
  return matchstr(l:out, 'links to \zs\S\+')
endfunction

function! s:Check(lnum, col, want, link, where) abort
  let l:id = synID(a:lnum, a:col, 1)
  let l:got = synIDattr(l:id, 'name')
  let l:text = getline(a:lnum)[a:col - 1]
  let l:desc = printf('%s:%d:%d (%s)', a:where, a:lnum, a:col, string(l:text))
  if a:want ==# '*'
    let l:ok = l:got !=# ''
  elseif a:want ==# '-'
    let l:ok = l:got ==# ''
  elseif a:want[0] ==# '!'
    let l:ok = l:got !=# '' && l:got !=# a:want[1:]
  else
    let l:ok = l:got ==# a:want
  endif
  if !l:ok
    return [printf('%s: expected %s, got %s', l:desc, a:want, l:got ==# '' ? '(none)' : l:got)]
  endif
  if a:link !=# '' && s:LinkOf(l:got) !=# a:link
    return [printf('%s: %s links to %s, expected %s', l:desc, l:got, s:LinkOf(l:got), a:link)]
  endif
  return []
endfunction

" Checks the assertions of the current buffer. Returns [count, failures].
function! GslCheckBuffer(where) abort
  let l:count = 0
  let l:fails = []
  let l:src = 0
  for l:lnum in range(1, line('$'))
    let l:line = getline(l:lnum)
    if l:line !~# s:assert_re
      let l:src = l:lnum
      continue
    endif
    if l:src == 0
      call add(l:fails, printf('%s:%d: assertion before any source line', a:where, l:lnum))
      continue
    endif
    let l:words = split(substitute(l:line, '^#\s*\%(\^\+\|<-\+\)\s\+', '', ''))
    let l:want = l:words[0]
    let l:link = len(l:words) > 1 ? l:words[1] : ''
    let l:cols = []
    let l:m = matchstr(l:line, '^#\s*<\zs-\+')
    if l:m !=# ''
      let l:cols = range(1, len(l:m))
    else
      let l:start = match(l:line, '\^')
      let l:carets = matchstr(l:line, '\^\+')
      let l:cols = range(l:start + 1, l:start + len(l:carets))
    endif
    for l:c in l:cols
      let l:count += 1
      let l:fails += s:Check(l:src, l:c, l:want, l:link, a:where)
    endfor
  endfor
  return [l:count, l:fails]
endfunction

" Syntax assertions of every file in a:files. Returns [count, failures].
function! GslCheckFiles(files) abort
  let l:total = 0
  let l:fails = []
  for l:f in a:files
    execute 'silent edit! ' . fnameescape(l:f)
    let l:total += 1
    if &filetype !=# 'gsl'
      call add(l:fails, printf('%s: filetype is %s, expected gsl (ftdetect/gsl.vim)', l:f, string(&filetype)))
    endif
    let [l:n, l:fl] = GslCheckBuffer(l:f)
    let l:total += l:n
    let l:fails += l:fl
  endfor
  return [l:total, l:fails]
endfunction

" Buffer-local settings of ftplugin/gsl.vim and indent/gsl.vim, in a:file.
function! GslCheckSettings(file) abort
  execute 'silent edit! ' . fnameescape(a:file)
  let l:want = {'commentstring': '# %s', 'comments': ':#', 'expandtab': 1,
        \ 'shiftwidth': 2, 'softtabstop': 2, 'autoindent': 1,
        \ 'indentexpr': 'GslIndent(v:lnum)'}
  let l:fails = []
  for [l:opt, l:val] in items(l:want)
    let l:got = getbufvar('%', '&' . l:opt)
    if l:got !=# l:val
      call add(l:fails, printf('%s: &l:%s is %s, expected %s', a:file, l:opt, string(l:got), string(l:val)))
    endif
  endfor
  for l:var in ['b:undo_ftplugin', 'b:undo_indent']
    if !exists(l:var)
      call add(l:fails, printf('%s: %s is not set', a:file, l:var))
    endif
  endfor
  " ftplugin must not touch global values.
  if &g:commentstring ==# '# %s'
    call add(l:fails, printf('%s: the global commentstring was changed (use setlocal)', a:file))
  endif
  return [len(l:want) + 3, l:fails]
endfunction

" Re-indents each file with indent/gsl.vim (gg=G) and compares with the file
" as written (the samples are indented two spaces per open bracket).
function! GslCheckIndent(files) abort
  let l:count = 0
  let l:fails = []
  for l:f in a:files
    execute 'silent edit! ' . fnameescape(l:f)
    let l:before = getline(1, '$')
    silent normal! gg=G
    let l:after = getline(1, '$')
    for l:i in range(len(l:before))
      let l:count += 1
      if l:before[l:i] !=# l:after[l:i]
        call add(l:fails, printf('%s:%d: re-indented as %s, written as %s', l:f, l:i + 1,
              \ string(l:after[l:i]), string(l:before[l:i])))
      endif
    endfor
    silent edit!
  endfor
  return [l:count, l:fails]
endfunction

" The whole suite; writes the report to g:gsl_test_out and exits.
function! GslRunSuite(syntax_files, indent_files) abort
  let l:report = []
  let l:failed = 0
  for [l:name, l:res] in [['syntax', GslCheckFiles(a:syntax_files)],
        \ ['settings', GslCheckSettings(a:syntax_files[0])],
        \ ['indent', GslCheckIndent(a:indent_files)]]
    let l:report += l:res[1]
    let l:failed += len(l:res[1])
    call add(l:report, printf('vim %s: %d assertions, %d failure(s)', l:name, l:res[0], len(l:res[1])))
  endfor
  call writefile(l:report, g:gsl_test_out)
  if l:failed
    cquit
  endif
  qall!
endfunction

" Syntax assertions only (used by editors/tests/drift_test.sh).
function! GslRunSyntax(files) abort
  let [l:n, l:fails] = GslCheckFiles(a:files)
  call writefile(l:fails + [printf('vim syntax: %d assertions, %d failure(s)', l:n, len(l:fails))], g:gsl_test_out)
  if !empty(l:fails)
    cquit
  endif
  qall!
endfunction

" Writes the syntax group of every character of every file, one line per
" source line: FILE <TAB> LNUM <TAB> group,group,... (used by
" editors/tests/real_lexer_test.sh to compare with the ANTLR lexer's tokens).
function! GslDumpGroups(files, out) abort
  let l:res = []
  for l:f in a:files
    execute 'silent edit! ' . fnameescape(l:f)
    for l:lnum in range(1, line('$'))
      let l:groups = []
      for l:c in range(1, len(getline(l:lnum)))
        call add(l:groups, synIDattr(synID(l:lnum, l:c, 1), 'name'))
      endfor
      call add(l:res, l:f . "\t" . l:lnum . "\t" . join(l:groups, ','))
    endfor
  endfor
  call writefile(l:res, a:out)
  qall!
endfunction
