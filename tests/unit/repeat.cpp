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

// --- repeat<"pattern">: einops' repeat, against make_einops_fixtures.py ---

#include "einops_fixtures.hpp"

namespace {
DIMSUM_DIM(n);
DIMSUM_DIM(d);
DIMSUM_DIM(h);
DIMSUM_DIM(w);
DIMSUM_DIM(r);
DIMSUM_DIM(c);
DIMSUM_DIM(hh);
DIMSUM_DIM(ww);
DIMSUM_DIM(one, 1);
}  // namespace

using einops_fixture::expect_near;
using einops_fixture::load;

TEST_CASE("repeat pattern: a new axis anywhere, as a view of the tensor", "[repeat][pattern]") {
  auto x = load<tensor<double, n, d>>("repeat_new_axis_x");
  auto r3 = repeat<"n d -> batch n d">(x, batch{2});
  // A broadcasting view: stride 0 along the new dim, nothing copied.
  static_assert(std::is_same_v<decltype(r3), tensor_view<const double, batch, n, d>>);
  CHECK(r3.strides()[0] == 0);
  CHECK(r3.data() == x.data());
  expect_near(r3, load<tensor<double, batch, n, d>>("repeat_new_axis_out"), 0);
  expect_near(repeat<"n d -> n d c">(x, c{5}), load<tensor<double, n, d, c>>("repeat_trailing_out"), 0);
  // A lazy operand gives a lazy node, assigned by name.
  auto lazy = repeat<"n d -> n d c">(x * 1.0, c{5});
  static_assert(!std::is_same_v<decltype(lazy), tensor_view<const double, n, d, c>>);
  expect_near(lazy, load<tensor<double, n, d, c>>("repeat_trailing_out"), 0);
  x(n{0}, d{0}) = 42;  // the view reads the tensor
  CHECK(r3(batch{1}, n{0}, d{0}) == 42);
}

TEST_CASE("repeat pattern: tiling inside a group, and each element repeated", "[repeat][pattern]") {
  const auto x = load<tensor<double, h, w>>("repeat_tile_x");
  expect_near(repeat<"h w -> hh(r h) w">(x, r{3}), load<tensor<double, hh, w>>("repeat_tile_out"), 0);
  expect_near(repeat<"h w -> hh(h r) w">(x, r{2}), load<tensor<double, hh, w>>("repeat_interleave_out"), 0);
  expect_near(repeat<"h w -> h ww(r w)">(x, r{2}), load<tensor<double, h, ww>>("repeat_tile_w_out"), 0);
  // Inside a larger element-wise expression, by name.
  tensor<double, hh, w> twice = repeat<"h w -> hh(r h) w">(x, r{3}) * 2.0;
  const auto want = load<tensor<double, hh, w>>("repeat_tile_out");
  for (std::size_t i = 0; i < 12; ++i) CHECK(twice(hh{i}, w{1}) == 2.0 * want(hh{i}, w{1}));
}

TEST_CASE("repeat pattern: size-1 axes in and out", "[repeat][pattern]") {
  // () n d -> batch n d: the size-1 axis is dropped and b added in its place.
  const auto x = load<tensor<double, one, n, d>>("repeat_unit_x");
  expect_near(repeat<"() n d -> batch n d">(x, batch{4}), load<tensor<double, batch, n, d>>("repeat_unit_out"), 0);
  // A repeat of extent 1, and size-1 axes around a repeat.
  const auto y = load<tensor<double, h, w>>("repeat_size1_x");
  expect_near(repeat<"h w -> 1 h ww(w r) 1">(y, r{2}), load<tensor<double, unit_axis<0>, h, ww, unit_axis<3>>>("repeat_size1_out"), 0);
  auto same = eval(repeat<"h w -> h w r">(y, r{1}));
  for (std::size_t i = 0; i < 2; ++i) CHECK(same(h{i}, w{2}, r{0}) == y(h{i}, w{2}));
  // A `1` over a dim of extent other than 1 is a shape_error (dynamic dims).
  const auto z = load<tensor<double, n, d>>("repeat_new_axis_x");
  CHECK_THROWS_WITH((repeat<"1 d -> batch d">(z, batch{2})), Catch::Contains("'n'") && Catch::Contains("size-1"));
}

TEST_CASE("repeat pattern: a size-1 dim the pattern drops comes back as a new dim (torch's expand)", "[repeat][pattern]") {
  // einops repeat(x, "1 n d -> b n d", b=4) on x of shape (1, n, d) whose
  // size-1 dim is itself named batch: the pattern drops it (`1`, `()` or
  // `batch()`), so batch is a new dim with the extent given. Plain loops.
  tensor<double, batch, posn, feat> x(batch{1}, posn{2}, feat{3});
  test::fill_pattern(x);
  auto check = [&](const auto& r) {
    static_assert(has_dims<std::remove_cvref_t<decltype(r)>, batch, posn, feat>);
    REQUIRE(extent<batch>(r) == 4);
    for (std::size_t b = 0; b < 4; ++b)
      for (std::size_t p = 0; p < 2; ++p)
        for (std::size_t f = 0; f < 3; ++f) CHECK(r(batch{b}, posn{p}, feat{f}) == x(batch{0}, posn{p}, feat{f}));
  };
  check(eval(repeat<"1 posn feat -> batch posn feat">(x, batch{4})));
  check(eval(repeat<"() posn feat -> batch posn feat">(x, batch{4})));
  check(eval(repeat<"batch() posn feat -> batch posn feat">(x, batch{4})));
  // batch must still be of extent 1 to be dropped.
  tensor<double, batch, posn, feat> two(batch{2}, posn{2}, feat{3});
  CHECK_THROWS_WITH((repeat<"1 posn feat -> batch posn feat">(two, batch{4})),
                    Catch::Contains("'batch'") && Catch::Contains("size-1"));
}

TEST_CASE("repeat pattern: with ... and empty extents", "[repeat][pattern]") {
  const auto x = load<tensor<double, n, d>>("repeat_new_axis_x");
  auto y = repeat<"... d -> ... r d">(x, r{3});
  static_assert(has_dims<decltype(y), n, r, d>);
  CHECK(y(n{3}, r{2}, d{1}) == x(n{3}, d{1}));
  auto none = eval(repeat<"n d -> batch n d">(x, batch{0}));
  CHECK(none.size() == 0);
  tensor<double, n, d> e(n{0}, d{3});
  CHECK(eval(repeat<"n d -> hh(r n) d">(e, r{4})).size() == 0);
}
