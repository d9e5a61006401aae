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

// prod, any, all, logsumexp against plain loops (logsumexp's loop in long
// double, without the maximum trick, on values where exp does not overflow).
TEST_CASE("reduce: prod, any, all, logsumexp over one and several dims against loops", "[reduce]") {
  tensor<double, a, b, c> t(a{2}, b{3}, c{4});
  test::fill_pattern(t, 0.21, -1.1);
  t(a{1}, b{2}, c{3}) = 0.0;  // one zero for any/all
  auto p = eval(prod<b>(t));
  auto an = eval(any<c>(t));
  auto al = eval(all<a, c>(t));
  auto l = eval(logsumexp<c, a>(t));
  static_assert(has_dims<decltype(p), a, c>);
  static_assert(has_dims<decltype(an), a, b> && std::is_same_v<value_type_of_t<decltype(an)>, bool>);
  static_assert(has_dims<decltype(al), b> && std::is_same_v<value_type_of_t<decltype(al)>, bool>);
  static_assert(has_dims<decltype(l), b> && std::is_same_v<value_type_of_t<decltype(l)>, double>);
  for (std::size_t x = 0; x < 2; ++x)
    for (std::size_t z = 0; z < 4; ++z) {
      double w = 1;
      for (std::size_t y = 0; y < 3; ++y) w *= t(a{x}, b{y}, c{z});
      CHECK(p(a{x}, c{z}) == Approx(w).epsilon(1e-15));
    }
  for (std::size_t x = 0; x < 2; ++x)
    for (std::size_t y = 0; y < 3; ++y) {
      bool w = false;
      for (std::size_t z = 0; z < 4; ++z) w = w || t(a{x}, b{y}, c{z}) != 0;
      CHECK(an(a{x}, b{y}) == w);
    }
  for (std::size_t y = 0; y < 3; ++y) {
    bool w = true;
    long double e = 0;
    for (std::size_t x = 0; x < 2; ++x)
      for (std::size_t z = 0; z < 4; ++z) {
        w = w && t(a{x}, b{y}, c{z}) != 0;
        e += std::exp(static_cast<long double>(t(a{x}, b{y}, c{z})));
      }
    CHECK(al(b{y}) == w);
    CHECK(l(b{y}) == Approx(double(std::log(e))).epsilon(1e-15));
  }
  CHECK(al(b{2}) == false);  // the zero at (1, 2, 3)
  CHECK(an(a{1}, b{2}) == true);
}

TEST_CASE("reduce: any and all of a bool expression, and over float with NaN", "[reduce]") {
  tensor<float, a, b> t(a{2}, b{3});
  test::fill_pattern(t);  // -1.3, ... : mixed signs
  t(a{0}, b{1}) = std::numeric_limits<float>::quiet_NaN();
  tensor<bool, a> has_nan = any<b>(isnan(t));
  tensor<bool, b> all_pos = all<a>(t > 0.0f);
  CHECK(has_nan(a{0}) == true);
  CHECK(has_nan(a{1}) == false);
  for (std::size_t y = 0; y < 3; ++y) {
    const bool want = t(a{0}, b{y}) > 0.0f && t(a{1}, b{y}) > 0.0f;
    CHECK(all_pos(b{y}) == want);
  }
  // NaN is nonzero (torch.any([0, nan]) and torch.all([1, nan]) are True).
  tensor<float, b> z(b{2});
  z(b{1}) = std::numeric_limits<float>::quiet_NaN();
  CHECK(eval(any<b>(z))() == true);
  z(b{0}) = 1.0f;
  CHECK(eval(all<b>(z))() == true);
}

TEST_CASE("reduce: logsumexp rows with -inf, +inf and NaN as torch.logsumexp", "[reduce]") {
  // Expected values: torch 1.13 (tests/reference/check_math_semantics.py), or
  // hand-computed (1000 + log 2; -1000 + log(1 + e^-0.5)).
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const double rows[][2] = {{-inf, -inf}, {inf, 1.0}, {inf, -inf}, {nan, 1.0}, {inf, nan}, {-inf, nan},
                            {1000.0, 1000.0}, {-1000.0, -1000.5}, {-inf, 0.0}};
  const double want[] = {-inf, inf, inf, nan, nan, nan, 1000.0 + std::log(2.0), -1000.0 + std::log1p(std::exp(-0.5)), 0.0};
  tensor<double, a, b> t(a{9}, b{2});
  for (std::size_t i = 0; i < 9; ++i)
    for (std::size_t j = 0; j < 2; ++j) t(a{i}, b{j}) = rows[i][j];
  auto l = eval(logsumexp<b>(t));
  for (std::size_t i = 0; i < 9; ++i) {
    INFO("row " << i);
    if (std::isnan(want[i]))
      CHECK(std::isnan(l(a{i})));
    else if (std::isinf(want[i]))
      CHECK(l(a{i}) == want[i]);
    else
      CHECK(l(a{i}) == Approx(want[i]).epsilon(1e-15));
  }
}

TEST_CASE("reduce: prod, any, all, logsumexp over an empty dim give 1, false, true, -inf", "[reduce]") {
  tensor<float, a, b> t(a{2}, b{0});
  auto p = eval(prod<b>(t));
  auto an = eval(any<b>(t));
  auto al = eval(all<b>(t));
  auto l = eval(logsumexp<b>(t));
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(p(a{i}) == 1.0f);
    CHECK(an(a{i}) == false);
    CHECK(al(a{i}) == true);
    CHECK(l(a{i}) == -std::numeric_limits<float>::infinity());
  }
  // An empty kept dim gives an empty result.
  tensor<float, a, b> e(a{0}, b{3});
  auto pe = eval(prod<b>(e));
  CHECK(extent<a>(pe) == 0);
}

TEST_CASE("reduce: the new reductions on a lazy strided operand, and reducing nothing", "[reduce]") {
  tensor<double, a, b> t(a{3}, b{4});
  test::fill_pattern(t);
  tensor<double, b, a> u(a{3}, b{4});
  test::fill_pattern(u, 0.11, 0.2);
  auto p = eval(prod<a>(t * u));  // element-wise operand, materialised first
  for (std::size_t j = 0; j < 4; ++j) {
    double w = 1;
    for (std::size_t i = 0; i < 3; ++i) w *= t(a{i}, b{j}) * u(b{j}, a{i});
    CHECK(p(b{j}) == Approx(w).epsilon(1e-15));
  }
  auto same = eval(prod<>(t));
  static_assert(has_dims<decltype(same), a, b>);
  CHECK(same(a{2}, b{3}) == t(a{2}, b{3}));
  auto all_of_everything = eval(logsumexp<a, b>(t));
  long double e = 0;
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 4; ++j) e += std::exp(static_cast<long double>(t(a{i}, b{j})));
  CHECK(all_of_everything() == Approx(double(std::log(e))).epsilon(1e-15));
}
