// Element-wise operations: values against loops, broadcasting by name,
// scalars, comparisons, where, outer, and extent checks.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>

#include "support.hpp"

namespace {
DIMSUM_DIM(batch);
DIMSUM_DIM(posn);
DIMSUM_DIM(nheads);
DIMSUM_DIM(d_head);
}  // namespace

using namespace dimsum;
using q_t = tensor<float, batch, posn, nheads, d_head>;
using b_t = tensor<float, nheads, d_head>;

TEST_CASE("elementwise: q + b_Q broadcasts b over batch and posn by name", "[elementwise]") {
  q_t q(batch{2}, posn{3}, nheads{2}, d_head{4});
  b_t b(nheads{2}, d_head{4});
  test::fill_pattern(q);
  test::fill_pattern(b, 1.1, 0.5);
  q_t r = q + b;
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t p = 0; p < 3; ++p)
      for (std::size_t h = 0; h < 2; ++h)
        for (std::size_t d = 0; d < 4; ++d)
          CHECK(r(batch{i}, posn{p}, nheads{h}, d_head{d}) ==
                q(batch{i}, posn{p}, nheads{h}, d_head{d}) + b(nheads{h}, d_head{d}));
}

TEST_CASE("elementwise: operands in different dim orders are aligned by name", "[elementwise]") {
  tensor<float, batch, posn> a(batch{2}, posn{3});
  tensor<float, posn, batch> c(batch{2}, posn{3});
  test::fill_pattern(a);
  test::fill_pattern(c, 0.9, 2.0);
  auto r = eval(a - c);
  static_assert(has_dims<decltype(r), batch, posn>);
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t p = 0; p < 3; ++p) CHECK(r(batch{i}, posn{p}) == a(batch{i}, posn{p}) - c(posn{p}, batch{i}));
  auto r2 = eval(c * a);  // left operand's order
  static_assert(has_dims<decltype(r2), posn, batch>);
  CHECK(r2(posn{2}, batch{1}) == c(posn{2}, batch{1}) * a(batch{1}, posn{2}));
}

TEST_CASE("elementwise: both sides contribute dims", "[elementwise]") {
  tensor<float, batch, posn> a(batch{2}, posn{3});
  tensor<float, posn, nheads> c(posn{3}, nheads{4});
  test::fill_pattern(a);
  test::fill_pattern(c);
  auto r = eval(a * c);
  static_assert(has_dims<decltype(r), batch, posn, nheads>);
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t p = 0; p < 3; ++p)
      for (std::size_t h = 0; h < 4; ++h)
        CHECK(r(batch{i}, posn{p}, nheads{h}) == a(batch{i}, posn{p}) * c(posn{p}, nheads{h}));
}

TEST_CASE("elementwise: scalars, unary minus, exp, sqrt, division", "[elementwise]") {
  tensor<double, posn> a(posn{4});
  a(posn{0}) = 1;
  a(posn{1}) = 4;
  a(posn{2}) = 9;
  a(posn{3}) = 0.25;
  auto r = eval(-(sqrt(a) / 2.0) + 1.0);
  CHECK(r(posn{0}) == Approx(0.5));
  CHECK(r(posn{1}) == Approx(0.0));
  CHECK(r(posn{2}) == Approx(-0.5));
  CHECK(r(posn{3}) == Approx(0.75));
  auto e = eval(exp(a - 1.0));
  CHECK(e(posn{1}) == Approx(std::exp(3.0)));
  auto s = eval(10.0 - a);
  CHECK(s(posn{2}) == 1.0);
  auto m = eval(2.0 * a);
  CHECK(m(posn{3}) == 0.5);
}

TEST_CASE("elementwise: comparisons give bool tensors; where and logical ops", "[elementwise]") {
  tensor<float, posn> a(posn{3});
  a(posn{0}) = -1;
  a(posn{1}) = 0;
  a(posn{2}) = 2;
  auto pos = eval(a > 0.0f);
  static_assert(std::is_same_v<value_type_of_t<decltype(pos)>, bool>);
  CHECK_FALSE(pos(posn{0}));
  CHECK_FALSE(pos(posn{1}));
  CHECK(pos(posn{2}));
  auto relu = eval(where(a > 0.0f, a, 0.0f));
  CHECK(relu(posn{0}) == 0.0f);
  CHECK(relu(posn{2}) == 2.0f);
  auto both = eval((a >= 0.0f) && (a <= 1.0f));
  CHECK_FALSE(both(posn{0}));
  CHECK(both(posn{1}));
  CHECK_FALSE(both(posn{2}));
  auto neither = eval(!(a == 0.0f) || (a != a));
  CHECK(neither(posn{0}));
  CHECK_FALSE(neither(posn{1}));
  CHECK(eval(a < 0.0f)(posn{0}));
}

TEST_CASE("elementwise: a floating scalar next to an integer tensor computes in floating point", "[elementwise]") {
  // torch: ids * 0.5 is [0, 0.5, 1, 1.5] and ids == 0.5 is all false; the
  // scalar must not be truncated to the tensor's integer type.
  tensor<std::int64_t, posn> ids(posn{4});
  for (std::size_t i = 0; i < 4; ++i) ids(posn{i}) = std::int64_t(i);
  auto half = eval(ids * 0.5);
  static_assert(std::is_same_v<value_type_of_t<decltype(half)>, double>);
  CHECK(test::flat(half) == std::vector<double>{0.0, 0.5, 1.0, 1.5});
  CHECK(test::flat(eval(0.5f * ids)) == std::vector<double>{0.0, 0.5, 1.0, 1.5});
  CHECK(test::flat(eval(ids / 2.0)) == std::vector<double>{0.0, 0.5, 1.0, 1.5});
  CHECK(test::flat(eval(ids - 0.25)) == std::vector<double>{-0.25, 0.75, 1.75, 2.75});
  CHECK(test::flat(eval(ids == 0.5)) == std::vector<double>{0, 0, 0, 0});
  CHECK(test::flat(eval(ids > 0.5)) == std::vector<double>{0, 1, 1, 1});
  CHECK(test::flat(eval(where(ids > 1, ids, 0.5))) == std::vector<double>{0.5, 0.5, 2.0, 3.0});
  // An integer scalar keeps the integer type (ids / 2 is integer division in C++).
  auto twice = eval(ids * 2);
  static_assert(std::is_same_v<value_type_of_t<decltype(twice)>, std::int64_t>);
  CHECK(test::flat(twice) == std::vector<double>{0, 2, 4, 6});
  // A floating tensor keeps its type next to a double scalar, as before.
  tensor<float, posn> f(posn{2});
  static_assert(std::is_same_v<value_type_of_t<decltype(f * 0.5)>, float>);
  tensor<bool, posn> flag(posn{2});
  flag(posn{1}) = true;
  CHECK(test::flat(eval(flag * 0.5)) == std::vector<double>{0.0, 0.5});
}

TEST_CASE("elementwise: exp and sqrt of an integer tensor are double", "[elementwise]") {
  // torch.exp / torch.sqrt of an int tensor give floating point; truncating
  // back to int gave exp(-3) = 0 and sqrt(2) = 1.
  tensor<int, posn> n(posn{3});
  n(posn{0}) = -3;
  n(posn{1}) = 2;
  n(posn{2}) = 9;
  auto e = eval(exp(n));
  static_assert(std::is_same_v<value_type_of_t<decltype(e)>, double>);
  CHECK(test::flat(e) == std::vector<double>{std::exp(-3.0), std::exp(2.0), std::exp(9.0)});
  tensor<double, posn> r = sqrt(n);
  CHECK(std::isnan(r(posn{0})));
  CHECK(r(posn{1}) == std::sqrt(2.0));
  CHECK(r(posn{2}) == 3.0);
}

TEST_CASE("elementwise: where with two scalars takes cond's dims and their common type", "[elementwise]") {
  // torch.where(x > 0, 1.0, 0.0): [0, 0, 1] for x = [-1, 0, 2].
  tensor<float, posn> x(posn{3});
  x(posn{0}) = -1;
  x(posn{1}) = 0;
  x(posn{2}) = 2;
  auto step = eval(where(x > 0.0f, 1.0f, 0.0f));
  static_assert(std::is_same_v<value_type_of_t<decltype(step)>, float>);
  static_assert(has_dims<decltype(step), posn>);
  CHECK(test::flat(step) == std::vector<double>{0.0, 0.0, 1.0});
  auto mixed = eval(where(x < 0.0f, 1, 0.5));
  static_assert(std::is_same_v<value_type_of_t<decltype(mixed)>, double>);
  CHECK(test::flat(mixed) == std::vector<double>{1.0, 0.5, 0.5});
}

TEST_CASE("elementwise: outer product on request, and cast", "[elementwise]") {
  tensor<float, batch> a(batch{2});
  tensor<float, posn> b(posn{3});
  test::fill_pattern(a);
  test::fill_pattern(b);
  auto o = eval(outer(a, b));
  static_assert(has_dims<decltype(o), batch, posn>);
  CHECK(o(batch{1}, posn{2}) == a(batch{1}) * b(posn{2}));
  auto d = eval(cast<double>(a));
  static_assert(std::is_same_v<value_type_of_t<decltype(d)>, double>);
  CHECK(d(batch{1}) == double(a(batch{1})));
}

TEST_CASE("elementwise: a dynamic extent mismatch throws naming the dim and both extents", "[elementwise]") {
  q_t q(batch{2}, posn{3}, nheads{2}, d_head{4});
  b_t b(nheads{2}, d_head{5});
  REQUIRE_THROWS_AS(q + b, shape_error);
  REQUIRE_THROWS_WITH(q + b, Catch::Contains("d_head") && Catch::Contains("4") && Catch::Contains("5") &&
                                 Catch::Contains("element-wise +"));
}

TEST_CASE("elementwise: a nested lazy tree with a contraction inside", "[elementwise]") {
  tensor<float, batch, posn> a(batch{2}, posn{3});
  test::fill_pattern(a);
  auto total = einsum<batch>(a);  // lazy per-batch sums
  auto r = eval(a / total * 2.0f);
  for (std::size_t i = 0; i < 2; ++i) {
    float s = 0;
    for (std::size_t p = 0; p < 3; ++p) s += a(batch{i}, posn{p});
    for (std::size_t p = 0; p < 3; ++p) CHECK(r(batch{i}, posn{p}) == Approx(a(batch{i}, posn{p}) / s * 2.0f));
  }
}

TEST_CASE("elementwise: lvalue operands are held by reference, rvalues moved in", "[elementwise]") {
  tensor<float, posn> x(posn{2});
  x.fill(1.0f);
  auto e = x + 1.0f;  // lazy: reads x when evaluated
  x.fill(5.0f);
  CHECK(eval(e)(posn{0}) == 6.0f);
  auto m = -x;
  x.fill(2.0f);
  CHECK(eval(m)(posn{1}) == -2.0f);
  auto owned = tensor<float, posn>::full(3.0f, posn{2}) * 2.0f;  // the temporary lives in the node
  CHECK(eval(owned)(posn{1}) == 6.0f);
}

TEST_CASE("elementwise: copies through views and broadcasts, with rows that merge and rows that do not",
          "[elementwise]") {
  // Trailing dims that dst and every operand walk as one run as one row;
  // a slice (padded rows), a permuted source, a broadcast along an inner
  // dim and an index-reading mask must not merge. Values against loops.
  q_t q(batch{2}, posn{5}, nheads{3}, d_head{4});
  test::fill_pattern(q);
  auto at = [&](std::size_t i, std::size_t p, std::size_t h, std::size_t d) {
    return q(batch{i}, posn{p}, nheads{h}, d_head{d});
  };
  SECTION("a whole tensor, and a bias over (nheads, d_head) through an element-wise node, merge") {
    b_t b(nheads{3}, d_head{4});
    test::fill_pattern(b, 0.7, 0.1);
    q_t copy = q;
    q_t biased(batch{2}, posn{5}, nheads{3}, d_head{4});
    biased = b + 0.0f * q;  // b broadcast over batch and posn, through an element-wise node
    for (std::size_t i = 0; i < 2; ++i)
      for (std::size_t p = 0; p < 5; ++p)
        for (std::size_t h = 0; h < 3; ++h)
          for (std::size_t d = 0; d < 4; ++d) {
            CHECK(copy(batch{i}, posn{p}, nheads{h}, d_head{d}) == at(i, p, h, d));
            CHECK(biased(batch{i}, posn{p}, nheads{h}, d_head{d}) == b(nheads{h}, d_head{d}));
          }
  }
  SECTION("a slice along posn and along d_head: rows with gaps") {
    q_t s1 = slice<posn>(q, 1, 4);
    q_t s2 = slice<d_head>(q, 1, 3);
    for (std::size_t i = 0; i < 2; ++i)
      for (std::size_t h = 0; h < 3; ++h) {
        for (std::size_t p = 0; p < 3; ++p)
          for (std::size_t d = 0; d < 4; ++d)
            CHECK(s1(batch{i}, posn{p}, nheads{h}, d_head{d}) == at(i, p + 1, h, d));
        for (std::size_t p = 0; p < 5; ++p)
          for (std::size_t d = 0; d < 2; ++d)
            CHECK(s2(batch{i}, posn{p}, nheads{h}, d_head{d}) == at(i, p, h, d + 1));
      }
  }
  SECTION("a source in another dim order, and a broadcast along the innermost dim") {
    tensor<float, d_head, nheads, posn, batch> t = q;  // permuted copy
    tensor<float, batch, posn, nheads> w(batch{2}, posn{5}, nheads{3});
    test::fill_pattern(w, 0.3, 0.2);
    q_t back = t;
    q_t spread = w + 0.0f * q;  // w constant along d_head
    for (std::size_t i = 0; i < 2; ++i)
      for (std::size_t p = 0; p < 5; ++p)
        for (std::size_t h = 0; h < 3; ++h)
          for (std::size_t d = 0; d < 4; ++d) {
            CHECK(t(batch{i}, posn{p}, nheads{h}, d_head{d}) == at(i, p, h, d));
            CHECK(back(batch{i}, posn{p}, nheads{h}, d_head{d}) == at(i, p, h, d));
            CHECK(spread(batch{i}, posn{p}, nheads{h}, d_head{d}) == w(batch{i}, posn{p}, nheads{h}));
          }
  }
  SECTION("a causal mask reads the index: its rows never merge") {
    tensor<float, posn, d_head> sq(posn{4}, d_head{4});
    test::fill_pattern(sq);
    tensor<float, posn, d_head> m = causal_mask<posn, d_head>(sq, -1.0f);
    for (std::size_t p = 0; p < 4; ++p)
      for (std::size_t d = 0; d < 4; ++d) CHECK(m(posn{p}, d_head{d}) == (d > p ? -1.0f : sq(posn{p}, d_head{d})));
  }
}

TEST_CASE("elementwise: compound assignment t += e is t = t + e, broadcasting e by name into t", "[elementwise]") {
  q_t q(batch{2}, posn{3}, nheads{2}, d_head{4});
  b_t b(nheads{2}, d_head{4});
  test::fill_pattern(q);
  test::fill_pattern(b, 1.1, 0.5);
  const q_t q0 = q;
  q += b;                              // b broadcast over batch and posn
  q *= 2.0;                            // a double scalar takes the tensor's float
  q -= b;
  q /= tensor<float, posn>::full(4.0f, posn{3});
  q += q;                              // reads the tensor it assigns to
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t p = 0; p < 3; ++p)
      for (std::size_t h = 0; h < 2; ++h)
        for (std::size_t d = 0; d < 4; ++d) {
          const float x = q0(batch{i}, posn{p}, nheads{h}, d_head{d}), y = b(nheads{h}, d_head{d});
          const float expected = ((x + y) * 2.0f - y) / 4.0f;
          CHECK(q(batch{i}, posn{p}, nheads{h}, d_head{d}) == expected + expected);
        }
  tensor<float, posn, batch> other(batch{2}, posn{4});
  CHECK_THROWS_AS(q += other, shape_error);   // posn 3 vs 4, checked as for +
}

TEST_CASE("elementwise: signed integers wrap around as torch's (abs and - of INT_MIN), never UB", "[elementwise]") {
  // Values from torch 2 (int32 and int64 tensors): torch.abs, unary -, +, *, - 1.
  tensor<std::int32_t, posn> x(posn{4});
  const std::int32_t in[] = {std::numeric_limits<std::int32_t>::min(), -5, 7, std::numeric_limits<std::int32_t>::max()};
  for (std::size_t i = 0; i < 4; ++i) x(posn{i}) = in[i];
  tensor<std::int32_t, posn> ab = abs(x), ng = -x, twice = x + x, sq = x * x, dec = x - 1;
  const std::int32_t ab_ref[] = {-2147483647 - 1, 5, 7, 2147483647};
  const std::int32_t ng_ref[] = {-2147483647 - 1, 5, -7, -2147483647};
  const std::int32_t twice_ref[] = {0, -10, 14, -2};
  const std::int32_t sq_ref[] = {0, 25, 49, 1};
  const std::int32_t dec_ref[] = {2147483647, -6, 6, 2147483646};
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(ab(posn{i}) == ab_ref[i]);
    CHECK(ng(posn{i}) == ng_ref[i]);
    CHECK(twice(posn{i}) == twice_ref[i]);
    CHECK(sq(posn{i}) == sq_ref[i]);
    CHECK(dec(posn{i}) == dec_ref[i]);
  }
  tensor<std::int64_t, posn> y(posn{2});
  y(posn{0}) = std::numeric_limits<std::int64_t>::min();
  y(posn{1}) = std::numeric_limits<std::int64_t>::max();
  tensor<std::int64_t, posn> ab64 = abs(y), ng64 = -y;
  y += y;
  CHECK(ab64(posn{0}) == std::numeric_limits<std::int64_t>::min());
  CHECK(ab64(posn{1}) == std::numeric_limits<std::int64_t>::max());
  CHECK(ng64(posn{0}) == std::numeric_limits<std::int64_t>::min());
  CHECK(ng64(posn{1}) == -std::numeric_limits<std::int64_t>::max());
  CHECK(y(posn{0}) == 0);
  CHECK(y(posn{1}) == -2);
}

TEST_CASE("elementwise: integer / truncates, wraps INT_MIN / -1 and throws on a zero divisor, never UB", "[elementwise]") {
  // Quotients from torch 1.13, torch.div(a, b, rounding_mode='trunc') on int32.
  tensor<std::int32_t, posn> a(posn{5}), b(posn{5});
  const std::int32_t a_in[] = {7, -7, -5, 2147483647, -2147483647 - 1};
  const std::int32_t b_in[] = {2, 2, -3, -1, 2};
  const std::int32_t q_ref[] = {3, -3, 1, -2147483647, -1073741824};
  for (std::size_t i = 0; i < 5; ++i) a(posn{i}) = a_in[i], b(posn{i}) = b_in[i];
  tensor<std::int32_t, posn> q = a / b;
  for (std::size_t i = 0; i < 5; ++i) CHECK(q(posn{i}) == q_ref[i]);

  // INT_MIN / -1: the quotient 2**31 does not fit and wraps to INT_MIN, as
  // -INT_MIN does (torch 1.13 dies of SIGFPE on int32 and int64; its int8
  // -128 / -1 is -128).
  tensor<std::int32_t, posn> m32 = tensor<std::int32_t, posn>::full(std::numeric_limits<std::int32_t>::min(), posn{2}) / -1;
  CHECK(m32(posn{1}) == std::numeric_limits<std::int32_t>::min());
  tensor<std::int64_t, posn> m64 = tensor<std::int64_t, posn>::full(std::numeric_limits<std::int64_t>::min(), posn{2}) / std::int64_t{-1};
  CHECK(m64(posn{0}) == std::numeric_limits<std::int64_t>::min());

  // A zero divisor throws dimsum::error (torch: "ZeroDivisionError") when
  // the expression is evaluated, the last element's as the first's; the
  // tensor assigned to (`=`, `/=`) keeps its values, as torch's div_ does.
  using i32 = tensor<std::int32_t, posn>;
  i32 z = b;
  z(posn{4}) = 0;
  auto lazy = a / z + a;  // building the node does not divide
  CHECK_THROWS_WITH(i32(lazy), "dimsum: element-wise /: integer division by zero");
  CHECK_THROWS_AS(i32(a / 0), error);
  using i64 = tensor<std::int64_t, posn>;
  CHECK_THROWS_AS(i64(a / i64(posn{5})), error);  // an int64 quotient, checked as well
  i32 t = a;
  CHECK_THROWS_AS(t = a / z, error);
  CHECK_THROWS_AS(t /= z, error);
  for (std::size_t i = 0; i < 5; ++i) CHECK(t(posn{i}) == a_in[i]);

  // Floating-point division is IEEE's, unchecked: 1/0 = inf, -1/0 = -inf, 0/0 = NaN (torch alike).
  tensor<double, posn> f(posn{3}), zero(posn{3});
  f(posn{0}) = 1.0, f(posn{1}) = -1.0;
  tensor<double, posn> r = f / zero;
  CHECK(r(posn{0}) == std::numeric_limits<double>::infinity());
  CHECK(r(posn{1}) == -std::numeric_limits<double>::infinity());
  CHECK(std::isnan(r(posn{2})));
}
