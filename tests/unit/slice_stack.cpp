// select, slice, stack and concat by name, with bounds and extent checks.
#include <catch2/catch.hpp>

#include "support.hpp"

namespace {
DIMSUM_DIM(batch);
DIMSUM_DIM(token);
DIMSUM_DIM(d_in);
}  // namespace

using namespace dimsum;
using t_t = tensor<float, token, d_in>;

TEST_CASE("select: one index along a dim, which disappears (inputs[1])", "[slice]") {
  t_t x(token{6}, d_in{3});
  test::fill_pattern(x);
  auto row = dimsum::select<token>(x, 1);
  static_assert(std::is_same_v<decltype(row), tensor_view<float, d_in>>);
  for (std::size_t d = 0; d < 3; ++d) CHECK(row(d_in{d}) == x(token{1}, d_in{d}));
  auto col = dimsum::select<d_in>(x, 2);  // a strided view
  for (std::size_t t = 0; t < 6; ++t) CHECK(col(token{t}) == x(token{t}, d_in{2}));
  auto lazy = dimsum::select<token>(x * 2.0f, 5);  // evaluated, then selected
  static_assert(std::is_same_v<decltype(lazy), tensor<float, d_in>>);
  CHECK(lazy(d_in{0}) == 2.0f * x(token{5}, d_in{0}));
  REQUIRE_THROWS_WITH(dimsum::select<token>(x, 6), Catch::Contains("index 6") && Catch::Contains("'token'") &&
                                                       Catch::Contains("extent 6"));
}

TEST_CASE("slice: a range along a dim, which stays (data[i:i+block])", "[slice]") {
  tensor<std::int64_t, token> ids(token{10});
  for (std::size_t i = 0; i < 10; ++i) ids(token{i}) = std::int64_t(100 + i);
  auto w = slice<token>(ids, 3, 7);
  CHECK(w.extent<token>() == 4);
  for (std::size_t i = 0; i < 4; ++i) CHECK(w(token{i}) == std::int64_t(103 + i));
  CHECK(slice<token>(ids, 4, 4).extent<token>() == 0);
  REQUIRE_THROWS_WITH(slice<token>(ids, 8, 11), Catch::Contains("[8, 11)") && Catch::Contains("extent 10"));
  REQUIRE_THROWS_AS(slice<token>(ids, 5, 4), shape_error);
}

TEST_CASE("stack: a new leading dim (torch.stack)", "[stack]") {
  std::vector<t_t> parts;
  for (int j = 0; j < 3; ++j) {
    t_t p(token{2}, d_in{3});
    test::fill_pattern(p, 0.1 * (j + 1), j);
    parts.push_back(p);
  }
  auto s = stack<batch>(parts);
  static_assert(has_dims<decltype(s), batch, token, d_in>);
  CHECK(s.extent<batch>() == 3);
  for (std::size_t j = 0; j < 3; ++j)
    for (std::size_t t = 0; t < 2; ++t)
      for (std::size_t d = 0; d < 3; ++d) CHECK(s(batch{j}, token{t}, d_in{d}) == parts[j](token{t}, d_in{d}));
  parts.push_back(t_t(token{3}, d_in{3}));
  REQUIRE_THROWS_WITH(stack<batch>(parts), Catch::Contains("'token'") && Catch::Contains("extent 2 in part 0") &&
                                               Catch::Contains("3 in part 3"));
  REQUIRE_THROWS_AS(stack<batch>(std::vector<t_t>{}), shape_error);
}

TEST_CASE("concat: along an existing dim (torch.cat)", "[stack]") {
  t_t a(token{2}, d_in{3}), b(token{4}, d_in{3});
  test::fill_pattern(a);
  test::fill_pattern(b, 0.5, 1.0);
  auto c = concat<token>(std::vector<t_t>{a, b});
  CHECK(c.extent<token>() == 6);
  CHECK(c(token{1}, d_in{2}) == a(token{1}, d_in{2}));
  CHECK(c(token{5}, d_in{0}) == b(token{3}, d_in{0}));
  auto c2 = concat<d_in>(std::vector<t_t>{a, a});
  CHECK(c2.extent<d_in>() == 6);
  CHECK(c2(token{1}, d_in{4}) == a(token{1}, d_in{1}));
  t_t bad(token{2}, d_in{4});
  REQUIRE_THROWS_WITH(concat<token>(std::vector<t_t>{a, bad}), Catch::Contains("'d_in'"));
  REQUIRE_THROWS_WITH(concat<token>(std::vector<t_t>{}), Catch::Contains("no tensors to join along 'token'"));
}
