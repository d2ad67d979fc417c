#include "passes/ResolveGroups.h"

#include <map>
#include <memory>
#include <utility>

#include "support/Diagnostics.h"

namespace gsl::passes {

namespace {

using Tables = std::map<std::pair<std::string, std::vector<int64_t>>, std::shared_ptr<const ir::CollectiveGroups>>;

void resolveIn(const ir::Module& m, ir::Function& f, Tables& tables) {
  for (auto& op : f.ops) {
    if (op->body) resolveIn(m, *op->body, tables);
    if (op->info().cls != ir::OpClass::Collective) continue;
    const std::string& meshName = op->attrs.getString("mesh");
    const ir::Mesh* mesh = m.findMesh(meshName);
    GSL_ASSERT(mesh, "internal error: " + std::string(op->info().mnemonic) + " over unknown mesh '" + meshName + "'");
    auto key = std::make_pair(meshName, op->attrs.getInts("axes"));
    auto& t = tables[key];
    if (!t) t = std::make_shared<const ir::CollectiveGroups>(*mesh, key.second);
    op->groups = t;
  }
}

}  // namespace

void resolveGroups(const ir::Module& m, ir::Function& f) {
  Tables tables;
  resolveIn(m, f, tables);
}

}  // namespace gsl::passes
