// ops/repeat.hpp: repeat(x, new_dim{n}...) against plain loops (einops
// `repeat(x, "n d -> b n d", b=4)`), as a lazy broadcasting view inside
// element-wise trees, with static dims and size-1 and empty repeats.
#include <catch2/catch.hpp>

#include "support.hpp"

namespace {
DIMSUM_DIM(batch);
DIMSUM_DIM(posn);
DIMSUM_DIM(feat);
DIMSUM_DIM(head, 2);
}  // namespace

using namespace dimsum;

TEST_CASE("repeat: a new leading dim, each slice equal to x", "[repeat]") {
  tensor<float, posn, feat> x(posn{3}, feat{5});
  test::fill_pattern(x);
  auto r = eval(repeat(x, batch{4}));
  static_assert(has_dims<decltype(r), batch, posn, feat>);
  CHECK(extent<batch>(r) == 4);
  for (std::size_t b = 0; b < 4; ++b)
    for (std::size_t p = 0; p < 3; ++p)
      for (std::size_t f = 0; f < 5; ++f) CHECK(r(batch{b}, posn{p}, feat{f}) == x(posn{p}, feat{f}));
}

TEST_CASE("repeat: several dims, a static one, assigned in another order", "[repeat]") {
  tensor<double, feat> x(feat{3});
  test::fill_pattern(x);
  tensor<double, feat, head, batch> r = repeat(x, batch{2}, head{});
  static_assert(has_dims<decltype(repeat(x, batch{2}, head{})), batch, head, feat>);
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t h = 0; h < 2; ++h)
      for (std::size_t f = 0; f < 3; ++f) CHECK(r(feat{f}, head{h}, batch{b}) == x(feat{f}));
  CHECK_THROWS_AS(repeat(x, head{3}), shape_error);  // head is static with extent 2
}

TEST_CASE("repeat: a lazy view inside element-wise trees and of a lazy operand", "[repeat]") {
  tensor<float, posn, feat> b(posn{3}, feat{4});
  tensor<float, batch, posn, feat> x(batch{2}, posn{3}, feat{4});
  test::fill_pattern(b, 0.2, 0.1);
  test::fill_pattern(x);
  tensor<float, batch, posn, feat> y = repeat(b * 2.0f, batch{2}) - x;
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t p = 0; p < 3; ++p)
      for (std::size_t f = 0; f < 4; ++f)
        CHECK(y(batch{i}, posn{p}, feat{f}) == b(posn{p}, feat{f}) * 2.0f - x(batch{i}, posn{p}, feat{f}));
  // Extents are checked by name against the other operand.
  CHECK_THROWS_AS(repeat(b, batch{3}) + x, shape_error);
  // A reduction of the repeat: summing over the new dim multiplies by its extent.
  auto s = eval(sum<batch>(repeat(b, batch{5})));
  CHECK(s(posn{1}, feat{2}) == Approx(5.0f * b(posn{1}, feat{2})));
}

TEST_CASE("repeat: a size-1 repeat and an empty one", "[repeat]") {
  tensor<float, feat> x(feat{3});
  test::fill_pattern(x);
  auto one = eval(repeat(x, batch{1}));
  CHECK(one(batch{0}, feat{2}) == x(feat{2}));
  auto none = eval(repeat(x, batch{0}));
  CHECK(extent<batch>(none) == 0);
  CHECK(none.size() == 0);
}
