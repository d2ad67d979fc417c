// An operation: kind (a row of the op table), operands, one result, attrs.
#pragma once
#include <vector>

#include "ir/Attr.h"
#include "ir/OpTable.h"
#include "ir/Value.h"
#include "support/SourceLoc.h"

namespace gsl::ir {

struct Op {
  OpKind kind;
  std::vector<Value*> operands;
  Value* result = nullptr;
  AttrMap attrs;
  SourceLoc loc;  // the source expression this op came from

  const OpInfo& info() const { return opInfo(kind); }
};

}  // namespace gsl::ir
