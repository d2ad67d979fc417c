" Vim indent file for GSL (*.gsl): one shiftwidth per open { [ ( .
if exists('b:did_indent')
  finish
endif
let b:did_indent = 1

setlocal indentexpr=GslIndent(v:lnum)
setlocal indentkeys=0{,0},0],0),!^F,o,O,e
setlocal nolisp nosmartindent nocindent
let b:undo_indent = 'setlocal indentexpr< indentkeys< lisp< smartindent< cindent<'

if exists('*GslIndent')
  finish
endif

" Net number of brackets opened on a line, ignoring strings and comments.
function! s:NetOpen(line) abort
  let l:s = substitute(a:line, '"\%([^"\\]\|\\.\)*"', '""', 'g')
  let l:s = substitute(l:s, '#.*$', '', '')
  let l:open = len(substitute(l:s, '[^{[(]', '', 'g'))
  let l:close = len(substitute(l:s, '[^}\])]', '', 'g'))
  " Closers at the start of the line were already dedented on that line.
  let l:lead = len(matchstr(l:s, '^\s*\zs[}\])]*'))
  return l:open - (l:close - l:lead)
endfunction

function! GslIndent(lnum) abort
  let l:prev = prevnonblank(a:lnum - 1)
  while l:prev > 0 && getline(l:prev) =~# '^\s*#'
    let l:prev = prevnonblank(l:prev - 1)
  endwhile
  if l:prev == 0
    return 0
  endif
  let l:ind = indent(l:prev)
  if s:NetOpen(getline(l:prev)) > 0
    let l:ind += shiftwidth()
  elseif s:NetOpen(getline(l:prev)) < 0
    let l:ind -= shiftwidth()
  endif
  let l:lead = len(matchstr(getline(a:lnum), '^\s*\zs[}\])]*'))
  let l:ind -= l:lead * shiftwidth()
  return l:ind < 0 ? 0 : l:ind
endfunction
