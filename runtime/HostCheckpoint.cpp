// How a rank's params and training state go to and from checkpoint files:
// read whole and sliced to the rank's blocks, or gathered a group of
// tensors at a time and written by rank 0.
#include "runtime/HostCheckpoint.h"

#include <filesystem>

#include "runtime/Checkpoint.h"
#include "runtime/Distribute.h"
#include "runtime/MpiComm.h"
#include "support/Trace.h"

namespace gsl::runtime {

using backend::Tensor;
using ir::Sharding;

std::vector<std::pair<size_t, size_t>> checkpointGroups(const std::vector<uint64_t>& bytes) {
  std::vector<std::pair<size_t, size_t>> r;
  for (size_t lo = 0; lo < bytes.size();) {
    size_t hi = lo + 1;
    uint64_t sum = bytes[lo];
    while (hi < bytes.size() && sum + bytes[hi] <= kCheckpointGroupBytes) sum += bytes[hi++];
    r.push_back({lo, hi});
    lo = hi;
  }
  return r;
}

void resumeFrom(RankModel& model, const std::string& path, bool mpi) {
  const ir::Module& m = model.prog.module();
  TrainingState& training = model.training;
  std::map<std::string, std::string> meta;
  const std::map<std::string, Tensor>* all = nullptr;
  try {
    all = &model.prog.resumed(path, meta);
  } catch (const CheckpointError& e) {
    std::error_code ec;
    if (mpi && !std::filesystem::exists(path, ec))  // docs/cluster.md: where --resume reads
      throw RankError({}, std::string(e.what()) + " on host " + MpiSession::hostName() +
                              " (--resume reads the checkpoint on every host: put it on a file system the hosts "
                              "share, or copy it to the same path on each host)");
    throw RankError({}, e.what());
  }
  for (const auto& p : m.params) {
    auto it = all->find(p.name);
    if (it == all->end()) throw RankError({}, path + ": the checkpoint has no param '" + p.name + "'");
    if (it->second.type() != p.type)
      throw RankError({}, path + ": param '" + p.name + "' is " + it->second.type().str() + " in the checkpoint but " +
                              p.type.str() + " in the program");
    model.params[p.name] = localBlock(m, it->second, p.sharding, model.rank);
  }
  for (const auto& [name, t] : *all) {
    if (name.rfind("optimizer/", 0) == 0) {
      std::string opt = name.substr(10, name.find('/', 10) - 10);
      if (!m.findOptimizer(opt))
        throw RankError({}, path + ": the checkpoint has states of optimizer '" + opt +
                                "', which the program does not declare");
      training.resumed[name] = t;
    } else if (!m.findParam(name)) {
      throw RankError({}, path + ": the checkpoint has a tensor '" + name + "' that is no param of the program");
    }
  }
  for (const auto& [k, v] : meta)
    if (k.rfind("step/", 0) == 0) {
      training.steps[k.substr(5)] = std::stoll(v);
      training.startStep = std::max<int64_t>(training.startStep, std::stoll(v));
    }
}

void loadParams(RankModel& model, const std::string& path, SourceLoc loc, bool mpi) {
  const ir::Module& m = model.prog.module();
  std::map<std::string, Tensor> all;
  try {
    for (auto& nt : readSafetensors(path, nullptr)) all[nt.name] = nt.value;
  } catch (const CheckpointError& e) {
    failReading(loc, e.what(), mpi);
  }
  for (const auto& p : m.params) {
    auto it = all.find(p.name);
    if (it == all.end()) throw RankError(loc, path + ": the checkpoint has no param '" + p.name + "'");
    if (it->second.type() != p.type)
      throw RankError(loc, path + ": param '" + p.name + "' is " + it->second.type().str() + " in the checkpoint but " +
                               p.type.str() + " in the program");
  }
  for (const auto& p : m.params) model.params[p.name] = localBlock(m, all.at(p.name), p.sharding, model.rank);
}

namespace {

// A checkpoint with optimizer states is not overwritten by one without
// them unless the program asked (optimizer=false): resuming from it would
// silently restart the optimizer.
void refuseDroppingStates(const std::string& path, SourceLoc loc, bool optimizer, bool hasStates) {
  if (hasStates || !optimizer) return;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return;
  size_t old = 0;
  try {
    for (const std::string& n : safetensorsNames(path)) old += n.rfind("optimizer/", 0) == 0;
  } catch (const CheckpointError&) {
    return;  // not a checkpoint we can read: nothing of ours to keep
  }
  if (old > 0)
    throw RankError(loc, path + " holds " + std::to_string(old) + " optimizer state" + (old == 1 ? "" : "s") +
                             " and this save would write none (no training step has run): not overwritten; "
                             "save_checkpoint(\"" + path + "\", optimizer=false) writes the params alone");
}

}  // namespace

void writeCheckpoint(RankModel& model, const std::string& path, SourceLoc loc, bool optimizer,
                     std::string* lastCheckpoint) {
  const ir::Module& m = model.prog.module();
  const TrainingState& training = model.training;
  const int rank = model.rank;
  std::vector<std::string> names;
  std::vector<Tensor> locals;
  std::vector<ir::TensorType> types;
  std::vector<std::optional<Sharding>> shardings;
  for (const auto& p : m.params) {
    names.push_back(p.name);
    locals.push_back(model.params.at(p.name));
    types.push_back(p.type);
    shardings.push_back(p.sharding);
  }
  std::map<std::string, std::string> meta{{"format", "gsl"}};
  std::vector<NamedTensor> whole;  // states --resume read that no step used: whole already
  if (optimizer) {
    for (const auto& [key, v] : training.states) {
      names.push_back(key);
      locals.push_back(v.local);
      // The whole type (a padded block does not say it).
      types.push_back(training.stateTypes.at(key));
      shardings.push_back(v.sharding);
    }
    for (const auto& [key, t] : training.resumed)
      if (!training.states.count(key)) whole.push_back({key, t});
    for (const auto& [opt, n] : training.steps) meta["step/" + opt] = std::to_string(n);
  }
  // Rank 0 writes the file while the ranks gather it a group of tensors
  // at a time (kCheckpointGroupBytes whole, or one larger tensor): a rank
  // holds one group whole at a time, not the whole model. Rank 0's first
  // failure (a refused overwrite, a write error, an interrupt) stops its
  // writing, not its gathers: every rank runs the same collectives, and
  // rank 0 reports it after the last.
  std::unique_ptr<SafetensorsWriter> writer;
  std::exception_ptr failure;
  auto onRank0 = [&](const auto& f) {
    if (rank != 0 || failure) return;
    try {
      f();
    } catch (...) {
      failure = std::current_exception();
      writer.reset();  // removes the temp file
    }
  };
  onRank0([&] {
    refuseDroppingStates(path, loc, optimizer, names.size() + whole.size() > m.params.size());
    std::vector<SafetensorsWriter::Entry> layout;
    for (size_t i = 0; i < names.size(); ++i) layout.push_back({names[i], types[i]});
    for (const auto& nt : whole) layout.push_back({nt.name, nt.value.type()});
    writer = std::make_unique<SafetensorsWriter>(path, std::move(layout), meta);
  });
  std::vector<uint64_t> sizes;
  for (const auto& t : types) sizes.push_back((uint64_t)t.byteSize());
  backend::releaseTensorPool();  // the steps' cached buffers: the groups take their place
  for (auto [lo, hi] : checkpointGroups(sizes)) {
    auto part = [&](const auto& v) { return std::vector(v.begin() + (std::ptrdiff_t)lo, v.begin() + (std::ptrdiff_t)hi); };
    const ir::Function& g = model.prog.programs().gatherProgram(part(names), part(types), part(shardings));
    std::vector<Tensor> gathered;
    {
      trace::Scope traced("function", g.name);
      gathered = model.engine->call(g, part(locals));
    }
    onRank0([&] {
      for (const Tensor& t : gathered) writer->put(t);
    });
    // The group's whole tensors go back to the system, not to the pool
    // (whose cached buffers would hold the whole checkpoint at the end).
    gathered.clear();
    backend::releaseTensorPool();
  }
  onRank0([&] {
    for (const auto& nt : whole) writer->put(nt.value);
    writer->commit();
  });
  if (rank != 0) return;  // the caller's barrier waits for rank 0's write
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const CheckpointError& e) {
      throw RankError(loc, e.what());
    }
  }
  if (lastCheckpoint) *lastCheckpoint = path;
}

}  // namespace gsl::runtime
