// ops/diagonal.hpp: diagonal<a, a2> and trace<a, a2> against plain loops
// (einops/numpy's `i i -> i` and `i i ->`), on tensors, views in other dim
// orders and lazy operands; extents checked equal at run time.
#include <catch2/catch.hpp>

#include "support.hpp"

namespace {
DIMSUM_DIM(batch);
DIMSUM_DIM(row);
DIMSUM_DIM(col);
DIMSUM_DIM(row3, 3);
DIMSUM_DIM(col3, 3);
}  // namespace

using namespace dimsum;

TEST_CASE("diagonal: keeps the first dim, drops the second, in the operand's order", "[diagonal]") {
  tensor<double, row, batch, col> x(row{4}, batch{2}, col{4});
  test::fill_pattern(x);
  auto d = eval(diagonal<row, col>(x));
  static_assert(has_dims<decltype(d), row, batch>);
  auto d2 = eval(diagonal<col, row>(x));
  static_assert(has_dims<decltype(d2), batch, col>);
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t b = 0; b < 2; ++b) {
      CHECK(d(row{i}, batch{b}) == x(row{i}, batch{b}, col{i}));
      CHECK(d2(batch{b}, col{i}) == x(row{i}, batch{b}, col{i}));
    }
}

TEST_CASE("diagonal: of a lazy operand, inside an element-wise tree, into another order", "[diagonal]") {
  tensor<float, batch, row, col> x(batch{3}, row{5}, col{5});
  tensor<float, col, row> y(row{5}, col{5});
  test::fill_pattern(x);
  test::fill_pattern(y, 0.5, 0.25);
  tensor<float, row, batch> r = diagonal<row, col>(x * y) + 1.0f;
  for (std::size_t b = 0; b < 3; ++b)
    for (std::size_t i = 0; i < 5; ++i) CHECK(r(row{i}, batch{b}) == Approx(x(batch{b}, row{i}, col{i}) * y(col{i}, row{i}) + 1.0f).epsilon(1e-6));
}

TEST_CASE("trace: the sum of the diagonal, dropping both dims", "[diagonal]") {
  tensor<double, batch, row, col> x(batch{3}, row{4}, col{4});
  test::fill_pattern(x);
  auto t = eval(trace<row, col>(x));
  static_assert(has_dims<decltype(t), batch>);
  for (std::size_t b = 0; b < 3; ++b) {
    double s = 0;
    for (std::size_t i = 0; i < 4; ++i) s += x(batch{b}, row{i}, col{i});
    CHECK(t(batch{b}) == Approx(s).epsilon(1e-15));
  }
  tensor<float, row3, col3> m;
  test::fill_pattern(m);
  const float want = m(row3{0}, col3{0}) + m(row3{1}, col3{1}) + m(row3{2}, col3{2});
  CHECK(eval(trace<row3, col3>(m))() == Approx(want));
  // Empty dims: an empty diagonal, a zero trace.
  tensor<float, row, col> e(row{0}, col{0});
  CHECK(eval(trace<row, col>(e))() == 0.0f);
  CHECK(extent<row>(eval(diagonal<row, col>(e))) == 0);
}

TEST_CASE("diagonal, trace: different extents throw shape_error naming both dims", "[diagonal]") {
  tensor<float, row, col> x(row{3}, col{4});
  CHECK_THROWS_AS((diagonal<row, col>(x)), shape_error);
  CHECK_THROWS_WITH((trace<row, col>(x)), Catch::Contains("'row'") && Catch::Contains("'col'") &&
                                            Catch::Contains("3") && Catch::Contains("4"));
}
