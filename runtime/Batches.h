// How a rank gets its block of a training batch, and what a host value is
// on a rank. `batch(data, step)` makes nothing yet: its two halves stay
// pending until a thunk takes them, and then only the block this rank
// holds as that thunk wants it (wantedSharding) is made; for npy_pairs
// and text_bytes only those rows are read from the files.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/Tensor.h"
#include "frontend/Frontend.h"
#include "ir/Module.h"
#include "runtime/Data.h"

namespace gsl::runtime {

// One half of a batch not made yet.
struct PendingBatch {
  const frontend::Dataset* ds = nullptr;
  int64_t step = 0;
  int index = 0;  // 0 inputs, 1 labels (targets)
  SourceLoc loc;  // the batch(...) call
  bool validation = false;  // text_bytes: batch `step` of the validation part (evaluate), in order
};

// A host value on one rank: its block, how it lies, or a batch half that
// is not made yet.
struct HostValue {
  backend::Tensor local;
  std::optional<ir::Sharding> sharding;
  std::optional<PendingBatch> pending;  // set: `local` is not made yet

  HostValue() = default;
  HostValue(backend::Tensor l, std::optional<ir::Sharding> s) : local(std::move(l)), sharding(std::move(s)) {}
  explicit HostValue(const PendingBatch& p) : pending(p) {}
};

// One rank's data sets: the files it opened and the token arrays it read,
// kept for the next batches. Errors throw RankError (runtime/SpmdProgram.h).
class Batcher {
 public:
  // `mpi`: the ranks are MPI processes (a file that cannot be read names its host).
  Batcher(const ir::Module& m, const std::vector<frontend::Dataset>& datasets, uint64_t seed, int rank, bool mpi)
      : mod_(m), datasets_(datasets), seed_(seed), rank_(rank), mpi_(mpi) {}

  // batch(data, step) (`l`, its step evaluated): one half, pending.
  HostValue batch(const frontend::HostLeaf& l, int64_t step) const;

  // evaluate(loss, data) (leaf `l`): how many validation batches it takes
  // (at most `l`'s batches= when given), and half `index` of batch k,
  // pending.
  int64_t validationBatches(const frontend::HostLeaf& l);
  HostValue validationBatch(const frontend::HostLeaf& l, int index, int64_t k) const;

  // The inputs of a thunk as its function `fn` takes them: pending batch
  // halves read as it wants them.
  void readPending(const ir::Function& fn, std::vector<HostValue>& in);

 private:
  // npy_pairs data sets by name: their two files (this rank's own reader
  // of each) and the shuffled order.
  struct PairsData {
    std::unique_ptr<NpyRows> x, y;
    std::unique_ptr<ShuffledOrder> order;
  };

  const ir::Module& mod_;
  const std::vector<frontend::Dataset>& datasets_;
  uint64_t seed_;
  int rank_;
  bool mpi_;
  std::map<std::string, backend::Tensor> npyTokens_;  // npy_tokens arrays by path
  std::map<std::string, PairsData> pairs_;
  // text_bytes data sets by name: the corpus (this rank's reader) and the
  // training windows' order.
  struct TextData {
    std::unique_ptr<TextCorpus> corpus;
    std::unique_ptr<WindowOrder> order;
  };
  std::map<std::string, TextData> texts_;

  backend::Tensor tokenBatch(const PendingBatch& p);
  PairsData& pairsData(const frontend::Dataset& ds);
  TextData& textData(const frontend::Dataset& ds);
  const frontend::Dataset& dataset(const std::string& name) const;
  HostValue readBatch(const PendingBatch& p, const std::optional<ir::Sharding>& s);
  HostValue readText(const PendingBatch& p, const std::optional<ir::Sharding>& s);
  std::vector<int64_t> heldRows(std::vector<int64_t> rows, const std::optional<ir::Sharding>& s) const;
  HostValue otherDims(backend::Tensor rows, const std::optional<ir::Sharding>& s) const;
};

}  // namespace gsl::runtime
