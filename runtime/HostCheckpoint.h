// How a rank's params and training state go to and from checkpoint files
// (the safetensors of runtime/Checkpoint.h): --resume, load_checkpoint and
// save_checkpoint (also --checkpoint-every). Errors throw RankError.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/RankModel.h"
#include "support/SourceLoc.h"

namespace gsl::runtime {

// A checkpoint is gathered and written a group of consecutive tensors at a
// time: at most this many bytes whole per rank, or one larger tensor alone.
inline constexpr uint64_t kCheckpointGroupBytes = uint64_t(64) << 20;

// The checkpoint's groups (kCheckpointGroupBytes): [lo, hi) ranges of
// consecutive tensors of these whole sizes.
std::vector<std::pair<size_t, size_t>> checkpointGroups(const std::vector<uint64_t>& bytes);

// --resume `path`: every param of the program, the step counters and the
// optimizer states (kept whole until a step uses them) from the checkpoint
// (read once for all ranks of this process). `mpi`: the ranks are MPI
// processes (a checkpoint missing on a host says so).
void resumeFrom(RankModel& model, const std::string& path, bool mpi);

// load_checkpoint(path) at `loc`: every param of the program from the
// checkpoint (inference after training); optimizer states and step
// counters are not read, nor tensors of params the program does not
// declare.
void loadParams(RankModel& model, const std::string& path, SourceLoc loc, bool mpi);

// save_checkpoint(path) at `loc` (every rank takes part; rank 0 writes):
// params, optimizer states and step counters. The states are those of the
// steps run and those --resume read that no step has used yet (another
// optimizer's, or all of them when no step ran): a save never drops a
// state the run has. `optimizer` false (the program's save_checkpoint(path,
// optimizer=false)) writes the params only. `lastCheckpoint` (if set) gets
// the path once rank 0 wrote it.
void writeCheckpoint(RankModel& model, const std::string& path, SourceLoc loc, bool optimizer,
                     std::string* lastCheckpoint);

}  // namespace gsl::runtime
