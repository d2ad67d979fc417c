#include "passes/Autocast.h"

#include <memory>
#include <vector>

#include "ir/Function.h"
#include "support/Diagnostics.h"

namespace gsl::passes {

namespace {

bool contraction(const ir::Op& op) {
  if (op.kind != ir::OpKind::MatMul && op.kind != ir::OpKind::Einsum) return false;
  if (op.result->type.dtype != ir::DType::F32) return false;
  for (const ir::Value* v : op.operands)
    if (v->type.dtype != ir::DType::F32) return false;
  return true;
}

// The op f.append just created, taken off the end of f.ops.
std::unique_ptr<ir::Op> takeLast(ir::Function& f) {
  std::unique_ptr<ir::Op> op = std::move(f.ops.back());
  f.ops.pop_back();
  return op;
}

void rewrite(ir::Function& f, ir::DType dt) {
  std::vector<std::unique_ptr<ir::Op>> old = std::move(f.ops);
  f.ops.clear();
  std::vector<std::unique_ptr<ir::Op>> out;
  out.reserve(old.size());
  for (auto& op : old) {
    if (op->body) rewrite(*op->body, dt);
    if (!contraction(*op)) {
      out.push_back(std::move(op));
      continue;
    }
    ir::AttrMap to;
    to.set("dtype", dt);
    std::vector<ir::Value*> low;
    for (ir::Value* v : op->operands) {
      ir::TensorType t = v->type;
      t.dtype = dt;
      low.push_back(f.append(ir::OpKind::Cast, {v}, to, t, op->loc)->result);
      out.push_back(takeLast(f));
    }
    ir::TensorType rt = op->result->type;
    rt.dtype = dt;
    f.append(op->kind, low, op->attrs, rt, op->loc);
    ir::Value* m = f.ops.back()->result;
    out.push_back(takeLast(f));
    // The original op becomes the cast back to f32 (same result value).
    op->kind = ir::OpKind::Cast;
    op->operands = {m};
    op->attrs = ir::AttrMap();
    op->attrs.set("dtype", ir::DType::F32);
    out.push_back(std::move(op));
  }
  f.ops = std::move(out);
}

}  // namespace

void autocast(ir::Module& m, ir::DType dt) {
  GSL_ASSERT(dt == ir::DType::BF16, "internal error: autocast to a dtype other than bf16");
  for (auto& f : m.functions) {
    rewrite(*f, dt);
    f->renumber();
  }
}

}  // namespace gsl::passes
