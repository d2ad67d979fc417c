" GSL (sharded tensor language): *.gsl files.
autocmd BufNewFile,BufRead *.gsl set filetype=gsl
