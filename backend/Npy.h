// Reading and writing NumPy .npy files (format versions 1.0-3.0 read, 1.0
// written): little-endian f32 ('<f4') and i32 ('<i4'), also '|b1' bool;
// C order only. Errors are user errors with a clear message (bad magic or
// header, unsupported dtype, Fortran order, truncated data, header larger
// than the file, missing file, directory, unwritable path).
#pragma once
#include <stdexcept>
#include <string>

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
// Writes `t` atomically (temp file in the same folder + rename).
// Throws NpyError on failure.
void writeNpy(const std::string& path, const Tensor& t);

}  // namespace gsl::backend
