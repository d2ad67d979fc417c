#include "runtime/Distribute.h"

#include <algorithm>
#include <cstring>

#include "backend/Kernels.h"
#include "support/Diagnostics.h"

namespace gsl::runtime {

using backend::Tensor;

Tensor localBlock(const ir::Module& m, const Tensor& global, const std::optional<ir::Sharding>& s, int rank) {
  if (!s || s->isReplicated()) return global;
  const ir::Mesh* mesh = m.findMesh(s->mesh);
  GSL_ASSERT(mesh, "localBlock: unknown mesh");
  ir::Shape local = ir::localShape(m, global.type(), s);
  int r = global.rank();
  std::vector<int64_t> offset(r, 0);
  for (int d = 0; d < r; ++d) {
    if (s->dims[d].empty()) continue;
    std::vector<int64_t> axes;
    for (const auto& a : s->dims[d]) axes.push_back(mesh->axisIndex(a));
    int index = 0;
    ir::collectiveGroup(*mesh, axes, rank, &index);
    offset[d] = index * local[d];
  }
  // One block of the whole (every split axis of size 1): the tensor itself.
  if (local == global.type().shape && std::all_of(offset.begin(), offset.end(), [](int64_t o) { return o == 0; }))
    return global;
  // Every element is written below (copied, or zero padding).
  Tensor out = Tensor::uninitialized(ir::TensorType{global.dtype(), local});
  if (out.size() == 0) return out;
  const ir::Shape& whole = global.type().shape;
  auto gs = global.strides();
  const int64_t eb = ir::dtypeBytes(global.dtype());  // bf16: 2 bytes
  const char* src = reinterpret_cast<const char*>(global.raw());
  char* dst = reinterpret_cast<char*>(out.raw());
  // Copy rows of the innermost dim; rows or row ends past the whole dim
  // (the padding of an uneven split, docs/sharding.md) are zeros.
  int64_t inner = r ? local[r - 1] : 1;
  int64_t innerKept = r ? std::clamp<int64_t>(whole[r - 1] - offset[r - 1], 0, inner) : 1;
  int64_t rows = out.size() / inner;
  std::vector<int64_t> idx(r, 0);
  for (int64_t row = 0; row < rows; ++row) {
    int64_t so = 0, rem = row;
    for (int d = r - 2; d >= 0; --d) {
      idx[d] = rem % local[d];
      rem /= local[d];
    }
    bool pad = false;
    for (int d = 0; d < r - 1; ++d) {
      pad |= idx[d] + offset[d] >= whole[d];
      so += (idx[d] + offset[d]) * gs[d];
    }
    if (r) so += offset[r - 1];
    int64_t kept = pad ? 0 : innerKept;
    if (kept) std::memcpy(dst + row * inner * eb, src + so * eb, kept * eb);
    if (kept < inner) std::memset(dst + (row * inner + kept) * eb, 0, (inner - kept) * eb);
  }
  return out;
}

}  // namespace gsl::runtime
