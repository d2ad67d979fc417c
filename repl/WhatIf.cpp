// :try, the what-if: another annotation on a param, a function argument
// or a let is written into a copy of the session's source text (imported
// files too: the user's files are never written), compiled, and its costs
// compared with the session's, for every function and the training step.
#include "repl/Session.h"

#include <filesystem>
#include <functional>
#include <set>

#include "frontend/AST.h"
#include "passes/CostModel.h"
#include "runtime/AutoSharding.h"
#include "repl/CallPaths.h"
#include "repl/Explain.h"
#include "repl/Lookup.h"
#include "repl/Text.h"

namespace gsl::repl {

namespace fs = std::filesystem;

void Session::tryAnnotation(const std::string& args) {
  size_t sp = args.find_first_of(" \t");
  std::string name = args.substr(0, sp);
  std::string annot = sp == std::string::npos ? "" : trim(args.substr(sp));
  if (!(startsWith(annot, "@shard") || startsWith(annot, "@replicate")) || annot.find('\n') != std::string::npos) {
    error("usage: :try NAME @shard(MESH, [...])  (NAME: a param, an argument, FN.ARG or FN.VALUE)");
    return;
  }
  Build* b = currentFor(name);
  if (!b) return;
  // Find the declaration: a param, or a function argument.
  // FN.NAME; of a call path (loss.logits.h), the last function and name:
  // the declaration is the one of that function, for every call of it.
  std::string fnName, argName = name;
  if (size_t dot = name.rfind('.'); dot != std::string::npos) {
    size_t from = dot == 0 ? std::string::npos : name.rfind('.', dot - 1);
    from = from == std::string::npos ? 0 : from + 1;
    fnName = name.substr(from, dot - from);
    argName = name.substr(dot + 1);
  }
  struct Hit {
    const ast::Decl* decl;
    const ast::TypeExpr* type;
    const ast::ShardAnnot* annot;
    int file;
    std::string what;
  };
  std::vector<Hit> hits;
  // A param-group member GROUP.MEMBER: its annotation gives one layer's
  // dims (the stacked dim 0 is never split).
  if (!fnName.empty() && b->prog->module->findParam(name))
    for (const auto& p : b->prog->asts)
      for (const auto& d : p->decls)
        if (d->kind == ast::DeclKind::ParamGroup && d->name == fnName)
          for (const auto& m : d->members)
            if (m->name == argName)
              hits.push_back({m.get(), m->type.get(), m->annot.get(), p->file,
                              "param-group member " + name + " (one layer's dims)"});
  for (const auto& p : b->prog->asts)
    for (const auto& d : p->decls) {
      if (!hits.empty()) break;
      if (fnName.empty() && d->kind == ast::DeclKind::Param && d->name == argName)
        hits.push_back({d.get(), d->type.get(), d->annot.get(), p->file, "param " + argName});
      if (d->kind == ast::DeclKind::Fn && d->name != "main" && (fnName.empty() || d->name == fnName))
        for (const auto& a : d->args)
          if (a.name == argName)
            hits.push_back({d.get(), a.type.get(), a.annot.get(), p->file, "argument " + argName + " of fn " + d->name});
    }
  if (hits.empty()) {
    tryOnLet(*b, name, fnName, argName, annot);
    return;
  }
  if (hits.size() > 1 && hits[0].what.rfind("param", 0) != 0) {
    std::string l;
    for (const auto& h : hits) l += (l.empty() ? "" : ", ") + h.decl->name + "." + argName;
    error("'" + name + "' is an argument of several functions: say which (" + l + ")");
    return;
  }
  const Hit& h = hits[0];
  std::string what = h.what;
  if (h.file != b->mainFile) what += ", declared in " + b->sm->name(h.file) + " (the what-if edits the session's copy)";
  std::string mainText = b->src.text, before;
  std::map<std::string, std::string> imports;
  std::string& text = editable(*b, h.file, mainText, imports);
  if (h.annot) {
    size_t s = offsetOf(text, h.annot->loc.line, h.annot->loc.col);
    size_t e = s == std::string::npos ? s : matchingClose(text, s, '(');
    if (e == std::string::npos) {
      error("cannot find the end of " + h.what + "'s annotation");
      return;
    }
    before = text.substr(s, e - s);
    text.replace(s, e - s, annot);
  } else {
    size_t s = offsetOf(text, h.type->loc.line, h.type->loc.col);
    if (s == std::string::npos) return;
    const size_t e = endOfType(text, s);
    if (e == std::string::npos) return;
    before = "replicated (no annotation)";
    text.insert(e, " " + annot);
  }
  whatIf(*b, mainText, imports, what + ": " + before + " -> " + annot + "   (a what-if: the session is unchanged)\n");
}

// :try FN.VALUE / VALUE where VALUE is a let of a tensor function: the
// let's expression gets the annotation as a constraint (`(EXPR) @shard(...)`),
// or its constraint is replaced when it has one.
void Session::tryOnLet(Build& b, const std::string& name, const std::string& fnName, const std::string& letName,
                       const std::string& annot) {
  struct LetHit {
    const ast::Decl* fn;
    const ast::Stmt* let;
    int file;
    bool inLoop;  // in the body of a `for`
  };
  std::vector<LetHit> hits;
  std::function<void(const ast::Decl&, const ast::Block&, int, bool)> scan =
      [&](const ast::Decl& d, const ast::Block& blk, int file, bool inLoop) {
        for (const auto& st : blk) {
          if (st->kind == ast::StmtKind::Let && st->names.size() == 1 && st->names[0] == letName && !st->exprs.empty())
            hits.push_back({&d, st.get(), file, inLoop});
          scan(d, st->body, file, inLoop || st->kind == ast::StmtKind::For);
          scan(d, st->elseBody, file, inLoop);
        }
      };
  for (const auto& p : b.prog->asts)
    for (const auto& d : p->decls)
      if (d->kind == ast::DeclKind::Fn && d->name != "main" && (fnName.empty() || d->name == fnName))
        scan(*d, d->body, p->file, false);
  if (hits.empty()) {
    error("no param, fn argument or let of a tensor function named '" + name + "'");
    return;
  }
  std::set<std::string> fns;  // by name: the list reads the same in every run
  for (const auto& h : hits) fns.insert(h.fn->name);
  if (fns.size() > 1) {
    std::string l;
    for (const auto& f : fns) l += (l.empty() ? "" : ", ") + f + "." + letName;
    error("'" + name + "' is a let of several functions: say which (" + l + ")");
    return;
  }
  if (hits.size() > 1) {
    error("fn " + hits[0].fn->name + " assigns '" + letName + "' with let more than once: :try cannot tell which");
    return;
  }
  const LetHit& h = hits[0];
  std::string what = "value " + letName + " of fn " + h.fn->name + (h.inLoop ? " (in a loop body: every iteration)" : "");
  std::string mainText = b.src.text, before;
  std::map<std::string, std::string> imports;
  std::string& text = editable(b, h.file, mainText, imports);
  if (h.file != b.mainFile) what += ", declared in " + b.sm->name(h.file) + " (the what-if edits the session's copy)";
  const ast::Expr& e = *h.let->exprs[0];
  if (e.kind == ast::ExprKind::Annot && e.annot) {
    size_t s = offsetOf(text, e.annot->loc.line, e.annot->loc.col);
    size_t end = s == std::string::npos ? s : matchingClose(text, s, '(');
    if (end == std::string::npos) {
      error("cannot find the end of " + what + "'s annotation");
      return;
    }
    before = text.substr(s, end - s);
    text.replace(s, end - s, annot);
  } else {
    // The expression: from after the let's `=` to the end of the statement
    // (a newline, `;` or `}` outside brackets and strings).
    size_t s = offsetOf(text, h.let->nameLocs.empty() ? h.let->loc.line : h.let->nameLocs[0].line,
                        h.let->nameLocs.empty() ? h.let->loc.col : h.let->nameLocs[0].col);
    if (s != std::string::npos) s = text.find('=', s);
    if (s == std::string::npos) {
      error("cannot find the expression of " + what);
      return;
    }
    ++s;
    while (s < text.size() && (text[s] == ' ' || text[s] == '\t')) ++s;
    size_t end = s;
    int depth = 0;
    bool str = false;
    for (; end < text.size(); ++end) {
      char c = text[end];
      if (str) {
        str = c != '"';
        continue;
      }
      if (c == '"') str = true;
      else if (c == '(' || c == '[' || c == '{') ++depth;
      else if (c == ')' || c == ']' || c == '}') {
        if (depth == 0) break;
        --depth;
      } else if (depth == 0 && (c == '\n' || c == ';')) break;
    }
    while (end > s && (text[end - 1] == ' ' || text[end - 1] == '\t' || text[end - 1] == '\r')) --end;
    if (end <= s) {
      error("cannot find the expression of " + what);
      return;
    }
    ir::Function* f = b.prog->module->findFunction(h.fn->name);
    before = "no annotation";
    if (f) {
      auto c = propagated(*b.prog->module, *f);
      auto vals = valuesNamed(*c, letName);
      for (const auto& lv : loopValuesNamed(*c, letName)) vals.push_back(lv.value);
      if (!vals.empty())
        before = "propagated " + (vals[0]->sharding ? vals[0]->sharding->str() : std::string("replicated")) +
                 " (no annotation)";
    }
    text.replace(s, end - s, "(" + text.substr(s, end - s) + ") " + annot);
  }
  whatIf(b, mainText, imports, what + ": " + before + " -> " + annot + "   (a what-if: the session is unchanged)\n");
}

void Session::whatIf(const Build& b, const std::string& text, const std::map<std::string, std::string>& importTexts,
                     const std::string& head) {
  Assembled a = b.src;
  a.text = text;
  auto after = compile(a, importTexts);
  if (!after->ok()) {
    after->printDiagnostics(out_);
    return;
  }
  // The training step, with the same edit: the step's text has the
  // session's declarations at the same offsets (a blanked fn main keeps
  // its length), so the edited region [p, old end) carries over.
  const Build* sb = nullptr;
  const Step* st = step(&sb);
  std::unique_ptr<Build> stepAfterBuild;
  std::unique_ptr<Step> stAfter;
  if (st) {
    const Build* sa = after.get();
    if (sb != &b) {
      const std::string& was = b.src.text;
      Assembled s2 = sb->src;
      if (was != text) {
        size_t p = 0, q = 0;
        while (p < was.size() && p < text.size() && was[p] == text[p]) ++p;
        while (q < was.size() - p && q < text.size() - p && was[was.size() - 1 - q] == text[text.size() - 1 - q]) ++q;
        s2.text.replace(p, was.size() - q - p, text.substr(p, text.size() - q - p));
      }
      stepAfterBuild = compile(s2, importTexts);
      sa = stepAfterBuild->ok() ? stepAfterBuild.get() : nullptr;
    }
    if (sa) stAfter = findStep(*sa);
  }
  out_ << head;
  const ir::Module& m0 = *b.prog->module;
  const ir::Module& m1 = *after->prog->module;
  int unchanged = 0;
  auto compare = [&](const std::string& title, const ir::Module& mod0, const ir::Function& l0, const ir::Module& mod1,
                     const ir::Function& l1) {
    passes::Cost c0 = passes::estimateCost(mod0, l0, machine_), c1 = passes::estimateCost(mod1, l1, machine_);
    if (passes::costJson(c0) == passes::costJson(c1)) ++unchanged;
    else out_ << title << ", per rank (np = " << mod0.np << "):\n" << costTable({&c0, &c1}, {"before", "after"});
  };
  int shown = 0;
  for (const auto& fname : b.prog->userFunctions) {
    ir::Function* f0 = m0.findFunction(fname);
    ir::Function* f1 = m1.findFunction(fname);
    if (!f0 || !f1) continue;
    compare("fn " + fname, m0, *perRank(m0, *f0), m1, *perRank(m1, *f1));
    ++shown;
  }
  if (st && stAfter) {
    compare(stepTitle(*sb, *st), *sb->prog->module, *st->perRank, stAfter->programs->module(), *stAfter->perRank);
    ++shown;
  }
  if (unchanged == shown) out_ << "(no cost changed: " << shown << (shown == 1 ? " function" : " functions") << ")\n";
  else if (unchanged > 0)
    out_ << "(" << unchanged << " other " << (unchanged == 1 ? "function" : "functions") << " unchanged)\n";
  out_ << machine_.describe();
}

std::string& Session::editable(const Build& b, int file, std::string& mainText,
                               std::map<std::string, std::string>& importTexts) const {
  if (file == b.mainFile) return mainText;
  std::error_code ec;
  std::string key = fs::weakly_canonical(b.sm->name(file), ec).string();
  auto it = importTexts.find(key);
  if (it == importTexts.end()) it = importTexts.emplace(key, b.sm->text(file)).first;
  return it->second;
}

// :auto [FN]: the search of `gsl plan` on the loaded file as read (its fn
// main included; declarations typed in the session are not part of it),
// with the session's -np and consts, and the session's machine model.
void Session::autoPlan(const std::string& fn) {
  if (file_.empty()) {
    error(":auto searches a loaded file's annotations: :load FILE first");
    return;
  }
  runtime::PlanSearchOptions o;
  o.file = file_;
  o.text = fileSource_;
  o.only = fn;
  o.frontend.np = np_;
  o.frontend.defines = defines_;
  o.frontend.importPath = frontend::defaultImportPath();
  o.machine = machine_;
  if (!fn.empty()) {
    bool found = false;
    for (const auto& p : current() ? current()->prog->userFunctions : std::vector<std::string>{}) found |= p == fn;
    if (!found) {
      error("no tensor function '" + fn + "' in " + file_);
      return;
    }
  }
  const runtime::PlanResult r = runtime::searchPlan(o);
  if (!r.ok) {
    error(r.error);
    return;
  }
  runtime::printPlan(r, o, out_, false);
}

}  // namespace gsl::repl
