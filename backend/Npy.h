// Reading and writing NumPy .npy files (format versions 1.0-3.0 read, 1.0
// written): little-endian f32 ('<f4') and i32 ('<i4'), also '|b1' bool;
// C order only. Errors are user errors with a clear message (bad magic or
// header, unsupported dtype, Fortran order, truncated data, header larger
// than the file, missing file, directory, unwritable path).
#pragma once
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/Tensor.h"

namespace gsl::backend {

struct NpyError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Reads a whole .npy file. Throws NpyError("<path>: <what is wrong>").
// With `convertWide`, NumPy's default dtypes are read too: float64 ('<f8')
// rounded to f32 and int64 ('<i8') to i32; a finite value beyond f32's
// range or an integer outside i32's is an error naming its flat index.
Tensor readNpy(const std::string& path, bool convertWide = false);
// The layout of a .npy file without its data, for reading it in parts
// (runtime/Data.h reads a data set's rows): the dtype string as written
// ('<f8', '|u1', ...), the shape, and the byte offset where the C-order
// data starts. Checks what readNpy checks but the dtype (any is returned)
// and the data's size (the caller knows the item size): the file exists
// and is regular, the preamble and header are well formed, the order is
// C. Throws NpyError.
struct NpyLayout {
  std::string descr;
  std::vector<int64_t> shape;
  uint64_t elements = 0;    // the product of the shape
  uint64_t dataOffset = 0;  // where the data starts
  uint64_t dataBytes = 0;   // the bytes after it in the file
};
NpyLayout readNpyLayout(const std::string& path);

// Writes `t` atomically (temp file in the same folder + rename); a bf16
// tensor is written as f32 (.npy has no bf16; reading a bf16 file, such
// as ml_dtypes' 2-byte void, is an error).
// Throws NpyError on failure.
void writeNpy(const std::string& path, const Tensor& t);

}  // namespace gsl::backend
