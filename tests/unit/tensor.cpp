// tensor<T, Dims...>: construction by name, fills, element access, extents,
// assignment placed by name, the xtensor escape hatch.
#include <catch2/catch.hpp>

#include <cmath>
#include <sstream>

#include <dimsum/dimsum.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xbuilder.hpp>

#include "support.hpp"

namespace {
DIMSUM_DIM(batch);
DIMSUM_DIM(posn);
DIMSUM_DIM(d_model, 5);
}  // namespace

using namespace dimsum;
using x_t = tensor<float, batch, posn, d_model>;

TEST_CASE("tensor: dynamic extents by name in any order", "[tensor]") {
  x_t a(posn{3}, batch{2});
  x_t b(batch{2}, posn{3});
  CHECK(a.extents() == std::array<std::size_t, 3>{2, 3, 5});
  CHECK(b.extents() == a.extents());
  CHECK(a.extent<posn>() == 3);
  CHECK(extent<d_model>(a) == 5);
  CHECK(a.size() == 30);
  CHECK(test::flat(a) == std::vector<double>(30, 0.0));
}

TEST_CASE("tensor: a static dim may be given if it agrees", "[tensor]") {
  x_t a(posn{3}, batch{2}, d_model{5});
  CHECK(a.extent<d_model>() == 5);
  REQUIRE_THROWS_AS(x_t(posn{3}, batch{2}, d_model{4}), shape_error);
  REQUIRE_THROWS_WITH(x_t(posn{3}, batch{2}, d_model{4}),
                      Catch::Contains("d_model") && Catch::Contains("5") && Catch::Contains("4"));
}

TEST_CASE("tensor: zeros, ones, full, fill", "[tensor]") {
  CHECK(test::flat(x_t::zeros(batch{1}, posn{2})) == std::vector<double>(10, 0.0));
  CHECK(test::flat(x_t::ones(batch{1}, posn{2})) == std::vector<double>(10, 1.0));
  CHECK(test::flat(x_t::full(2.5f, batch{1}, posn{2})) == std::vector<double>(10, 2.5));
  auto t = x_t::zeros(batch{1}, posn{1});
  t.fill(-3.0f);
  CHECK(test::flat(t) == std::vector<double>(5, -3.0));
}

TEST_CASE("tensor: seeded random normal and uniform are reproducible and plausible", "[tensor]") {
  using big = tensor<double, batch, posn>;
  auto n1 = big::random_normal(11, batch{100}, posn{100});
  auto n2 = big::random_normal(11, batch{100}, posn{100});
  auto n3 = big::random_normal(12, batch{100}, posn{100});
  CHECK(test::flat(n1) == test::flat(n2));
  CHECK(test::flat(n1) != test::flat(n3));
  double mean = 0, var = 0;
  for (double v : test::flat(n1)) mean += v;
  mean /= 1e4;
  for (double v : test::flat(n1)) var += (v - mean) * (v - mean);
  var /= 1e4;
  CHECK(std::abs(mean) < 0.05);
  CHECK(std::abs(var - 1.0) < 0.05);
  auto u = big::random_uniform(5, batch{100}, posn{100});
  double lo = 1, hi = 0, um = 0;
  for (double v : test::flat(u)) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    um += v;
  }
  CHECK(lo >= 0.0);
  CHECK(hi < 1.0);
  CHECK(std::abs(um / 1e4 - 0.5) < 0.02);
}

TEST_CASE("tensor: element access by name in any order, bounds checked", "[tensor]") {
  x_t a(batch{2}, posn{3});
  a(posn{1}, batch{0}, d_model{4}) = 7.0f;
  CHECK(a(batch{0}, posn{1}, d_model{4}) == 7.0f);
  CHECK(a(d_model{4}, batch{0}, posn{1}) == 7.0f);
  CHECK(a.data()[(0 * 3 + 1) * 5 + 4] == 7.0f);  // row-major
  REQUIRE_THROWS_WITH(a(batch{2}, posn{0}, d_model{0}),
                      Catch::Contains("index 2") && Catch::Contains("'batch'") && Catch::Contains("extent 2"));
  REQUIRE_THROWS_AS(a(batch{0}, posn{0}, d_model{5}), shape_error);
}

TEST_CASE("tensor: assignment places data by name", "[tensor]") {
  x_t a(batch{2}, posn{3});
  test::fill_pattern(a);
  tensor<float, d_model, batch, posn> b = a;  // a permutation, by name
  CHECK(b.extents() == std::array<std::size_t, 3>{5, 2, 3});
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 3; ++j)
      for (std::size_t k = 0; k < 5; ++k) CHECK(b(batch{i}, posn{j}, d_model{k}) == a(batch{i}, posn{j}, d_model{k}));
  x_t c;
  CHECK(c.size() == 0);
  c = b;  // back, and the dynamic extents follow the source
  CHECK(test::flat(c) == test::flat(a));
}

TEST_CASE("tensor: an expression may read the tensor it is assigned to", "[tensor]") {
  tensor<float, batch, posn> a(batch{2}, posn{2});
  test::fill_pattern(a);
  auto before = test::flat(a);
  a = a * 2.0f + a;
  for (std::size_t i = 0; i < 4; ++i) CHECK(a.data()[i] == Approx(3 * before[i]));
}

TEST_CASE("tensor: the xtensor storage and naming xtensor expressions", "[tensor]") {
  x_t a(batch{2}, posn{3});
  a.storage()(1, 2, 3) = 4.0f;
  CHECK(a(batch{1}, posn{2}, d_model{3}) == 4.0f);

  xt::xtensor<float, 2> raw = {{1, 2, 3}, {4, 5, 6}};
  auto n = named<batch, posn>(raw);
  CHECK(n(batch{1}, posn{0}) == 4.0f);
  auto n2 = named<batch, posn>(raw * 2.0f);  // a lazy xtensor expression
  CHECK(n2(batch{0}, posn{2}) == 6.0f);
  xt::xarray<float> dyn = xt::ones<float>({2, 3, 4});
  REQUIRE_THROWS_WITH((named<batch, posn>(dyn)), Catch::Contains("3 axes") && Catch::Contains("2 dims"));
  xt::xarray<float> wrong = xt::ones<float>({2, 3, 4});
  REQUIRE_THROWS_WITH((named<batch, posn, d_model>(wrong)), Catch::Contains("d_model") && Catch::Contains("5"));
}

TEST_CASE("tensor: printing shows dtype, named extents and values", "[tensor]") {
  tensor<float, batch, posn> a(batch{1}, posn{2});
  a(batch{0}, posn{1}) = 3.0f;
  std::ostringstream os;
  os << a;
  CHECK(os.str().rfind("tensor<float>[batch=1, posn=2]", 0) == 0);
  CHECK(os.str().find("3") != std::string::npos);
  CHECK(shape_string(a) == "[batch=1, posn=2]");
}

TEST_CASE("tensor: rank 0 holds one value", "[tensor]") {
  tensor<double> s;
  CHECK(s.size() == 1);
  s.data()[0] = 2.0;
  CHECK(s.item() == 2.0);
}
