#pragma once
/// \file
/// The exceptions dimsum throws. Every run-time check of a dynamic extent,
/// an index or a file throws one of these, in release builds too.

#include <concepts>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace dimsum {

/// Base of every exception dimsum throws; `what()` starts with "dimsum: ".
struct error : std::runtime_error {
  explicit error(const std::string& message) : std::runtime_error("dimsum: " + message) {}
};

/// A dynamic extent disagrees with another extent of the same dim, an index
/// is out of range, or an extent is unusable (zero where forbidden, overflow).
/// The message names the dims and both extents.
struct shape_error : error {
  using error::error;
};

/// A `.npy` file could not be read or written: missing, malformed, wrong
/// dtype, wrong rank or order, truncated. The message names the file.
struct npy_error : error {
  using error::error;
};

namespace detail {
/// An index as a message shows it: a negative signed index as negative
/// ("-1"), and an unsigned one that wrapped below zero as what it was meant
/// to be, with its value ("-1 (18446744073709551615 as unsigned)").
template <std::integral I>
std::string index_string(I i) {
  if constexpr (std::is_unsigned_v<I>) {
    if (i > static_cast<std::make_unsigned_t<std::intmax_t>>(INTMAX_MAX))
      return std::to_string(static_cast<std::intmax_t>(i)) + " (" + std::to_string(i) + " as unsigned)";
  }
  return std::to_string(i);
}
}  // namespace detail

}  // namespace dimsum
