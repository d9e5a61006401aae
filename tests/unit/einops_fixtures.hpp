// Loading tests/reference/fixtures/einops (make_einops_fixtures.py: einops'
// rules written out with numpy and torch) and comparing with them.
#pragma once
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>

#include <dimsum/dimsum.hpp>

namespace einops_fixture {

template <class TT>
TT load(const std::string& name) {
  return dimsum::load_npy<TT>(std::string(DIMSUM_SOURCE_DIR) + "/tests/reference/fixtures/einops/" + name + ".npy");
}

// got and want: the same dims in the same order (so the same row-major
// layout); every element within tol.
template <class Got, class Want>
void expect_near(const Got& got_in, const Want& want, double tol = 1e-12) {
  static_assert(dimsum::dims_of_t<Got>::names == dimsum::dims_of_t<Want>::names, "the same dims in the same order");
  const auto got = dimsum::eval(got_in);
  REQUIRE(got.extents() == want.extents());
  double worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, std::abs(double(got.data()[i]) - double(want.data()[i])));
  INFO("worst abs error " << worst);
  CHECK(worst <= tol);
}

}  // namespace einops_fixture
