// gsl_surface_names: prints the names GSL's own tables give the surface
// language, one `KIND NAME` a line, for editors/tests/lists_test.sh to
// compare with the editors' word lists:
//   builtin   the builtin of each op-table row that has one (ir/OpTable.cpp)
//   host      the host-script builtins (frontend/Sema.cpp kHostBuiltins)
//   init      the param initialisers (frontend/Sema.cpp kInitializers)
//   wordop    the operators spelled as words (and or not), and
//   operator  the symbolic ones (+ // ** == ...), from frontend/Operators.cpp
#include <cctype>
#include <iostream>
#include <string>

#include "frontend/Operators.h"
#include "frontend/SemaImpl.h"
#include "ir/OpTable.h"

int main() {
  using namespace gsl;
  for (const auto& op : ir::allOps())
    if (op.builtin) std::cout << "builtin " << op.builtin << "\n";
  for (const auto& h : frontend::sema::hostBuiltinNames()) std::cout << "host " << h << "\n";
  for (const auto& i : frontend::sema::kInitializers) std::cout << "init " << i << "\n";
  auto op = [](const std::string& s) {
    std::cout << (std::isalpha((unsigned char)s[0]) ? "wordop " : "operator ") << s << "\n";
  };
  for (const auto& b : ast::allBinaryOps()) op(b.spelling);
  for (const auto& u : ast::allUnaryOps()) op(u.spelling);
  return 0;
}
