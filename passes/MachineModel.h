// The machine the cost model predicts seconds for: the rates `gsl calibrate`
// measures on this machine (runtime/Calibrate), or, when it has not been run,
// a fixed default. The cost model (passes/CostModel) turns an op's FLOPs,
// bytes moved and bytes sent into seconds with it:
//   matmul, einsum   FLOPs / the GEMM rate of its shape class (gemmClassOf)
//   other ops        max(FLOPs / elementwise rate, bytes read and written /
//                    cache or memory bandwidth), plus the per-op overhead
//   a function       the ops above, plus the overhead of one call
//   collectives      per call: latency + bytes one rank sends / bandwidth,
//                    per kind, for the transport in use (threads or MPI)
// The default model is the REPL's old fixed one: every FLOP at 100 GFLOP/s,
// bytes moved and op overhead not counted, every collective call 5 us plus
// its bytes at 10 GB/s; its predictions are those figures exactly.
//
// Stored as JSON, `machine.json` beside the compile cache (ObjectCache's
// directory: $XDG_CACHE_HOME/gsl, else ~/.cache/gsl), one section per
// transport; docs/cost-model.md describes the file.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "ir/OpTable.h"

namespace gsl::passes {

// GEMM shape classes, by the m, n, k of one product (batch dims apart):
//   Large   every one of m, n, k at least 256
//   Skinny  the smallest of them from 32 to 255 (a step's M = B·S rows of a
//           small batch, the K of a weight gradient over few rows)
//   Small   the smallest below 32 (attention's per-head products)
enum class GemmClass { Large, Skinny, Small };
constexpr int kGemmClasses = 3;
const char* gemmClassName(GemmClass c);
GemmClass gemmClassOf(int64_t m, int64_t n, int64_t k);

// One collective kind on one transport.
struct LinkModel {
  double latencyS = 5e-6;      // a call's fixed cost
  double bytesPerS = 10e9;     // bytes one rank sends, per second
};

struct MachineModel {
  // "default" or "calibrated"
  std::string source = "default";
  std::string cpu;      // lscpu's model name, when calibrated
  std::string date;     // when it was calibrated (UTC, ISO 8601)
  std::string transport = "threads";  // the collectives' section in use
  int64_t ranks = 0;    // how many ranks the collectives were measured on
  std::array<double, kGemmClasses> gemmFlopsPerS{100e9, 100e9, 100e9};
  double elementwiseFlopsPerS = 100e9;
  double memoryBytesPerS = 0;  // 0: bytes moved are not counted
  // An op that reads and writes at most kCacheBytes in all moves them at
  // cacheBytesPerS (the caches), a larger one at memoryBytesPerS.
  static constexpr uint64_t kCacheBytes = 1 << 20;
  double cacheBytesPerS = 0;
  double opOverheadS = 0;    // each op the JIT runs
  double callOverheadS = 0;  // each call of a function from fn main (host script, batch, optimizer step)
  LinkModel defaultLink;                 // a kind the section does not list
  ir::OpKindMap<LinkModel> collectives;  // by kind, for `transport`

  bool calibrated() const { return source == "calibrated"; }
  const LinkModel& link(ir::OpKind k) const;
  // Seconds of one call of collective `k` sending `bytes` (one rank).
  double collectiveSeconds(ir::OpKind k, uint64_t calls, uint64_t bytes) const;
  // "machine model: ..." for :cost and :try (one line, newline-terminated).
  std::string describe() const;
};

const MachineModel& defaultMachineModel();

// The machine file in compile-cache directory `dir`: dir + "/machine.json".
std::string machineModelPath(const std::string& dir);
// The directory the machine file is read from and written to:
// $GSL_MACHINE_DIR when set (the tests set it, so that a machine someone
// calibrated does not change their expected text), else `cacheDir`.
std::string machineModelDir(const std::string& cacheDir);

// The model for `transport` ("threads" or "mpi") from the machine file in
// `dir`: the default when the file does not exist (or `dir` is empty);
// the default with `error` set when it cannot be read or has no section
// for `transport`.
MachineModel loadMachineModel(const std::string& dir, const std::string& transport, std::string* error = nullptr);

// The JSON of the file: the machine's rates and one section per transport
// (`into` holds the file's other sections, kept as they are).
nlohmann::ordered_json machineModelJson(const MachineModel& m, nlohmann::ordered_json into = nullptr);
// Writes `j` to the machine file in `dir` (the directory made if needed;
// written to a temporary file and renamed, so a reader never sees half a
// file). Returns "" or an error message.
std::string saveMachineModelJson(const std::string& dir, const nlohmann::ordered_json& j);

}  // namespace gsl::passes
