// Reductions by name against loops.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "support.hpp"

namespace {
DIMSUM_DIM(a);
DIMSUM_DIM(b);
DIMSUM_DIM(c);
}  // namespace

using namespace dimsum;

TEST_CASE("reduce: sum, max, min, mean over one and several dims", "[reduce]") {
  tensor<double, a, b, c> t(a{2}, b{3}, c{4});
  test::fill_pattern(t);
  auto s = eval(sum<b>(t));
  auto mx = eval(max<c>(t));
  auto mn = eval(min<a>(t));
  auto me = eval(mean<a, c>(t));
  static_assert(has_dims<decltype(s), a, c>);
  static_assert(has_dims<decltype(mx), a, b>);
  static_assert(has_dims<decltype(mn), b, c>);
  static_assert(has_dims<decltype(me), b>);
  for (std::size_t x = 0; x < 2; ++x)
    for (std::size_t z = 0; z < 4; ++z) {
      double w = 0;
      for (std::size_t y = 0; y < 3; ++y) w += t(a{x}, b{y}, c{z});
      CHECK(s(a{x}, c{z}) == Approx(w));
    }
  for (std::size_t x = 0; x < 2; ++x)
    for (std::size_t y = 0; y < 3; ++y) {
      double w = -1e300;
      for (std::size_t z = 0; z < 4; ++z) w = std::max(w, t(a{x}, b{y}, c{z}));
      CHECK(mx(a{x}, b{y}) == w);
    }
  for (std::size_t y = 0; y < 3; ++y)
    for (std::size_t z = 0; z < 4; ++z) CHECK(mn(b{y}, c{z}) == std::min(t(a{0}, b{y}, c{z}), t(a{1}, b{y}, c{z})));
  for (std::size_t y = 0; y < 3; ++y) {
    double w = 0;
    for (std::size_t x = 0; x < 2; ++x)
      for (std::size_t z = 0; z < 4; ++z) w += t(a{x}, b{y}, c{z});
    CHECK(me(b{y}) == Approx(w / 8));
  }
  CHECK(eval(sum<a, b, c>(t)).item() == Approx(eval(sum<c>(sum<a, b>(t))).item()));
}

TEST_CASE("reduce: of a lazy expression, NaN propagation, empty dims", "[reduce]") {
  tensor<float, a, b> t(a{2}, b{2});
  t(a{0}, b{0}) = 1;
  t(a{0}, b{1}) = std::numeric_limits<float>::quiet_NaN();
  t(a{1}, b{0}) = -2;
  t(a{1}, b{1}) = 3;
  auto m = eval(max<b>(t * 2.0f));
  CHECK(std::isnan(m(a{0})));
  CHECK(m(a{1}) == 6.0f);
  tensor<float, a, b> e(a{2}, b{0});
  CHECK(test::flat(eval(sum<b>(e))) == std::vector<double>{0.0, 0.0});
  CHECK(std::isnan(eval(mean<b>(e))(a{0})));
  REQUIRE_THROWS_WITH(max<b>(e), Catch::Contains("'b'") && Catch::Contains("extent 0"));
  REQUIRE_THROWS_WITH(min<b>(e), Catch::Contains("'b'") && Catch::Contains("extent 0"));
}
