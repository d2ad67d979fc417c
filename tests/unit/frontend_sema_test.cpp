// frontend/Sema's typed tables: host builtins and declaration kinds.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "frontend/AST.h"
#include "frontend/SemaImpl.h"

using namespace gsl::frontend;

TEST_CASE("sema: every host builtin reads back from its name, and nothing else is one") {
  std::set<std::string> names;
  for (int i = 0; i < (int)sema::HostBuiltin::Count; ++i) {
    auto b = (sema::HostBuiltin)i;
    std::string name = sema::hostBuiltinName(b);
    CHECK(names.insert(name).second);
    auto back = sema::hostBuiltin(name);
    REQUIRE(back.has_value());
    CHECK(*back == b);
  }
  CHECK(names == std::set<std::string>{"batch", "evaluate", "exists", "grad", "load", "load_checkpoint", "log_metric",
                                       "log_moe", "print", "print_text", "save", "save_checkpoint", "start_step"});
  CHECK(sema::hostBuiltinNames() == std::vector<std::string>(names.begin(), names.end()));  // alphabetical
  CHECK_FALSE(sema::hostBuiltin("matmul").has_value());  // an op-table builtin
  CHECK_FALSE(sema::hostBuiltin("Print").has_value());
  CHECK_FALSE(sema::hostBuiltin("").has_value());
}

TEST_CASE("sema: declaration kinds are named by their keyword") {
  using gsl::ast::DeclKind;
  CHECK(std::string(gsl::ast::declKindName(DeclKind::Import)) == "import");
  CHECK(std::string(gsl::ast::declKindName(DeclKind::Const)) == "const");
  CHECK(std::string(gsl::ast::declKindName(DeclKind::Mesh)) == "mesh");
  CHECK(std::string(gsl::ast::declKindName(DeclKind::Param)) == "param");
  CHECK(std::string(gsl::ast::declKindName(DeclKind::Fn)) == "fn");
  CHECK(std::string(gsl::ast::declKindName(DeclKind::Optimizer)) == "optimizer");
  CHECK(std::string(gsl::ast::declKindName(DeclKind::Dataset)) == "dataset");
}

TEST_CASE("sema: generic instances are keyed by shape parameters and argument types") {
  using gsl::ir::DType;
  sema::InstanceKey a{"f", {4}, {{DType::F32, {2, 4}}}};
  sema::InstanceKey b{"f", {4}, {{DType::F32, {2, 4}}}};
  CHECK(a == b);
  CHECK_FALSE(a < b);
  CHECK(a != sema::InstanceKey{"f", {8}, {{DType::F32, {2, 4}}}});
  CHECK(a != sema::InstanceKey{"f", {4}, {{DType::I32, {2, 4}}}});
  CHECK(a != sema::InstanceKey{"f", {4}, {{DType::F32, {4, 2}}}});
  CHECK(a != sema::InstanceKey{"g", {4}, {{DType::F32, {2, 4}}}});
}
