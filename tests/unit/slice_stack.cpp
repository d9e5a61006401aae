// select, slice, stack and concat by name, with bounds and extent checks.
#include <catch2/catch.hpp>

#include <cmath>

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

TEST_CASE("slice assignment: an expression into a slice, matched by name (x[:, 1:3] = y)", "[slice][assign]") {
  t_t x(token{4}, d_in{5});
  test::fill_pattern(x);
  const t_t before = x;
  tensor<float, d_in, token> y(d_in{2}, token{4});  // transposed order: placed by name
  test::fill_pattern(y, 0.5, 2.0);
  slice<d_in>(x, 1, 3) = y;
  for (std::size_t t = 0; t < 4; ++t)
    for (std::size_t d = 0; d < 5; ++d)
      CHECK(x(token{t}, d_in{d}) == (d >= 1 && d < 3 ? y(d_in{d - 1}, token{t}) : before(token{t}, d_in{d})));
  // A lazy expression, and a source that broadcasts over the view's other dim.
  tensor<float, d_in> bias(d_in{5});
  test::fill_pattern(bias, 1.0, 0.25);
  slice<token>(x, 2, 4) = bias * 2.0f + 1.0f;
  for (std::size_t t = 2; t < 4; ++t)
    for (std::size_t d = 0; d < 5; ++d) CHECK(x(token{t}, d_in{d}) == bias(d_in{d}) * 2.0f + 1.0f);
  CHECK(x(token{1}, d_in{0}) == before(token{1}, d_in{0}));
}

TEST_CASE("slice assignment: a scalar into a select, compound assignment, and same-type views copy values",
          "[slice][assign]") {
  t_t x(token{3}, d_in{4});
  test::fill_pattern(x);
  const t_t before = x;
  dimsum::select<d_in>(x, 0) = 0.0f;  // x[..., 0] = 0
  slice<token>(x, 1, 3) += 10.0f;     // x[1:3] += 10
  tensor<float, token> w(token{3});
  test::fill_pattern(w, 2.0, 1.0);
  dimsum::select<d_in>(x, 3) *= w;    // x[:, 3] *= w
  for (std::size_t t = 0; t < 3; ++t)
    for (std::size_t d = 0; d < 4; ++d) {
      float want = d == 0 ? 0.0f : before(token{t}, d_in{d});
      if (t >= 1) want += 10.0f;
      if (d == 3) want *= w(token{t});
      CHECK(x(token{t}, d_in{d}) == want);
    }
  // Assigning one view to another of the same type writes elements; it does
  // not rebind the view.
  auto first = dimsum::select<token>(x, 0);
  const float* where = first.data();
  first = dimsum::select<token>(x, 2);
  CHECK(first.data() == where);
  for (std::size_t d = 0; d < 4; ++d) CHECK(x(token{0}, d_in{d}) == x(token{2}, d_in{d}));
  // bool and integer elements, extent 1, and an empty slice (writes nothing).
  tensor<bool, token, d_in> m(token{1}, d_in{3});
  slice<d_in>(m, 1, 3) = true;
  CHECK((!m(token{0}, d_in{0}) && m(token{0}, d_in{1}) && m(token{0}, d_in{2})));
  tensor<std::int64_t, token> ids(token{4});
  slice<token>(ids, 2, 2) = std::int64_t(7);
  slice<token>(ids, 3, 4) = tensor<std::int64_t, token>::full(9, token{1});
  CHECK((ids(token{0}) == 0 && ids(token{2}) == 0 && ids(token{3}) == 9));
  t_t empty(token{0}, d_in{4});
  slice<d_in>(empty, 1, 3) = tensor<float, token, d_in>(token{0}, d_in{2});
  CHECK(empty.size() == 0);
}

TEST_CASE("slice assignment: a source that reads the memory it overwrites gives numpy's values", "[slice][assign]") {
  // Values from numpy (torch refuses a partly overlapping copy): a = arange(10.)
  auto arange10 = [] {
    tensor<float, token> a(token{10});
    for (std::size_t i = 0; i < 10; ++i) a(token{i}) = float(i);
    return a;
  };
  auto values = [](const tensor<float, token>& a) { return std::vector<float>(a.data(), a.data() + a.size()); };
  auto a = arange10();
  slice<token>(a, 0, 5) = slice<token>(a, 3, 8);  // a[0:5] = a[3:8]
  CHECK(values(a) == std::vector<float>{3, 4, 5, 6, 7, 5, 6, 7, 8, 9});
  a = arange10();
  slice<token>(a, 3, 8) = slice<token>(a, 0, 5);  // a[3:8] = a[0:5]
  CHECK(values(a) == std::vector<float>{0, 1, 2, 0, 1, 2, 3, 4, 8, 9});
  a = arange10();
  slice<token>(a, 3, 8) = slice<token>(a, 0, 5) * 2.0f;  // torch: x[3:8] = x[0:5] * 2
  CHECK(values(a) == std::vector<float>{0, 1, 2, 0, 2, 4, 6, 8, 8, 9});
  a = arange10();
  slice<token>(a, 1, 10) -= slice<token>(a, 0, 9);  // a[1:] -= a[:-1]: differences of the old values
  CHECK(values(a) == std::vector<float>{0, 1, 1, 1, 1, 1, 1, 1, 1, 1});
  // Transposing a square matrix in place through renamed views of itself.
  t_t x(token{3}, d_in{3});
  test::fill_pattern(x);
  const t_t before = x;
  x.view() = rename<batch, d_in>(rename<d_in, token>(rename<token, batch>(x)));
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 3; ++j) CHECK(x(token{i}, d_in{j}) == before(token{j}, d_in{i}));
}

TEST_CASE("slice assignment: a source of other extents throws shape_error naming the dim and both extents",
          "[slice][assign]") {
  t_t x(token{4}, d_in{5});
  tensor<float, d_in> wrong(d_in{3});
  REQUIRE_THROWS_WITH(slice<token>(x, 0, 2) = wrong, Catch::Contains("assignment into a view") &&
                                                         Catch::Contains("'d_in'") && Catch::Contains("extent 5") &&
                                                         Catch::Contains("but 3"));
  REQUIRE_THROWS_WITH(slice<d_in>(x, 0, 2) = t_t(token{4}, d_in{3}),
                      Catch::Contains("'d_in'") && Catch::Contains("extent 2") && Catch::Contains("but 3"));
  CHECK(x(token{0}, d_in{0}) == 0.0f);  // nothing written
  // A view whose dim repeats one element (stride 0, as an expanded tensor).
  std::vector<float> one{1.0f};
  tensor_view<float, token> expanded(one.data(), {3}, {0});
  REQUIRE_THROWS_WITH(expanded = 2.0f, Catch::Contains("'token' of extent 3 has stride 0"));
  CHECK(one[0] == 1.0f);
}

TEST_CASE("concat, stack: views and lazy expressions, listed or in a vector, placed by name", "[stack]") {
  t_t x(token{5}, d_in{3});
  test::fill_pattern(x);
  tensor<float, d_in, token> y(d_in{3}, token{2});  // another dims order
  test::fill_pattern(y, 0.5, 1.0);
  // torch.cat([x[3:], y.T * 2, x[:1]]) along token
  auto c = concat<token>(slice<token>(x, 3, 5), y * 2.0f, slice<token>(x, 0, 1));
  static_assert(std::is_same_v<decltype(c), t_t>);
  REQUIRE(c.extent<token>() == 5);
  for (std::size_t d = 0; d < 3; ++d) {
    CHECK(c(token{0}, d_in{d}) == x(token{3}, d_in{d}));
    CHECK(c(token{1}, d_in{d}) == x(token{4}, d_in{d}));
    CHECK(c(token{2}, d_in{d}) == 2.0f * y(d_in{d}, token{0}));
    CHECK(c(token{3}, d_in{d}) == 2.0f * y(d_in{d}, token{1}));
    CHECK(c(token{4}, d_in{d}) == x(token{0}, d_in{d}));
  }
  // torch.cat([x[:, 2:3], x[:, :2].exp()], dim=1)
  auto c2 = concat<d_in>(slice<d_in>(x, 2, 3), exp(slice<d_in>(x, 0, 2)));
  for (std::size_t t = 0; t < 5; ++t) {
    CHECK(c2(token{t}, d_in{0}) == x(token{t}, d_in{2}));
    CHECK(c2(token{t}, d_in{1}) == std::exp(x(token{t}, d_in{0})));
    CHECK(c2(token{t}, d_in{2}) == std::exp(x(token{t}, d_in{1})));
  }
  // torch.stack([x[4], -x[0]])
  auto s = stack<batch>(dimsum::select<token>(x, 4), dimsum::select<token>(x, 0) * -1.0f);
  static_assert(std::is_same_v<decltype(s), tensor<float, batch, d_in>>);
  for (std::size_t d = 0; d < 3; ++d) {
    CHECK(s(batch{0}, d_in{d}) == x(token{4}, d_in{d}));
    CHECK(s(batch{1}, d_in{d}) == -x(token{0}, d_in{d}));
  }
  // a vector of views (rows 1 and 3)
  std::vector<tensor_view<float, d_in>> rows{dimsum::select<token>(x, 1), dimsum::select<token>(x, 3)};
  auto sv = stack<batch>(rows);
  auto cv = concat<d_in>(rows);
  for (std::size_t d = 0; d < 3; ++d) {
    CHECK(sv(batch{1}, d_in{d}) == x(token{3}, d_in{d}));
    CHECK(cv(d_in{d}) == x(token{1}, d_in{d}));
    CHECK(cv(d_in{3 + d}) == x(token{3}, d_in{d}));
  }
  // an empty part, a single part
  auto ce = concat<token>(slice<token>(x, 2, 2), y);
  CHECK(ce.extent<token>() == 2);
  CHECK(ce(token{1}, d_in{2}) == y(d_in{2}, token{1}));
  CHECK(stack<batch>(y).extent<batch>() == 1);
  REQUIRE_THROWS_WITH(concat<token>(x, tensor<float, token, d_in>(token{1}, d_in{4})),
                      Catch::Contains("concat: dim 'd_in' has extent 3 in part 0 but 4 in part 1"));
  REQUIRE_THROWS_WITH(stack<batch>(x, y), Catch::Contains("stack: dim 'token' has extent 5 in part 0 but 2 in part 1"));
}
