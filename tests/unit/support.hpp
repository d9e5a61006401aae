// Helpers shared by the unit tests: deterministic fills and flat copies.
#pragma once
#include <cmath>
#include <cstddef>
#include <random>
#include <type_traits>
#include <vector>

#include <catch2/catch.hpp>

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

// t with every element drawn uniformly from [-1, 1) by a generator seeded with seed.
template <class TT>
TT random_tensor(TT t, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (auto* x = t.data(); x != t.data() + t.size(); ++x) *x = static_cast<std::remove_reference_t<decltype(*x)>>(u(gen));
  return t;
}

/// Elements of got not within tol (1 + |want|) of want; NaN must meet NaN.
template <class A, class B>
std::size_t differ(const A& got, const B& want, double tol) {
  REQUIRE(got.size() == want.size());
  std::size_t bad = 0;
  for (std::size_t n = 0; n < want.size(); ++n) {
    const double g = got.data()[n], w = want.data()[n];
    if (std::isnan(w) ? !std::isnan(g) : !(std::abs(g - w) <= tol * (1 + std::abs(w)))) {
      if (bad < 5) UNSCOPED_INFO("at " << n << ": got " << g << ", want " << w);
      ++bad;
    }
  }
  return bad;
}

}  // namespace test
