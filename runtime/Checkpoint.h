// Checkpoints in the safetensors format (https://github.com/huggingface/safetensors):
//
//   bytes 0..8      N, the header length, a little-endian unsigned 64-bit integer
//   bytes 8..8+N    the header: UTF-8 JSON, padded with spaces to a multiple of 8
//   bytes 8+N..     the data section: every tensor's raw little-endian bytes
//
// The header maps each tensor name to
//   {"dtype":"F32"|"I32"|"BOOL","shape":[d0,d1,...],"data_offsets":[begin,end]}
// (offsets relative to the start of the data section), plus an optional
// "__metadata__" object mapping strings to strings. BOOL is one byte per
// element (0 or 1).
//
// Writing follows the reference implementation byte for byte where it is
// deterministic: compact JSON (no spaces), "__metadata__" first (omitted
// when the metadata is empty; keys in std::map order), then the tensors in
// the order given, with contiguous data in that same order, the header
// padded with spaces to a multiple of 8. (The reference sorts tensors by
// dtype and name; any order is valid safetensors.)
//
// Reading is as strict as the reference: the tensors must tile the data
// section exactly (no overlap, no gap, nothing after the last one), and
// every tensor's byte size must equal its dtype size times its element
// count. The header is parsed by a small strict JSON parser (objects,
// arrays, strings with escapes, integers; nesting depth at most 64) that
// reports malformed input as a CheckpointError, never crashes.
#pragma once
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/Tensor.h"
#include "support/Interrupt.h"

namespace gsl::runtime {

// Every read or write failure: "<path>: <what is wrong>", e.g.
//   "model.safetensors: truncated: tensor 'w1' needs bytes 1024..2048 but the data section has 1500"
struct CheckpointError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct NamedTensor {
  std::string name;
  backend::Tensor value;
};

// Writes `tensors` (f32, i32 or bool; any rank, scalars included) and
// `metadata` to `path`, atomically: the bytes go to "<path>.tmp.<pid>" in
// the same folder, are fsync'ed, and the file is renamed over `path` (then
// the folder is fsync'ed), so a crash leaves either the old file or the new
// one, never a truncated checkpoint. Throws CheckpointError when a name or
// metadata string is not valid UTF-8 or the file cannot be written (the
// temp file is removed). When an interrupt is requested during the write
// (support/Interrupt.h: Ctrl-C), the write is abandoned between pieces of
// at most 64 MiB, the temp file removed and gsl::Interrupted thrown; a file
// already at `path` is left as it was. Duplicate names, the name "__metadata__" and
// undefined tensors are caller bugs: internal error (abort).
void writeSafetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                      const std::map<std::string, std::string>& metadata);

// The same file written one tensor at a time (a checkpoint gathered piece
// by piece holds one piece whole at a time): the constructor checks the
// names and writes the header of `layout` to the temp file, put() writes
// the next tensor (of the layout's type), commit() makes the file (after
// the last put). Errors and interrupts as writeSafetensors; a writer
// destroyed uncommitted removes its temp file.
class SafetensorsWriter {
 public:
  struct Entry {
    std::string name;
    ir::TensorType type;
  };
  SafetensorsWriter(const std::string& path, std::vector<Entry> layout,
                    const std::map<std::string, std::string>& metadata);
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;
  void put(const backend::Tensor& t);
  void commit();

 private:
  void write(const char* data, size_t n);
  void abandon();
  std::string path_, tmp_;
  std::vector<Entry> layout_;
  size_t next_ = 0;
  int fd_ = -1;
  std::unique_ptr<TempFileGuard> guard_;
};

// Reads a whole safetensors file: the tensors in header order (bool as
// 0/1), and its "__metadata__" into *metadata when `metadata` is not null
// (cleared first; left empty when the file has none). Throws
// CheckpointError("<path>: ...") for a missing file, a directory, a file
// shorter than 8 bytes, a header length larger than the file (or than the
// reference's 100,000,000-byte limit), a header that is not UTF-8 or not
// well-formed JSON of the expected shape, a dtype other than F32/I32/BOOL,
// offsets inconsistent with dtype and shape, reversed, overlapping or
// leaving gaps, truncated data, and trailing bytes after the last tensor.
std::vector<NamedTensor> readSafetensors(const std::string& path,
                                         std::map<std::string, std::string>* metadata);

// The tensor names of a safetensors file, in header order, reading only its
// header (checked as readSafetensors checks it; the data is not read).
std::vector<std::string> safetensorsNames(const std::string& path);

}  // namespace gsl::runtime
