// rename: free for tensors (a view, or the same storage), relabelling for
// lazy expressions, checked against static extents.
#include <catch2/catch.hpp>

#include "support.hpp"

namespace {
DIMSUM_DIM(posn);
DIMSUM_DIM(q_posn);
DIMSUM_DIM(k_posn);
DIMSUM_DIM(d_head);
}  // namespace

using namespace dimsum;

TEST_CASE("rename: an lvalue tensor gives a view of the same memory", "[rename]") {
  tensor<float, posn, d_head> t(posn{3}, d_head{2});
  test::fill_pattern(t);
  auto v = rename<posn, q_posn>(t);
  CHECK(v.data() == t.data());
  CHECK(v(q_posn{2}, d_head{1}) == t(posn{2}, d_head{1}));
  v(q_posn{0}, d_head{0}) = 42.0f;  // writes through
  CHECK(t(posn{0}, d_head{0}) == 42.0f);
  const auto& ct = t;
  auto cv = rename<posn, k_posn>(ct);
  static_assert(std::is_same_v<decltype(cv), tensor_view<const float, k_posn, d_head>>);
}

TEST_CASE("rename: an rvalue tensor keeps its storage", "[rename]") {
  tensor<float, posn, d_head> t(posn{3}, d_head{2});
  const float* p = t.data();
  auto r = rename<posn, q_posn>(std::move(t));
  static_assert(std::is_same_v<decltype(r), tensor<float, q_posn, d_head>>);
  CHECK(r.data() == p);
}

TEST_CASE("rename: of a lazy expression, and back", "[rename]") {
  tensor<float, posn, d_head> t(posn{3}, d_head{2});
  test::fill_pattern(t);
  auto e = eval(rename<posn, k_posn>(t * 2.0f) + rename<posn, k_posn>(t));
  static_assert(has_dims<decltype(e), k_posn, d_head>);
  CHECK(e(k_posn{1}, d_head{1}) == Approx(3 * t(posn{1}, d_head{1})));
  auto back = eval(rename<k_posn, posn>(rename<posn, k_posn>(t)));
  CHECK(test::flat(back) == test::flat(t));
}

TEST_CASE("rename: to a static dim checks the extent", "[rename]") {
  tensor<float, posn, d_head> t(posn{3}, d_head{2});
  using four = dim<"four", 4>;
  REQUIRE_THROWS_WITH((rename<posn, four>(t)), Catch::Contains("'four'") && Catch::Contains("4") && Catch::Contains("3"));
  using three = dim<"three", 3>;
  auto v = rename<posn, three>(t);
  CHECK(v.extent<three>() == 3);
}

TEST_CASE("rename: a renamed lazy expression next to the original name", "[rename]") {
  // The root holds both posn and q_posn: the renamed side must not read
  // through posn's strides.
  tensor<float, posn, d_head> a(posn{3}, d_head{2});
  tensor<float, posn, d_head> b(posn{4}, d_head{2});
  test::fill_pattern(a);
  test::fill_pattern(b, 0.5, 1.0);
  auto r = eval(rename<posn, q_posn>(a * 1.0f) + b);
  static_assert(has_dims<decltype(r), q_posn, d_head, posn>);
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t d = 0; d < 2; ++d)
      for (std::size_t j = 0; j < 4; ++j)
        CHECK(r(q_posn{i}, d_head{d}, posn{j}) == a(posn{i}, d_head{d}) + b(posn{j}, d_head{d}));
}
