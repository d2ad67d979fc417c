// How a rank gets its block of a training batch: token batches made whole
// and sliced, npy_pairs rows and text_bytes windows read from the files,
// this rank's rows only.
#include "runtime/Batches.h"

#include <algorithm>

#include "backend/Npy.h"
#include "runtime/Distribute.h"
#include "runtime/HostWalk.h"
#include "runtime/SpmdProgram.h"
#include "support/Trace.h"

namespace gsl::runtime {

using backend::Tensor;
using ir::Sharding;

const frontend::Dataset& Batcher::dataset(const std::string& name) const {
  for (const auto& d : datasets_)
    if (d.name == name) return d;
  GSL_ASSERT(false, "unknown dataset " + name);
  return datasets_.front();
}

HostValue Batcher::batch(const frontend::HostLeaf& l, int64_t step) const {
  const frontend::Dataset* ds = &dataset(l.name);
  if (step < 0 && ds->kind == "pairs") throw RankError(l.loc, "supervised data: negative step " + std::to_string(step));
  if (step < 0 && ds->kind == "text") throw RankError(l.loc, "text data: negative step " + std::to_string(step));
  return HostValue(PendingBatch{ds, step, l.index, l.loc});
}

int64_t Batcher::validationBatches(const frontend::HostLeaf& l) {
  const frontend::Dataset& ds = dataset(l.name);
  const int64_t all = textData(ds).corpus->windows(true) / ds.batch;
  return l.limit > 0 ? std::min(l.limit, all) : all;
}

HostValue Batcher::validationBatch(const frontend::HostLeaf& l, int index, int64_t k) const {
  return HostValue(PendingBatch{&dataset(l.name), k, index, l.loc, true});
}

// A batch half of a token data set (synthetic or npy_tokens), whole.
Tensor Batcher::tokenBatch(const PendingBatch& p) {
  const frontend::Dataset* ds = p.ds;
  try {
    if (ds->kind == "npy") {
      auto it = npyTokens_.find(ds->path);
      if (it == npyTokens_.end()) {
        Tensor t;
        try {
          t = readTokenFile(ds->path, ds->vocab);
        } catch (const backend::NpyError& e) {
          failReading(ds->loc, e.what(), mpi_);
        } catch (const std::runtime_error& e) {
          throw RankError(ds->loc, e.what());
        }
        it = npyTokens_.emplace(ds->path, t).first;
      }
      auto b = npyTokenBatch(it->second, p.step, ds->batch, ds->seq);
      return p.index == 0 ? b.inputs : b.targets;
    }
    auto b = syntheticBatch(ds->kind, seed_, p.step, ds->batch, ds->seq, ds->vocab);
    return p.index == 0 ? b.inputs : b.targets;
  } catch (const RankError&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw RankError(p.loc, e.what());
  }
}

// An npy_pairs data set's files, opened (the headers read and checked)
// at its first batch.
Batcher::PairsData& Batcher::pairsData(const frontend::Dataset& ds) {
  auto it = pairs_.find(ds.name);
  if (it != pairs_.end()) return it->second;
  PairsData d;
  try {
    d.x = std::make_unique<NpyRows>(ds.path, false);
    d.y = std::make_unique<NpyRows>(ds.labelsPath, true);
  } catch (const backend::NpyError& e) {
    failReading(ds.loc, e.what(), mpi_);
  } catch (const std::runtime_error& e) {
    throw RankError(ds.loc, e.what());
  }
  if (d.x->shape().size() < 2 || d.x->rowElements() != ds.features)
    throw RankError(ds.loc, ds.path + ": npy_pairs needs inputs of N rows of " + std::to_string(ds.features) +
                                " values (features=" + std::to_string(ds.features) +
                                "; a row may have any shape), got shape " + ir::shapeStr(d.x->shape()));
  if (d.y->shape().size() != 1)
    throw RankError(ds.loc, ds.labelsPath + ": npy_pairs needs labels of shape [N], got shape " +
                                ir::shapeStr(d.y->shape()));
  if (d.x->rows() != d.y->rows())
    throw RankError(ds.loc, ds.path + " has " + std::to_string(d.x->rows()) + " rows but " + ds.labelsPath +
                                " has " + std::to_string(d.y->rows()) + " labels");
  try {
    d.order = std::make_unique<ShuffledOrder>(d.x->rows(), ds.batch, seed_);
  } catch (const std::runtime_error& e) {
    throw RankError(ds.loc, e.what());
  }
  return pairs_.emplace(ds.name, std::move(d)).first->second;
}

// A text_bytes data set's corpus, opened (every file read once to check
// it is text) at its first batch.
Batcher::TextData& Batcher::textData(const frontend::Dataset& ds) {
  auto it = texts_.find(ds.name);
  if (it != texts_.end()) return it->second;
  TextData d;
  try {
    d.corpus = std::make_unique<TextCorpus>(ds.paths, ds.seq, ds.split);
    d.corpus->requireWindows(ds.batch, false);
    if (ds.split < 1) d.corpus->requireWindows(ds.batch, true);
    d.order = std::make_unique<WindowOrder>(d.corpus->windows(false), ds.batch, seed_);
  } catch (const TextReadError& e) {
    failReading(ds.loc, e.what(), mpi_);
  } catch (const std::runtime_error& e) {
    throw RankError(ds.loc, e.what());
  }
  return texts_.emplace(ds.name, std::move(d)).first->second;
}

namespace {

// The rows (in batch order) of step `p.step`'s batch in `order` (a
// ShuffledOrder or a WindowOrder).
template <class Order>
std::vector<int64_t> stepRows(Order& order, const PendingBatch& p) {
  try {
    return order.batchRows(p.step);
  } catch (const std::runtime_error& e) {
    throw RankError(p.loc, e.what());
  }
}

void traceRead(trace::Scope& traced, const std::string& file, const PendingBatch& p, size_t rows, uint64_t bytes) {
  traced.arg("file", file);
  traced.arg("step", p.step);
  traced.arg("rows", (int64_t)rows);
  traced.arg("bytes", (int64_t)bytes);
  if (p.validation) traced.arg("validation", (int64_t)1);
}

}  // namespace

// The entries of `rows` (a batch's rows, in batch order) that this rank
// holds of a batch half lying as `s`: its block of the batch's row
// positions, so whatever localBlock's rule is, the rows agree with it.
std::vector<int64_t> Batcher::heldRows(std::vector<int64_t> rows, const std::optional<Sharding>& s) const {
  if (!s || s->isReplicated() || s->dims[0].empty()) return rows;
  Tensor pos(ir::TensorType{ir::DType::I32, {(int64_t)rows.size()}});
  for (size_t i = 0; i < rows.size(); ++i) pos.i32()[i] = (int32_t)i;
  Tensor mine = localBlock(mod_, pos, Sharding{s->mesh, {s->dims[0]}, {}}, rank_);
  std::vector<int64_t> held;
  for (int64_t i = 0; i < mine.size(); ++i) held.push_back(rows[(size_t)mine.i32()[i]]);
  return held;
}

// The block under `s` of `rows`, the batch rows this rank holds, read:
// the block of the other dims.
HostValue Batcher::otherDims(Tensor rows, const std::optional<Sharding>& s) const {
  if (s && !s->isReplicated()) {
    Sharding rest = *s;
    rest.dims[0].clear();
    if (!rest.isReplicated()) rows = localBlock(mod_, rows, rest, rank_);
  }
  return {rows, s};
}

// Reads a pending text_bytes batch half as this rank's block under `s`:
// the windows of the rows it holds, the inputs (a window's first seq
// bytes) or the targets (its last seq).
HostValue Batcher::readText(const PendingBatch& p, const std::optional<Sharding>& s) {
  const frontend::Dataset& ds = *p.ds;
  TextData& d = textData(ds);
  std::vector<int64_t> windows;
  if (p.validation)
    for (int64_t r = 0; r < ds.batch; ++r) windows.push_back(p.step * ds.batch + r);
  else
    windows = stepRows(*d.order, p);
  windows = heldRows(std::move(windows), s);
  Tensor block(ir::TensorType{ir::DType::I32, {(int64_t)windows.size(), ds.seq}});
  {
    trace::Scope traced("data", ds.name);
    const uint64_t before = d.corpus->bytesRead();
    try {
      for (size_t j = 0; j < windows.size(); ++j)
        d.corpus->read(d.corpus->windowStart(p.validation, windows[j]) + p.index, ds.seq,
                       block.i32() + (int64_t)j * ds.seq);
    } catch (const TextReadError& e) {
      failReading(ds.loc, e.what(), mpi_);
    }
    if (traced) traceRead(traced, ds.paths[0], p, windows.size(), d.corpus->bytesRead() - before);
  }
  return otherDims(block, s);
}

// Reads a pending batch half as this rank's block under `s`: the batch
// rows this rank holds, read from the file(s), then the block of the
// other dims.
HostValue Batcher::readBatch(const PendingBatch& p, const std::optional<Sharding>& s) {
  const frontend::Dataset& ds = *p.ds;
  if (ds.kind == "text") return readText(p, s);
  if (ds.kind != "pairs") return {localBlock(mod_, tokenBatch(p), s, rank_), s};
  PairsData& d = pairsData(ds);
  NpyRows& file = p.index == 0 ? *d.x : *d.y;
  std::vector<int64_t> rows = heldRows(stepRows(*d.order, p), s);
  ir::Shape shape{(int64_t)rows.size()};
  if (p.index == 0) shape.push_back(ds.features);
  Tensor block(ir::TensorType{p.index == 0 ? ir::DType::F32 : ir::DType::I32, shape});
  {
    trace::Scope traced("data", ds.name);
    const uint64_t before = file.bytesRead();
    try {
      file.read(rows, block.raw());
    } catch (const std::runtime_error& e) {
      throw RankError(ds.loc, e.what());
    }
    if (traced) traceRead(traced, p.index == 0 ? ds.path : ds.labelsPath, p, rows.size(), file.bytesRead() - before);
  }
  return otherDims(block, s);
}

void Batcher::readPending(const ir::Function& fn, std::vector<HostValue>& in) {
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i].pending) in[i] = readBatch(*in[i].pending, fn.wantedSharding(i));
}

}  // namespace gsl::runtime
