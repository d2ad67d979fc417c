" Vim filetype plugin for GSL (*.gsl). Buffer-local settings only.
if exists('b:did_ftplugin')
  finish
endif
let b:did_ftplugin = 1

setlocal commentstring=#\ %s
setlocal comments=:#
setlocal formatoptions-=t formatoptions+=croql
setlocal expandtab shiftwidth=2 softtabstop=2 tabstop=8
setlocal autoindent
setlocal iskeyword=@,48-57,_,192-255
setlocal suffixesadd=.gsl
setlocal matchpairs=(:),[:],{:}

let b:undo_ftplugin = 'setlocal commentstring< comments< formatoptions< expandtab< shiftwidth<'
      \ . ' softtabstop< tabstop< autoindent< iskeyword< suffixesadd< matchpairs<'
