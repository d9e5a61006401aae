// Golden tests: compare dimsum results with the PyTorch fixtures written by
// tests/reference/make_fixtures.py (atol 1e-5, rtol 1e-4; NaN matches NaN,
// infinities match exactly).
#pragma once
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include <dimsum/dimsum.hpp>
#include <dimsum/io/npy.hpp>

namespace golden {

inline std::string fixture(const std::string& name) {
  return std::string(DIMSUM_SOURCE_DIR) + "/tests/reference/fixtures/" + name;
}

/// Loads a fixture as the tensor type TT (its dims give the file's axes).
template <class TT>
TT load(const std::string& name) {
  return dimsum::load_npy<TT>(fixture(name));
}

/// Checks every element of `got` against the fixture, read in got's dims order.
template <dimsum::named_expression E>
void check(const E& got_expr, const std::string& name, double atol = 1e-5, double rtol = 1e-4) {
  auto got = dimsum::eval(got_expr);
  auto want = dimsum::load_npy<decltype(got)>(fixture(name));
  INFO("fixture " << name << " " << dimsum::shape_string(got));
  REQUIRE(got.extents() == want.extents());
  std::size_t bad = 0, first_bad = 0;
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = double(got.data()[i]), w = double(want.data()[i]);
    bool ok;
    if (std::isnan(w))
      ok = std::isnan(g);
    else if (std::isinf(w))
      ok = g == w;
    else {
      const double e = std::abs(g - w);
      worst = std::max(worst, e);
      ok = e <= atol + rtol * std::abs(w);
    }
    if (!ok && bad++ == 0) first_bad = i;
  }
  INFO("worst abs error " << worst << ", first bad element " << first_bad);
  CHECK(bad == 0);
}

}  // namespace golden
