// GSL grammar (ANTLR4). The C++ lexer/parser are generated at build time by
// the Debian `antlr4` tool (see CMakeLists.txt); generated code is never
// committed. frontend/Parser.cpp turns the parse tree into the AST.
grammar GSL;

program : decl* EOF ;

decl
    : 'import' STRING ('with' '(' arg (',' arg)* ','? ')')?        # importDecl
    | 'const' ID '=' expr                                         # constDecl
    | 'mesh' ID '=' '[' meshAxis (',' meshAxis)* ','? ']'        # meshDecl
    | 'param' ID ':' type annotation? '=' expr                    # paramDecl
    | 'param' ID '[' expr ']' annotation? '{' groupMember* '}'    # paramGroupDecl
    | 'fn' ID shapeParams? '(' (fnArg (',' fnArg)* ','?)? ')' ('->' resultType)? block  # fnDecl
    | 'optimizer' ID '=' expr                                     # optimizerDecl
    | 'dataset' ID '=' expr                                       # datasetDecl
    ;

meshAxis : ID ':' expr ;

// A member of a param group `param blocks[L] { wq: f32[D, H] = glorot }`:
// its type is one layer's; the param is stacked, `blocks.wq: f32[L, D, H]`.
groupMember : ID ':' type annotation? '=' expr ','? ;

// Explicit shape parameters of a generic function, given at each call as
// keyword arguments: `fn top2_gating[C](...)`, `top2_gating(l, u, C=4)`.
shapeParams : '[' ID (',' ID)* ','? ']' ;

fnArg : ID ':' type annotation? ;

resultType
    : type annotation?                                            # singleResult
    | '(' type annotation? (',' type annotation?)* ')'            # tupleResult
    ;

type : DTYPE ('[' (expr (',' expr)*)? ']')? ;

annotation
    : '@shard' '(' ID ',' '[' shardDim (',' shardDim)* ']' ')'   # shardAnnot
    | '@shard' '(' ID ',' '[' ']' ')'                             # shardAnnotScalar
    | '@replicate' '(' ID ')'                                     # replicateAnnot
    ;

shardDim
    : '_'                                                         # shardNone
    | ID                                                          # shardAxis
    | '(' ID (',' ID)* ')'                                        # shardAxes
    ;

block : '{' stmt* '}' ;

// `for l in 0..L @pipeline(microbatches = 4) { ... }`: a loop over a param
// group whose layers are split over a stage axis runs as a pipeline
// (docs/pipeline.md).
pipelineAnnot : '@pipeline' '(' (arg (',' arg)* ','?)? ')' ;

stmt
    : 'let' ID (':' type)? '=' expr                               # letStmt
    | 'let' '(' ID (',' ID)+ ')' '=' expr                         # letTupleStmt
    | ID '=' expr                                                 # assignStmt
    | 'return' expr (',' expr)*                                   # returnStmt
    | 'for' ID 'in' expr '..' expr pipelineAnnot? block           # forStmt
    | 'if' expr block ('else' (ifTail | block))?                  # ifStmt
    | expr                                                        # exprStmt
    ;

ifTail : 'if' expr block ('else' (ifTail | block))? ;

expr
    : primary                                                     # primaryExpr
    | expr '[' (index (',' index)* ','?)? ']'                     # indexExpr
    | <assoc=right> expr '**' expr                                # powExpr
    | op=('-' | '+') expr                                         # unaryExpr
    | expr op=('*' | '/' | '%' | '@' | '//') expr                 # mulExpr
    | expr op=('+' | '-') expr                                    # addExpr
    | expr op=('==' | '!=' | '<' | '<=' | '>' | '>=') expr        # cmpExpr
    | 'not' expr                                                  # notExpr
    | expr 'and' expr                                             # andExpr
    | expr 'or' expr                                              # orExpr
    | expr annotation                                             # annotExpr
    ;

primary
    : INT                                                         # intLit
    | FLOAT                                                       # floatLit
    | STRING                                                      # stringLit
    | ('true' | 'false')                                          # boolLit
    | DTYPE                                                       # dtypeLit
    | 'load' '(' expr ')' ':' type annotation?                    # loadExpr
    | ID '.' ID '(' (arg (',' arg)* ','?)? ')'                    # methodExpr
    | ID '(' (arg (',' arg)* ','?)? ')'                           # callExpr
    | ID '.' ID                                                   # memberExpr
    | ID                                                          # nameExpr
    | '[' (expr (',' expr)* ','?)? ']'                            # listExpr
    | '(' expr ')'                                                # parenExpr
    | '(' expr (',' expr)+ ','? ')'                               # tupleExpr
    ;

// A keyword argument's name may be the word `optimizer`: save_checkpoint(path, optimizer=false).
arg : (name=(ID | 'optimizer') '=')? expr ;

// `x[i]` (drops the dim), `x[a:b]`, `x[:b]`, `x[a:]`, `x[:]` (keep it).
index
    : expr                                                        # pointIndex
    | lo=expr? ':' hi=expr?                                       # sliceIndex
    ;

DTYPE  : 'f32' | 'i32' | 'bool' | 'bf16' ;
ID     : [a-zA-Z_] [a-zA-Z_0-9]* ;
FLOAT  : [0-9]+ '.' [0-9]+ EXP? | [0-9]+ EXP ;
INT    : [0-9]+ ;
STRING : '"' (~["\\\r\n] | '\\' .)* '"' ;
fragment EXP : [eE] [+-]? [0-9]+ ;

COMMENT : '#' ~[\r\n]* -> skip ;
WS      : [ \t\r\n]+ -> skip ;
ERRCHAR : . ;
