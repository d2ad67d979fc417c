// The inside of semantic analysis; frontend/Sema.h is its one entry point.
// Only the files that implement the Sema class include this header. The
// class is split by concern, one file per question:
//
//   Sema.cpp            the entry point; names and declarations: what does
//                       each global (const, mesh, param, optimizer, dataset,
//                       fn) denote?
//   ConstEval.cpp       compile-time values: constant folding, dims, types
//                       and @shard annotations
//   LowerExpr.cpp       tensor expressions and builtin calls -> IR ops
//   LowerFunctions.cpp  user functions: signatures, generic instances (one
//                       per distinct binding of shape variables), inlining
//   HostLowering.cpp    fn main -> HostProgram: host statements, host
//                       builtins (print, save, batch, grad, ...) and thunks
#pragma once
#include <compare>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "frontend/Frontend.h"
#include "ir/OpTable.h"

namespace gsl::frontend::sema {

using namespace ir;  // everything Sema builds is IR

// A compile-time number (const expressions, static builtin arguments).
struct Num {
  bool isInt = true;
  int64_t i = 0;
  double f = 0;
  double d() const { return isInt ? (double)i : f; }
};

// The value of an expression while lowering.
struct EV {
  enum Kind { Error, Tensor, Literal, Tuple } kind = Error;
  Value* v = nullptr;          // Tensor
  Num lit;                     // Literal: a weakly typed number (adopts the other operand's dtype)
  std::vector<Value*> tuple;   // Tuple: a call's results
  static EV tensor(Value* v) { EV e; e.kind = Tensor; e.v = v; return e; }
  static EV literal(Num n) { EV e; e.kind = Literal; e.lit = n; return e; }
  bool ok() const { return kind != Error; }
};

// The builtins of the host script (fn main), as opposed to the tensor
// builtins of the op table. In alphabetical order, as kHostBuiltins.
enum class HostBuiltin { Batch, Evaluate, Exists, Grad, Load, LoadCheckpoint, LogMetric, LogMoe, Print, PrintText, Save, SaveCheckpoint, StartStep, Count };
std::optional<HostBuiltin> hostBuiltin(const std::string& name);  // Sema.cpp
const char* hostBuiltinName(HostBuiltin b);
std::vector<std::string> hostBuiltinNames();
// Names of the param initializers (zeros, ones, ...).
extern const std::set<std::string> kInitializers;

// " (did you mean 'x'?)" for the closest candidate, or "".
std::string suggest(const std::string& name, const std::vector<std::string>& candidates);
// A compile-time number as a message shows it: 3, 0.001, 2.5.
std::string formatNum(Num n);
// Where an expression starts: a binary expression's own location is its
// operator, but an error about the whole value belongs at its first token.
SourceLoc startLoc(const ast::Expr& e);

// One instance of a generic function: its explicit shape parameters (in
// declaration order) and its argument types.
struct InstanceKey {
  std::string fn;
  std::vector<int64_t> shapeParams;
  std::vector<std::pair<DType, Shape>> argTypes;
  auto operator<=>(const InstanceKey&) const = default;
};

class Sema {
 public:
  Sema(const Options& o, Diagnostics& d, CheckedProgram& out);
  bool run(const std::vector<const ast::Decl*>& decls);

 private:
  const Options& opts_;
  Diagnostics& diags_;
  CheckedProgram& out_;
  Module* mod_;

  struct Global {
    ast::DeclKind kind;
    SourceLoc loc;
  };
  std::map<std::string, Global> globals_;
  int rootFile_ = -1;  // the program's own file (imports are other files)
  std::map<std::string, Num> consts_;  // integer or float
  std::set<std::string> npConsts_;     // consts whose value depends on NP (-np)

  struct FnInfo {
    const ast::Decl* decl = nullptr;
    int state = 0;  // 0 not lowered, 1 in progress, 2 done
    bool ok = false;
    bool sigOk = false;
    std::vector<TensorType> argTypes, resultTypes;
    std::vector<std::optional<Sharding>> argShardings, resultShardings;
    std::unique_ptr<Function> owned;
    Function* fn = nullptr;
    std::vector<std::string> shapeVars;  // non-empty: generic
  };
  // Shape variables bound for the function being lowered (innermost last;
  // only the innermost is visible, as a function sees only its own).
  std::vector<std::map<std::string, int64_t>> shapeVars_{{}};
  std::set<InstanceKey> failedInstances_;
  std::map<std::string, FnInfo> fns_;
  std::vector<std::unique_ptr<Function>> thunks_;
  int nextThunk_ = 0;  // thunks are named main.0, main.1, ... in creation order

  struct Ctx;
  // A loop being lowered (LowerLoops.cpp): its body function, the context
  // the loop is in, and the values of that context the body reads, each
  // passed in as a body argument (a body reads only its arguments).
  struct LoopFrame {
    Ctx* parent = nullptr;
    Function* body = nullptr;
    std::string var;                       // the loop index's name
    std::vector<std::string> carried;      // carried names, in operand order
    std::vector<Value*> carriedInit;       // their values before the loop
    std::map<Value*, Value*> captured;     // outer value -> body argument
    std::vector<Value*> invariants;        // outer values, in argument order
  };
  // A lowering context: the function being built and its local names.
  struct Ctx {
    Function* fn = nullptr;
    std::vector<std::map<std::string, EV>> scopes;
    bool host = false;                         // building a thunk of fn main
    std::vector<HostLeaf>* leaves = nullptr;   // host: thunk inputs
    std::map<std::string, Value*> hostArgs;    // host variable -> thunk argument
    std::map<std::string, Value*> paramVals;   // param -> its `param` op in this function
    std::vector<std::string> callStack;
    int mute = 0;                              // > 0 while inlining an already checked body
    LoopFrame* loop = nullptr;                 // innermost loop whose body is being built
    bool loopRoot = false;                     // this context is that body's own (not a call inlined into it)
  };
  // Param groups: group -> (layers, members).
  struct Group {
    int64_t layers = 0;
    std::vector<std::string> members;
    // `param blocks[L] @shard(m, [stage])`: the layer dim split over these
    // axes of `stageMesh` (a pipeline, docs/pipeline.md); `stages` ways.
    Symbol stageMesh;
    ir::Axes stageAxes;
    int64_t stages = 1;
    SourceLoc stageLoc;
  };
  std::map<std::string, Group> groups_;
  // The values an i32 scalar index is known to take (a loop index, plus or
  // minus constants): [first, last].
  // kUnknownRange: an i32 argument of a function checked on its own (the
  // range is checked at each call, where the function is inlined).
  std::map<const Value*, std::pair<int64_t, int64_t>> indexRange_;
  static constexpr std::pair<int64_t, int64_t> kUnknownRange{INT64_MIN, INT64_MAX};
  // Bodies of loops that were not built (an error, or nothing carried): kept
  // until the end, so indexRange_ never sees a reused address.
  std::vector<std::unique_ptr<Function>> deadBodies_;
  // Index errors found while inlining (LowerLoops.cpp, indexErr).
  int inlinedIndexErrors_ = 0;
  std::set<std::tuple<int, int, int, std::string>> reportedIndexErrors_;
  std::vector<std::map<std::string, TensorType>> hostScopes_;
  // Calls are inlined, so a few lines can ask for exponentially many ops (f1
  // calls f0 twice, f2 calls f1 twice, ...): each inlining first checks the
  // ops built so far against opts_.maxOps (found by fuzzing, tests/fuzz).
  size_t builtOps_ = 0;  // ops of the finished standalone functions
  bool tooLarge_ = false;

  // ---------------------------------------------- Sema.cpp: declarations
  bool opLimitReached(const Ctx& c, SourceLoc l);
  void err(Ctx& c, SourceLoc l, const std::string& m);
  void err(SourceLoc l, const std::string& m);
  void registerNames(const std::vector<const ast::Decl*>& decls);
  void checkDefines();
  bool isRegistered(const ast::Decl& d);
  void declConst(const ast::Decl& d);
  void declMesh(const ast::Decl& d);
  void declParam(const ast::Decl& d);
  // `skip`: a keyword the caller reads itself (an optimizer's lr schedule).
  bool numericKeywords(const ast::Expr& e, const std::map<std::string, double>& defaults,
                       std::map<std::string, double>& out, size_t positional = 0, const std::string& skip = "");
  bool lowerSchedule(const ast::Expr& e, LrSchedule& s);
  void declOptimizer(const ast::Decl& d);
  void declDataset(const ast::Decl& d);
  const Dataset* findDataset(const std::string& n) const;
  bool lowerInit(const ast::Expr& e, ParamInit& init);
  void declParamGroup(const ast::Decl& d);

  // ---------------------------------------------- ConstEval.cpp: compile-time values
  std::optional<Num> constEval(const ast::Expr& e);
  std::vector<std::string> constNames() const;
  bool dependsOnNP(const ast::Expr& e) const;
  std::optional<Num> foldBinary(ast::BinaryOp op, Num a, Num b, SourceLoc l, bool exactDiv);
  std::optional<int64_t> evalInt(const ast::Expr& e, const std::string& what);
  std::optional<TensorType> lowerType(const ast::TypeExpr& t);
  std::optional<Sharding> checkSharding(const ast::ShardAnnot& a, const TensorType& t);

  // ---------------------------------------------- LowerExpr.cpp: expressions and builtins
  bool isUnknownCallee(const ast::Expr& e) const;
  std::string unknownFunctionMessage(const std::string& name) const;
  // An expression statement in a tensor function or loop body (its value
  // unused): the one diagnostic for it; `use` says how to keep the value.
  void reportExprStatement(Ctx& c, const ast::Stmt& s, const char* use);
  Value* materialize(Ctx& c, const EV& e, DType dt, SourceLoc l);
  DType defaultDType(const EV& e);
  EV emit(Ctx& c, OpKind k, std::vector<Value*> operands, AttrMap at, SourceLoc l,
          const std::map<std::string, SourceLoc>& attrLocs = {});
  Value* constrain(Ctx& c, Value* v, const Sharding& s, SourceLoc l);
  std::vector<std::string> visibleNames(Ctx& c);
  EV lowerName(Ctx& c, const ast::Expr& e);
  static OpKind binaryKind(ast::BinaryOp op);
  bool unify(Ctx& c, EV& a, EV& b, SourceLoc la, SourceLoc lb, std::vector<Value*>& out);
  EV lowerBinary(Ctx& c, const ast::Expr& e);
  EV lowerUnary(Ctx& c, const ast::Expr& e);
  EV lower(Ctx& c, const ast::Expr& e);
  EV lowerCall(Ctx& c, const ast::Expr& e);
  static std::string argList(const OpInfo& op);
  bool bindArgs(Ctx& c, const ast::Expr& call, size_t nparams, const std::function<std::string(size_t)>& nameOf,
                bool variadicLast, const std::string& sig, std::vector<const ast::Expr*>& slots,
                std::vector<const ast::Expr*>& rest, size_t firstArg = 0, const std::string* calleeName = nullptr);
  EV lowerBuiltin(Ctx& c, const ast::Expr& e, const OpInfo& op);
  EV paramRef(Ctx& c, const Param& p, SourceLoc l);

  // ---------------------------------------------- LowerLoops.cpp: loops and indexing
  Value* capture(LoopFrame& f, Value* outer);
  void indexErr(Ctx& c, SourceLoc l, const std::string& m);
  EV lowerMember(Ctx& c, const ast::Expr& e, bool indexed);
  EV lowerIndex(Ctx& c, const ast::Expr& e);
  bool lowerLoop(Ctx& c, const ast::Stmt& s);
  // A loop reading a param group split over a stage axis is a pipeline:
  // checks it (docs/pipeline.md) and returns its microbatch count, 0 for
  // an ordinary loop, nullopt after an error; `rounds` gets its rounds
  // (circular: R, 1 by default).
  std::vector<Value*> lowerMicrobatchLoop(Ctx& c, SourceLoc loc, int64_t M, int64_t R,
                                          const std::vector<Value*>& carriedInit,
                                          const std::vector<Value*>& invariants,
                                          const std::function<Op*(Function&, std::vector<Value*>)>& buildLayers);
  std::optional<int64_t> checkPipeline(Ctx& c, const ast::Stmt& s, const LoopFrame& f, const Function& body,
                                       int64_t lo, int64_t hi, int64_t& rounds);
  bool lowerLoopStmt(Ctx& c, const ast::Stmt& s);
  bool lowerAssign(Ctx& c, const ast::Stmt& s);

  // ---------------------------------------------- LowerFunctions.cpp: user functions
  std::vector<std::string> shapeVarsOf(const ast::Decl& d);
  bool capturesDim(const ast::Decl& d, const std::string& name);
  bool computeSignature(const ast::Decl& d, FnInfo& f);
  FnInfo& signature(const std::string& name);
  void lowerFnStandalone(const std::string& name);
  bool lowerFnBody(Ctx& c, const ast::Decl& d, FnInfo& f, std::vector<Value*>& results);
  bool bindLet(Ctx& c, const ast::Stmt& s);
  static void nameValue(Ctx& c, Value* v, const std::string& n);
  static void addCallPath(const Ctx& c, Value* v, const std::string& n);
  EV lowerUserCall(Ctx& c, const ast::Expr& e);
  EV lowerUserCall(Ctx& c, const ast::Expr& e, const std::string& name, size_t firstArg);

  // ---------------------------------------------- HostLowering.cpp: fn main
  std::vector<std::string> paramsUsed(const Function& f);
  bool makeLossThunk(const ast::Expr& e, const std::string& fnName, size_t firstArg, Thunk& t, bool aux = false);
  std::string lossFunction(const ast::Expr& e, const char* what);
  EV lowerMethod(Ctx& c, const ast::Expr& e);
  EV lowerLoad(Ctx& c, const ast::Expr& e);
  EV lowerHostBuiltinCall(Ctx& c, const ast::Expr& e, HostBuiltin b);
  EV lowerEvaluate(Ctx& c, const ast::Expr& e);
  bool makeThunk(const ast::Expr& e, Thunk& t, std::optional<DType> want = std::nullopt, bool allowTuple = false);
  const TensorType* findHostVar(const std::string& n);
  bool lowerGradLet(const ast::Stmt& s, const ast::Expr& rhs, HostStmt& h);
  bool lowerBatchLet(const ast::Stmt& s, const ast::Expr& rhs, HostStmt& h);
  void lowerMain(const ast::Decl& d);
  void lowerHostBlock(const ast::Block& b, std::vector<HostStmt>& out);
  void lowerHostStmt(const ast::Stmt& s, std::vector<HostStmt>& out);
  bool lowerHostCallStmt(const ast::Expr& x, HostBuiltin b, HostStmt& h);
};

}  // namespace gsl::frontend::sema
