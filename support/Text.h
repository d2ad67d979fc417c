// Small text helpers shared by the file readers.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace gsl {

// Shows untrusted text safely in a message: printable ASCII kept, other
// bytes as \xNN, at most `max` bytes ("..." when cut).
std::string excerpt(std::string_view s, size_t max = 60);

// The shortest text that reads back to `v` ("%.*g" with the fewest digits
// that round-trip), for a value named in a message.
std::string shortest(double v);

}  // namespace gsl
