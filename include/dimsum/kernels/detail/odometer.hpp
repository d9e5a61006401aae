#pragma once
/// \file
/// The odometer the plain-loop kernels (reference.hpp, reduce.hpp) step
/// through their index spaces with.

#include <cstddef>

namespace dimsum::kernels::detail {
/// Advances the odometer idx over axes [first, last) (the last fastest);
/// false once it wraps around.
inline bool next_index(std::size_t* idx, const std::size_t* extents, std::size_t first, std::size_t last) {
  for (std::size_t l = last; l > first;) {
    --l;
    if (++idx[l] < extents[l]) return true;
    idx[l] = 0;
  }
  return false;
}
}  // namespace dimsum::kernels::detail
