// Helpers shared by the unit tests: deterministic fills and flat copies.
#pragma once
#include <cstddef>
#include <vector>

#include <dimsum/dimsum.hpp>

namespace test {

// Fills a tensor with a deterministic, non-trivial pattern (row-major order).
template <class T>
void fill_pattern(T& t, double scale = 0.37, double offset = -1.3) {
  auto* p = t.data();
  for (std::size_t i = 0; i < t.size(); ++i)
    p[i] = static_cast<typename T::value_type>(offset + scale * double((i * 7919) % 23) + 0.01 * double(i % 5));
}

// The tensor's values in row-major order of its own dims.
template <class T>
std::vector<double> flat(const T& t) {
  return std::vector<double>(t.data(), t.data() + t.size());
}

}  // namespace test
