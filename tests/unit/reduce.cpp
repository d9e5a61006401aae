// Reductions by name against loops.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
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

TEST_CASE("reduce: max and min of integer tensors start from the type's extremes", "[reduce]") {
  // Rows of negatives only (max must not be 0) and positives only (min must
  // not be 0), and the int64 extremes themselves; hand-computed.
  tensor<std::int64_t, a, b> t(a{3}, b{3});
  const std::int64_t lo = std::numeric_limits<std::int64_t>::min(), hi = std::numeric_limits<std::int64_t>::max();
  const std::int64_t v[3][3] = {{-3, -5, -1}, {4, 2, 7}, {lo, hi, 0}};
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 3; ++j) t(a{i}, b{j}) = v[i][j];
  CHECK(test::flat(eval(max<b>(t))) == std::vector<double>{-1.0, 7.0, double(hi)});
  CHECK(test::flat(eval(min<b>(t))) == std::vector<double>{-5.0, 2.0, double(lo)});
  auto m = eval(max<b>(t));
  CHECK(m(a{2}) == hi);
  CHECK(eval(min<b>(t))(a{2}) == lo);
  tensor<int, a, b> small(a{1}, b{2});
  small(a{0}, b{0}) = -7;
  small(a{0}, b{1}) = -9;
  CHECK(eval(reduce<"a b -> a", "max">(small))(a{0}) == -7);
  small(a{0}, b{0}) = 7;
  small(a{0}, b{1}) = 9;
  CHECK(eval(reduce<"a b -> a", "min">(small))(a{0}) == 7);
}

TEST_CASE("reduce: sums and products of bools and narrow integers are int64", "[reduce]") {
  // torch.sum / torch.prod of bool, uint8, int32 give int64; hand-computed.
  tensor<std::uint8_t, a, b> img(a{2}, b{3});
  const std::uint8_t px[6] = {200, 255, 201, 0, 3, 1};
  for (std::size_t i = 0; i < 6; ++i) img.data()[i] = px[i];
  auto s = eval(sum<b>(img));
  static_assert(std::is_same_v<value_type_of_t<decltype(s)>, std::int64_t>);
  CHECK(test::flat(s) == std::vector<double>{656.0, 4.0});
  CHECK(test::flat(eval(reduce<"a b -> b", "sum">(img))) == std::vector<double>{200.0, 258.0, 202.0});
  auto p = eval(prod<b>(img));
  static_assert(std::is_same_v<value_type_of_t<decltype(p)>, std::int64_t>);
  CHECK(test::flat(p) == std::vector<double>{200.0 * 255 * 201, 0.0});
  tensor<std::int32_t, a> big(a{3});
  big.fill(std::int32_t{2000000000});
  CHECK(eval(sum<a>(big))() == std::int64_t{6000000000});
  tensor<std::int32_t, a> two(a{2});
  two.fill(std::int32_t{100000});
  CHECK(eval(reduce<"a -> ", "prod">(two))() == std::int64_t{10000000000});
}

TEST_CASE("reduce: int64 sums and products past int64's range wrap around as torch's, never UB", "[reduce]") {
  // Values from torch 2: torch.sum(int64 [[2**62, 2**62, 2**62+5], [1, 2, 3]], dim=1),
  // torch.prod(int64 [2**40+1, 2**30+3, -3]), torch.prod(int32 [2**31-1] * 3) (an int64).
  tensor<std::int64_t, a, b> s(a{2}, b{3});
  const std::int64_t big = std::int64_t{1} << 62;
  const std::int64_t sv[6] = {big, big, big + 5, 1, 2, 3};
  for (std::size_t i = 0; i < 6; ++i) s.data()[i] = sv[i];
  auto rows = eval(sum<b>(s));
  CHECK(rows(a{0}) == std::int64_t{-4611686018427387899});
  CHECK(rows(a{1}) == 6);
  CHECK(eval(reduce<"a b -> a", "sum">(s))(a{0}) == std::int64_t{-4611686018427387899});
  tensor<std::int64_t, c> p(c{3});
  p(c{0}) = (std::int64_t{1} << 40) + 1;
  p(c{1}) = (std::int64_t{1} << 30) + 3;
  p(c{2}) = -3;
  CHECK(eval(prod<c>(p))() == std::int64_t{-9898825875465});
  tensor<std::int32_t, c> q(c{3});
  q.fill(std::numeric_limits<std::int32_t>::max());
  CHECK(eval(prod<c>(q))() == std::int64_t{4611686024869838847});
}

TEST_CASE("reduce: a sum of bools counts in int64, a mean of integers is a double", "[reduce]") {
  // torch.sum of a bool tensor is an int64 count; numpy's mean of integers
  // is float64 (hand-computed: (-3 - 5 - 1) / 3 = -3, (4 + 2 + 7) / 3).
  tensor<int, a, b> t(a{2}, b{3});
  const int v[2][3] = {{-3, -5, -1}, {4, 2, 7}};
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 3; ++j) t(a{i}, b{j}) = v[i][j];
  auto count = eval(sum<b>(t > 0));
  static_assert(std::is_same_v<value_type_of_t<decltype(count)>, std::int64_t>);
  CHECK(test::flat(count) == std::vector<double>{0.0, 3.0});
  CHECK(test::flat(eval(reduce<"a b -> b", "sum">(t < 3))) == std::vector<double>{1.0, 2.0, 1.0});
  auto m = eval(mean<b>(t));
  static_assert(std::is_same_v<value_type_of_t<decltype(m)>, double>);
  CHECK(test::flat(m) == std::vector<double>{-3.0, 13.0 / 3.0});
  CHECK(test::flat(eval(reduce<"a b -> b", "mean">(t))) == std::vector<double>{0.5, -1.5, 3.0});
  CHECK(eval(mean<a, b>(t > 0))() == 0.5);
  tensor<int, a, b> empty(a{2}, b{0});  // was an integer division by zero
  auto me = eval(mean<b>(empty));
  CHECK(std::isnan(me(a{0})));
  CHECK(std::isnan(me(a{1})));
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

// --- reduce<"pattern", op>: einops' reduce, against make_einops_fixtures.py ---

#include "einops_fixtures.hpp"

namespace {
DIMSUM_DIM(h);
DIMSUM_DIM(w);
DIMSUM_DIM(h2);
DIMSUM_DIM(w2);
DIMSUM_DIM(n);
DIMSUM_DIM(d);
}  // namespace

using einops_fixture::expect_near;
using einops_fixture::load;

TEST_CASE("reduce: a fold visits each position's elements in row-major order of the reduced dims", "[reduce][pattern]") {
  // acc * 10 + v is not commutative: the result spells the visiting order.
  // Reduced dims (c, a) listed against the operand's order, on a transposed
  // view; plain loops give the expected digits.
  tensor<double, a, b, c> t(a{2}, b{3}, c{3});
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 3; ++j)
      for (std::size_t k = 0; k < 3; ++k) t(a{i}, b{j}, c{k}) = double((i + 2 * j + k) % 10);
  const auto tv = reorder<dim_list<c, b, a>>(t);
  auto digits = eval(reduce<"c b a -> b">(tv, fold{[](double acc, double v) { return acc * 10 + v; }, 0.0}));
  for (std::size_t j = 0; j < 3; ++j) {
    double want = 0;
    for (std::size_t k = 0; k < 3; ++k)
      for (std::size_t i = 0; i < 2; ++i) want = want * 10 + t(a{i}, b{j}, c{k});
    CHECK(digits(b{j}) == want);
  }
  // any stops at the first nonzero; the next position must still start at
  // its own first element.
  tensor<double, a, b, c> z(a{2}, b{3}, c{3});
  z(a{0}, b{0}, c{0}) = 1;
  z(a{1}, b{2}, c{2}) = 1;
  CHECK(test::flat(eval(any<a, c>(z))) == std::vector<double>{1, 0, 1});
  CHECK(test::flat(eval(all<c, a>(z == 0.0))) == std::vector<double>{0, 1, 0});
}

TEST_CASE("reduce pattern: 2x3 max pooling by split groups", "[reduce][pattern]") {
  // Group labels named like the dims they split are new dims: (h h2) splits
  // the operand's h into a new h and h2.
  const auto x = load<tensor<double, b, h, w, c>>("maxpool_x");
  auto pooled = reduce<"b (h h2) (w w2) c -> b h w c", "max">(x, h2{2}, w2{3});
  static_assert(has_dims<decltype(pooled), b, h, w, c>);
  expect_near(pooled, load<tensor<double, b, h, w, c>>("maxpool_out"), 0);
  // The other label of a group may be the given one.
  expect_near(reduce<"b (h h2) (w w2) c -> b h w c", "max">(x, h{2}, w{2}), load<tensor<double, b, h, w, c>>("maxpool_out"), 0);
  // A group that does not divide: shape_error naming the dim.
  CHECK_THROWS_WITH((reduce<"b (h h2) (w w2) c -> b h w c", "max">(x, h2{3}, w2{3})),
                    Catch::Contains("'h'") && Catch::Contains("not a multiple"));
}

TEST_CASE("reduce pattern: `1` for a reduced axis broadcasts as PyTorch's keepdim", "[reduce][pattern]") {
  const auto x = load<tensor<double, b, c, h, w>>("mean_keepdims_x");
  auto m = eval(reduce<"b c h w -> b c 1 1", "mean">(x));
  // A `1` (or `()`) in reduce's output adds no dim: names broadcast, so the
  // result needs none where PyTorch keeps a size-1 axis.
  static_assert(std::is_same_v<dims_of_t<decltype(m)>, dim_list<b, c>>);
  CHECK(m.extents() == std::array<std::size_t, 2>{2, 3});
  // PyTorch's shape, (b, c, 1, 1), is a rearrange away.
  expect_near(rearrange<"b c -> b c 1 1">(m), load<tensor<double, b, c, unit_axis<2>, unit_axis<3>>>("mean_keepdims_out"),
              1e-15);
  CHECK(test::flat(eval(reduce<"b c h w -> b () c 1", "mean">(x))) == test::flat(m));
  // einops' normalisation, x - x.mean((2, 3), keepdim=True): x's dims.
  auto centred = eval(x - reduce<"b c h w -> b c 1 1", "mean">(x));
  static_assert(std::is_same_v<dims_of_t<decltype(centred)>, dims_of_t<decltype(x)>>);
  const auto e = x.extents();
  REQUIRE(centred.extents() == e);
  for (std::size_t i = 0; i < e[0]; ++i)
    for (std::size_t j = 0; j < e[1]; ++j) {
      double mean = 0;
      for (std::size_t k = 0; k < e[2]; ++k)
        for (std::size_t l = 0; l < e[3]; ++l) mean += x(b{i}, c{j}, h{k}, w{l});
      mean /= double(e[2] * e[3]);
      // The kernel sums in its own order (vector lanes, then across them),
      // so the mean differs from this loop's by a few ulps of x; the
      // difference x - mean can be small, so the bound is absolute.
      for (std::size_t k = 0; k < e[2]; ++k)
        for (std::size_t l = 0; l < e[3]; ++l)
          CHECK(centred(b{i}, c{j}, h{k}, w{l}) == Approx(x(b{i}, c{j}, h{k}, w{l}) - mean).epsilon(1e-14).margin(1e-14));
    }
  // A named size-1 axis: `h()` keeps the name h with extent 1.
  auto named = eval(reduce<"b c h w -> b c h() w()", "mean">(x));
  static_assert(has_dims<decltype(named), b, c, h, w>);
  CHECK(named.extents() == std::array<std::size_t, 4>{2, 3, 1, 1});
  CHECK(test::flat(named) == test::flat(m));
  // A static dim kept as h() has extent 1: its name stays, with extent 1.
  using h4 = dim<"h4", 4>;
  const auto s4 = tensor<double, b, h4>::random_normal(3, b{2});
  auto kept = eval(reduce<"b h4 -> b h4()", "sum">(s4));
  static_assert(dims_of_t<decltype(kept)>::names[1] == "h4" && dims_of_t<decltype(kept)>::static_extents[1] == 1);
  CHECK(kept(b{1}, dim<"h4", 1>{0}) == Approx(s4(b{1}, h4{0}) + s4(b{1}, h4{1}) + s4(b{1}, h4{2}) + s4(b{1}, h4{3})));
}

TEST_CASE("reduce pattern: a length passed for a dim the input has is checked", "[reduce][pattern]") {
  const auto y = tensor<double, b, n, d>::random_normal(21, b{2}, n{4}, d{3});
  REQUIRE_THROWS_WITH((reduce<"b (n n2) d -> b nd(n d)", "max">(y, dim<"n2">{2}, d{5})),
                      Catch::Contains("'d' was passed with extent 5") && Catch::Contains("operand 0 has extent 3"));
  auto r = eval(reduce<"b (n n2) d -> b nd(n d)", "max">(y, dim<"n2">{2}, d{3}));
  static_assert(has_dims<decltype(r), b, dim<"nd">>);
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t k = 0; k < 2; ++k)
      for (std::size_t l = 0; l < 3; ++l)
        CHECK(r(b{i}, dim<"nd">{k * 3 + l}) == std::max(y(b{i}, n{2 * k}, d{l}), y(b{i}, n{2 * k + 1}, d{l})));
}

TEST_CASE("reduce pattern: ... on the left alone is reduced; zero dims matched", "[reduce][pattern]") {
  const auto x = load<tensor<double, a, b, w>>("sum_ellipsis_left_x");
  expect_near(reduce<"... w -> w", "sum">(x), load<tensor<double, w>>("sum_ellipsis_left_out"), 1e-14);
  // On both sides, `...` keeps its dims; matching no dim, it is nothing.
  auto kept = eval(reduce<"a ... w -> ... a", "sum">(x));
  static_assert(has_dims<decltype(kept), b, a>);
  CHECK(kept(b{1}, a{0}) == Approx(x(a{0}, b{1}, w{0}) + x(a{0}, b{1}, w{1}) + x(a{0}, b{1}, w{2}) + x(a{0}, b{1}, w{3})));
  const auto v = load<tensor<double, w>>("sum_ellipsis_left_out");
  auto same = eval(reduce<"... w -> ... w", "max">(v));
  CHECK(test::flat(same) == test::flat(v));
}

TEST_CASE("reduce pattern: prod, logsumexp, min, any, all", "[reduce][pattern]") {
  const auto x = load<tensor<double, b, n>>("prod_group_x");
  expect_near(reduce<"b (n n2) -> n b", "prod">(x, dim<"n2">{2}), load<tensor<double, n, b>>("prod_group_out"), 1e-15);
  const auto y = load<tensor<double, b, n, d>>("logsumexp_x");
  expect_near(reduce<"b n d -> b d", "logsumexp">(y), load<tensor<double, b, d>>("logsumexp_out"), 1e-14);
  expect_near(reduce<"b n d -> b d", "min">(y), load<tensor<double, b, d>>("min_out"), 0);
  const auto t = load<tensor<bool, b, n>>("any_x");
  expect_near(reduce<"b n -> b", "any">(t), load<tensor<bool, b>>("any_out"), 0);
  expect_near(reduce<"b n -> b", "all">(t), load<tensor<bool, b>>("all_out"), 0);
}

TEST_CASE("reduce pattern: a user's associative operation as a fold", "[reduce][pattern]") {
  const auto x = load<tensor<double, b, n, d>>("fold_absmax_x");
  auto absmax = reduce<"b n d -> d b">(x, fold{[](double acc, double v) { return std::max(acc, std::abs(v)); }, 0.0});
  expect_near(absmax, load<tensor<double, d, b>>("fold_absmax_out"), 0);
  // The identity's type is the result's; an empty dim gives the identity.
  tensor<float, b, n> e(b{2}, n{0});
  auto count = eval(reduce<"b n -> b">(e, fold{[](int acc, float) { return acc + 1; }, 7}));
  static_assert(std::is_same_v<value_type_of_t<decltype(count)>, int>);
  CHECK(count(b{1}) == 7);
}

TEST_CASE("reduce pattern: a list of tensors as the operand, lazy and in the output's order", "[reduce][pattern]") {
  std::vector<tensor<double, h, w>> parts;
  for (int i = 0; i < 5; ++i) parts.push_back(load<tensor<double, h, w>>("list_part" + std::to_string(i)));
  // The first label names the list's dim.
  auto m = eval(reduce<"n h w -> w h", "mean">(parts));
  static_assert(has_dims<decltype(m), w, h>);
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 4; ++j) {
      double want = 0;
      for (const auto& p : parts) want += p(h{i}, w{j});
      CHECK(m(w{j}, h{i}) == Approx(want / 5).epsilon(1e-14));
    }
  // max over an empty dim has no identity: shape_error, as in PyTorch.
  tensor<double, h, w> empty(h{2}, w{0});
  CHECK_THROWS_AS((reduce<"h w -> h", "max">(empty)), shape_error);
}

TEST_CASE("reduce: float sums and means over contiguous rows and down contiguous columns against loops",
          "[reduce][vectorised]") {
  // Lengths with whole vectors of four accumulators, single vectors and a
  // scalar tail (AVX-512 holds 16 floats); the reference is a double loop.
  for (std::size_t n : {1u, 7u, 16u, 37u, 70u}) {
    tensor<float, a, b, c> t(a{3}, b{5}, c{n});
    for (std::size_t i = 0; i < t.size(); ++i) t.data()[i] = float(std::sin(0.37 * double(i)) * 3.0 + 0.25);
    const auto rows = eval(sum<c>(t));           // each output element: one contiguous row
    const auto means = eval(mean<b, c>(t));      // rows of 5 n elements
    const auto cols = eval(sum<a>(t));           // (b, c) accumulated down a
    const auto col_means = eval(mean<a, b>(t));  // (c) accumulated down a and b
    for (std::size_t x = 0; x < 3; ++x)
      for (std::size_t y = 0; y < 5; ++y) {
        double w = 0;
        for (std::size_t z = 0; z < n; ++z) w += t(a{x}, b{y}, c{z});
        CHECK(std::abs(rows(a{x}, b{y}) - w) <= 1e-5 * (1 + std::abs(w)));
      }
    for (std::size_t x = 0; x < 3; ++x) {
      double w = 0;
      for (std::size_t y = 0; y < 5; ++y)
        for (std::size_t z = 0; z < n; ++z) w += t(a{x}, b{y}, c{z});
      CHECK(std::abs(means(a{x}) - w / double(5 * n)) <= 1e-6 * (1 + std::abs(w)));
    }
    for (std::size_t y = 0; y < 5; ++y)
      for (std::size_t z = 0; z < n; ++z) {
        double w = 0;
        for (std::size_t x = 0; x < 3; ++x) w += t(a{x}, b{y}, c{z});
        CHECK(std::abs(cols(b{y}, c{z}) - w) <= 1e-5 * (1 + std::abs(w)));
      }
    for (std::size_t z = 0; z < n; ++z) {
      double w = 0;
      for (std::size_t x = 0; x < 3; ++x)
        for (std::size_t y = 0; y < 5; ++y) w += t(a{x}, b{y}, c{z});
      CHECK(std::abs(col_means(c{z}) - w / 15.0) <= 1e-6 * (1 + std::abs(w)));
    }
  }
  // NaN and infinity propagate through both paths.
  tensor<float, a, c> u(a{2}, c{20});
  u.fill(1.0f);
  u(a{0}, c{3}) = std::numeric_limits<float>::quiet_NaN();
  u(a{1}, c{19}) = std::numeric_limits<float>::infinity();
  const auto r = eval(sum<c>(u));
  CHECK(std::isnan(r(a{0})));
  CHECK(r(a{1}) == std::numeric_limits<float>::infinity());
  const auto k = eval(sum<a>(u));
  CHECK(std::isnan(k(c{3})));
  CHECK(k(c{19}) == std::numeric_limits<float>::infinity());
  CHECK(k(c{0}) == 2.0f);
}

TEST_CASE("reduce: a float sum down a million rows stays within 1e-6 of the double sum", "[reduce][vectorised]") {
  // The columns path (a bias gradient over batch and positions) sums rows
  // in blocks with compensation; one running sum per column drifted to
  // about 2e-5 here.
  const std::size_t rows = std::size_t(1) << 20, cols = 16;
  tensor<float, a, b> t(a{rows}, b{cols});
  std::uint32_t state = 12345;
  for (std::size_t i = 0; i < t.size(); ++i) {
    state = state * 1664525u + 1013904223u;
    t.data()[i] = float(state >> 8) / float(1u << 24);  // [0, 1)
  }
  std::vector<double> want(cols, 0.0);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) want[c] += t.data()[r * cols + c];
  const auto got = eval(sum<a>(t));
  const auto means = eval(mean<a>(t));
  for (std::size_t c = 0; c < cols; ++c) {
    CHECK(std::abs(got(b{c}) - want[c]) <= 1e-6 * want[c]);
    CHECK(std::abs(means(b{c}) - want[c] / double(rows)) <= 1e-6 * want[c] / double(rows));
  }
}

TEST_CASE("argmax, argmin: first index on ties, the first NaN wins, as torch.argmax and torch.argmin", "[reduce][argmax]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double rows[4][4] = {{1, 3, 3, 2}, {nan, 5, nan, 1}, {2, 2, 2, 2}, {4, nan, -1, nan}};
  tensor<double, a, b> x(a{4}, b{4});
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 4; ++j) x(a{i}, b{j}) = rows[i][j];
  auto mx = eval(argmax<b>(x));
  static_assert(std::is_same_v<decltype(mx), tensor<std::int64_t, a>>);
  auto mn = eval(argmin<b>(x));
  auto mx0 = eval(argmax<a>(x));
  auto mn0 = eval(argmin<a>(x));
  // torch.argmax(x, 1), torch.argmin(x, 1), torch.argmax(x, 0), torch.argmin(x, 0)
  const std::int64_t want_mx[4] = {1, 0, 0, 1}, want_mn[4] = {0, 0, 0, 1}, want_0[4] = {1, 3, 1, 3};
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(mx(a{i}) == want_mx[i]);
    CHECK(mn(a{i}) == want_mn[i]);
    CHECK(mx0(b{i}) == want_0[i]);
    CHECK(mn0(b{i}) == want_0[i]);
  }
  // infinities, integers, bools (the first true), extent 1
  const float inf = std::numeric_limits<float>::infinity();
  tensor<float, a> f(a{4});
  f(a{0}) = -inf, f(a{1}) = -inf, f(a{2}) = inf, f(a{3}) = inf;
  CHECK((eval(argmax<a>(f)).item() == 2 && eval(argmin<a>(f)).item() == 0));
  tensor<std::int32_t, a> n(a{4});
  n(a{0}) = 3, n(a{1}) = 7, n(a{2}) = 7, n(a{3}) = -2;
  CHECK((eval(argmax<a>(n)).item() == 1 && eval(argmin<a>(n)).item() == 3));
  CHECK(eval(argmax<a>(n > 5)).item() == 1);
  CHECK(eval(argmax<b>(tensor<float, a, b>::ones(a{3}, b{1}))) (a{2}) == 0);
}

TEST_CASE("argmax, argmin: over any dim of a lazy or strided operand against loops; empty dims", "[reduce][argmax]") {
  tensor<double, a, b, c> t(a{2}, b{3}, c{5});
  test::fill_pattern(t, 0.77, -2.1);
  auto arg = [](auto&& get, std::size_t n, bool max) {
    std::size_t best = 0;
    for (std::size_t i = 1; i < n; ++i)
      if (max ? get(i) > get(best) : get(i) < get(best)) best = i;
    return std::int64_t(best);
  };
  auto mb = eval(argmax<b>(t * -1.0 + 0.5));                   // lazy
  auto mc = eval(argmin<c>(rename<a, b>(select<b>(t, 1))));    // a strided view, renamed
  static_assert(has_dims<decltype(mb), a, c> && has_dims<decltype(mc), b>);
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t k = 0; k < 5; ++k)
      CHECK(mb(a{i}, c{k}) == arg([&](std::size_t j) { return -t(a{i}, b{j}, c{k}) + 0.5; }, 3, true));
  for (std::size_t i = 0; i < 2; ++i)
    CHECK(mc(b{i}) == arg([&](std::size_t k) { return t(a{i}, b{1}, c{k}); }, 5, false));
  // torch: argmax over an empty dim raises, over a non-empty dim of an empty tensor gives an empty result
  tensor<float, a, b> e(a{3}, b{0});
  REQUIRE_THROWS_WITH(argmax<b>(e), Catch::Contains("argmax over dim 'b' of extent 0"));
  REQUIRE_THROWS_WITH(argmin<b>(e), Catch::Contains("argmin over dim 'b' of extent 0"));
  CHECK(eval(argmax<a>(e)).size() == 0);
}

TEST_CASE("cumsum: running sums along either dim with NaN and inf, as torch.cumsum", "[reduce][cumsum]") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const float in[3][5] = {{1, nan, 2, inf, -inf}, {0.5f, 0.25f, -1, 3, 1e8f}, {-inf, 1, inf, 2, 3}};
  // torch.cumsum(x, 1) and torch.cumsum(x, 0), float32
  const float along_b[3][5] = {{1, nan, nan, nan, nan}, {0.5f, 0.75f, -0.25f, 2.75f, 1e8f}, {-inf, -inf, nan, nan, nan}};
  const float along_a[3][5] = {{1, nan, 2, inf, -inf}, {1.5f, nan, 1, inf, -inf}, {-inf, nan, inf, inf, -inf}};
  tensor<float, a, b> x(a{3}, b{5});
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 5; ++j) x(a{i}, b{j}) = in[i][j];
  tensor<float, a, b> cb = cumsum<b>(x);
  tensor<float, b, a> ca = cumsum<a>(rename<c, a>(rename<a, c>(x)));  // a view; assigned in another order
  auto same = [](float got, float want) { return std::isnan(want) ? std::isnan(got) : got == want; };
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 5; ++j) {
      CHECK(same(cb(a{i}, b{j}), along_b[i][j]));
      CHECK(same(ca(a{i}, b{j}), along_a[i][j]));
    }
  // float32 sums accumulate in double, as torch's CPU cumsum: [2^24, 1, 1, -2^24] -> [2^24, 2^24, 2^24, 2]
  tensor<float, a> big(a{4});
  big(a{0}) = 16777216.0f, big(a{1}) = 1.0f, big(a{2}) = 1.0f, big(a{3}) = -16777216.0f;
  CHECK(eval(cumsum<a>(big))(a{3}) == 2.0f);
}

TEST_CASE("cumsum: integers and bools give int64; a lazy operand against loops; empty dims", "[reduce][cumsum]") {
  tensor<std::uint8_t, a> u(a{3});
  u(a{0}) = 200, u(a{1}) = 100, u(a{2}) = 250;
  auto cu = eval(cumsum<a>(u));
  static_assert(std::is_same_v<decltype(cu), tensor<std::int64_t, a>>);
  CHECK((cu(a{0}) == 200 && cu(a{1}) == 300 && cu(a{2}) == 550));  // torch: [200, 300, 550]
  tensor<std::int64_t, a> huge = tensor<std::int64_t, a>::full(std::int64_t(1) << 62, a{3});
  auto wrapped = eval(cumsum<a>(huge));  // torch wraps: [2^62, -2^63, -2^62]
  CHECK((wrapped(a{0}) == (std::int64_t(1) << 62) && wrapped(a{1}) == std::numeric_limits<std::int64_t>::min() &&
         wrapped(a{2}) == -(std::int64_t(1) << 62)));
  tensor<double, a, b, c> t(a{2}, b{3}, c{4});
  test::fill_pattern(t);
  auto counts = eval(cumsum<c>(t > 0.0));
  static_assert(std::is_same_v<decltype(counts), tensor<std::int64_t, a, b, c>>);
  auto lazy = eval(cumsum<b>(t * 2.0 - 1.0));
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t k = 0; k < 4; ++k) {
      double s = 0;
      for (std::size_t j = 0; j < 3; ++j) {
        s += t(a{i}, b{j}, c{k}) * 2.0 - 1.0;
        CHECK(lazy(a{i}, b{j}, c{k}) == Approx(s).epsilon(1e-15));
      }
    }
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 3; ++j) {
      std::int64_t n = 0;
      for (std::size_t k = 0; k < 4; ++k) {
        n += t(a{i}, b{j}, c{k}) > 0.0;
        CHECK(counts(a{i}, b{j}, c{k}) == n);
      }
    }
  CHECK(eval(cumsum<a>(tensor<float, a, b>(a{0}, b{3}))).size() == 0);
  CHECK(eval(cumsum<a>(tensor<float, a, b>(a{2}, b{0}))).size() == 0);
  CHECK(eval(cumsum<b>(tensor<float, a, b>::ones(a{2}, b{1})))(a{1}, b{0}) == 1.0f);
}
