" Vim syntax file
" Language:    GSL, a small language for neural-network models whose tensors
"              carry @shard annotations
" Filenames:   *.gsl
" Maintainers: the GSL project (editors/vim/). Keep the word lists in sync with
"              grammar/GSL.g4, ir/OpTable.cpp, frontend/Sema.cpp and
"              frontend/Operators.cpp: editors/tests/drift_test.sh checks that
"              every keyword and builtin is highlighted here, and
"              editors/tests/lists_test.sh that the builtin, host builtin,
"              initialiser and operator lists hold exactly GSL's names.

if exists('b:current_syntax')
  finish
endif
let s:cpo_save = &cpo
set cpo&vim

syn case match
syn iskeyword @,48-57,_,192-255
syn sync minlines=50

" ---------------------------------------------------------------- comments
syn keyword gslTodo         contained TODO FIXME XXX NOTE
syn match   gslComment      "#.*$" contains=gslTodo,@Spell

" ---------------------------------------------------------------- operators
" Defined before the annotations so that `@shard` wins over the `@` matmul.
syn match   gslOperator     "\*\*\|->\|\.\.\|==\|!=\|<=\|>=\|[-+*/%<>=@]"
syn match   gslDelimiter    "[,:;]"

" ---------------------------------------------------------------- keywords
syn keyword gslInclude      import with
syn keyword gslConditional  if else
syn keyword gslRepeat       for in
syn keyword gslReturn       return
syn keyword gslWordOperator and or not
syn keyword gslStorage      fn    nextgroup=gslFuncDef   skipwhite
syn keyword gslStorage      mesh  nextgroup=gslMeshName  skipwhite
syn keyword gslStorage      const nextgroup=gslConstName skipwhite
syn keyword gslStorage      param nextgroup=gslParamName skipwhite
syn keyword gslStorage      let   nextgroup=gslLetName,gslLetTuple skipwhite
syn keyword gslStorage      optimizer nextgroup=gslOptimizerName skipwhite
syn keyword gslStorage      dataset   nextgroup=gslDatasetName   skipwhite
syn keyword gslType         f32 i32 bool bf16
syn keyword gslBoolean      true false
syn keyword gslPredefined   NP

" Tensor builtins: the builtin names of ir/OpTable.cpp makeTable().
syn keyword gslBuiltin      exp log sqrt rsqrt tanh relu gelu gelu_exact erf sigmoid abs cast
syn keyword gslBuiltin      maximum minimum where matmul einsum
syn keyword gslBuiltin      sum mean max min argmax softmax log_softmax layer_norm cumsum
syn keyword gslBuiltin      reshape transpose concat slice broadcast one_hot take random_uniform arange dropout
" Host-script builtins (fn main): kHostBuiltins of frontend/Sema.cpp. `batch` is
" a match (below), not a keyword, so that the keyword argument of
" copy_task(batch=B, ...) stays plain.
syn keyword gslHostBuiltin  print print_text save load exists grad start_step save_checkpoint load_checkpoint log_metric log_moe evaluate
" Param initialisers.
syn keyword gslInitializer  zeros ones normal uniform glorot
" Constructors of optimizer and dataset declarations.
syn keyword gslConstructor  sgd adam adamw adafactor copy_task reverse_task npy_tokens npy_pairs text_bytes

" ---------------------------------------------------------------- names
syn match   gslFuncDef      contained "\h\w*"
syn match   gslConstName    contained "\h\w*"
syn match   gslParamName    contained "\h\w*"
syn match   gslOptimizerName contained "\h\w*"
syn match   gslDatasetName  contained "\h\w*"
syn match   gslLetName      contained "\h\w*"
syn region  gslLetTuple     contained matchgroup=gslDelimiter start="(" end=")" contains=gslLetName,gslDelimiter
syn match   gslFuncCall     "\<\h\w*\ze\s*("
" After gslFuncCall, so that these win where both match.
syn match   gslHostBuiltin  "\<batch\>\%(\s*=\%(=\)\@!\)\@!"
" opt.minimize(...): the accessor dot and the method name.
syn match   gslAccessor     "\%(\w\s*\)\@<=\.\ze\s*\h"
syn match   gslMethodCall   "\%(\w\s*\.\s*\)\@<=\h\w*\ze\s*("

" mesh NAME = [axis: SIZE, ...]
syn match   gslMeshName     contained "\h\w*" nextgroup=gslMeshEq skipwhite
syn match   gslMeshEq       contained "=" nextgroup=gslMeshBody skipwhite skipnl
syn region  gslMeshBody     contained matchgroup=gslDelimiter start="\[" end="\]" contains=gslMeshAxisDecl,@gslExpr
syn match   gslMeshAxisDecl contained "\<\h\w*\ze\s*:"

" ---------------------------------------------------------------- literals
syn match   gslNumber       "\<\d\+\>"
syn match   gslFloat        "\<\d\+\.\d\+\%([eE][+-]\=\d\+\)\=\>"
syn match   gslFloat        "\<\d\+[eE][+-]\=\d\+\>"
syn match   gslEscape       contained "\\."
syn region  gslString       start=+"+ skip=+\\.+ end=+"+ oneline contains=gslEscape,@Spell
" The spec string of einsum("gsm,me->gse", ...): indices, operand commas, arrow.
syn region  gslEinsumSpec   start=+\%(\<einsum\s*(\s*\)\@<="+ skip=+\\.+ end=+"+ oneline contains=gslEscape,gslEinsumIndex,gslEinsumArrow,gslEinsumComma
syn match   gslEinsumIndex  contained "\a\+"
syn match   gslEinsumArrow  contained "->"
syn match   gslEinsumComma  contained ","

" ---------------------------------------------------------------- annotations
" @shard(MESH, [S0, S1, ...]) where Si is _, an axis, or (a, b); @replicate(MESH)
syn match   gslAnnotation   "@\%(shard\|replicate\)" nextgroup=gslAnnotArgs skipwhite
" for l in 0..L @pipeline(microbatches = M): its arguments are expressions
syn match   gslAnnotation   "@pipeline\>"
syn region  gslAnnotArgs    contained matchgroup=gslDelimiter start="(" end=")" contains=gslAnnotMesh,gslAnnotDims,gslDelimiter,gslComment
syn match   gslAnnotMesh    contained "\%((\s*\)\@<=\h\w*"
syn region  gslAnnotDims    contained matchgroup=gslDelimiter start="\[" end="\]" contains=gslAnnotAxes,gslMeshAxis,gslReplicated,gslDelimiter,gslComment
syn region  gslAnnotAxes    contained matchgroup=gslDelimiter start="(" end=")" contains=gslMeshAxis,gslReplicated,gslDelimiter
syn match   gslMeshAxis     contained "\<\h\w*\>"
syn match   gslReplicated   contained "\<_\>"

syn cluster gslExpr contains=gslComment,gslOperator,gslDelimiter,gslWordOperator,gslType,gslBoolean,gslPredefined,gslBuiltin,gslHostBuiltin,gslInitializer,gslConstructor,gslFuncCall,gslMethodCall,gslAccessor,gslNumber,gslFloat,gslString,gslEinsumSpec,gslAnnotation

" ---------------------------------------------------------------- colours
hi def link gslTodo          Todo
hi def link gslComment       Comment
hi def link gslOperator      Operator
hi def link gslWordOperator  Operator
hi def link gslDelimiter     Delimiter
hi def link gslInclude       Include
hi def link gslConditional   Conditional
hi def link gslRepeat        Repeat
hi def link gslReturn        Statement
hi def link gslStorage       StorageClass
hi def link gslType          Type
hi def link gslBoolean       Boolean
hi def link gslPredefined    Constant
hi def link gslBuiltin       Function
hi def link gslHostBuiltin   Function
hi def link gslInitializer   Constant
hi def link gslConstructor   Function
hi def link gslFuncDef       Function
hi def link gslFuncCall      Function
hi def link gslMethodCall    Function
hi def link gslAccessor      Delimiter
hi def link gslConstName     Constant
hi def link gslParamName     Identifier
hi def link gslOptimizerName Identifier
hi def link gslDatasetName   Identifier
hi def link gslLetName       Identifier
hi def link gslMeshName      Identifier
hi def link gslMeshEq        Operator
hi def link gslMeshAxisDecl  gslMeshAxis
hi def link gslNumber        Number
hi def link gslFloat         Float
hi def link gslString        String
hi def link gslEscape        SpecialChar
hi def link gslEinsumSpec    String
hi def link gslEinsumIndex   Identifier
hi def link gslEinsumArrow   Operator
hi def link gslEinsumComma   Delimiter
hi def link gslAnnotation    PreProc
hi def link gslAnnotMesh     Identifier
hi def link gslMeshAxis      Constant
hi def link gslReplicated    Special

let b:current_syntax = 'gsl'
let &cpo = s:cpo_save
unlet s:cpo_save
