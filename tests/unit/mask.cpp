// causal_mask and masked_fill, against hand-computed cases.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "support.hpp"

namespace {
DIMSUM_DIM(batch);
DIMSUM_DIM(q_posn);
DIMSUM_DIM(k_posn);
DIMSUM_DIM(nheads);
}  // namespace

using namespace dimsum;

TEST_CASE("causal_mask: the seed's 3x3 test case", "[mask]") {
  const float inf = std::numeric_limits<float>::infinity();
  tensor<float, q_posn, k_posn> s(q_posn{3}, k_posn{3});
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 3; ++j) s(q_posn{i}, k_posn{j}) = float(3 * i + j + 1);
  auto m = eval(causal_mask<q_posn, k_posn>(s, -inf));
  const float want[3][3] = {{1, -inf, -inf}, {4, 5, -inf}, {7, 8, 9}};
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 3; ++j) CHECK(m(q_posn{i}, k_posn{j}) == want[i][j]);
}

TEST_CASE("causal_mask: non-square, key index > query index is masked", "[mask]") {
  tensor<float, q_posn, k_posn> wide(q_posn{3}, k_posn{5});
  wide.fill(1.0f);
  auto m = eval(causal_mask<q_posn, k_posn>(wide, 0.0f));
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 5; ++j) CHECK(m(q_posn{i}, k_posn{j}) == (j > i ? 0.0f : 1.0f));
  tensor<float, q_posn, k_posn> tall(q_posn{5}, k_posn{3});
  tall.fill(1.0f);
  auto t = eval(causal_mask<q_posn, k_posn>(tall, 0.0f));
  for (std::size_t i = 0; i < 5; ++i)
    for (std::size_t j = 0; j < 3; ++j) CHECK(t(q_posn{i}, k_posn{j}) == (j > i ? 0.0f : 1.0f));
}

TEST_CASE("causal_mask: dims in any order, with other dims around", "[mask]") {
  tensor<float, k_posn, batch, q_posn> s(k_posn{4}, batch{2}, q_posn{4});
  test::fill_pattern(s);
  auto m = eval(causal_mask<q_posn, k_posn>(s * 1.0f, -7.0f));
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t i = 0; i < 4; ++i)
      for (std::size_t j = 0; j < 4; ++j)
        CHECK(m(batch{b}, q_posn{i}, k_posn{j}) == (j > i ? -7.0f : s(batch{b}, q_posn{i}, k_posn{j})));
}

TEST_CASE("masked_fill: a padding mask broadcast over heads and queries by name", "[mask]") {
  tensor<float, batch, nheads, q_posn, k_posn> s(batch{2}, nheads{2}, q_posn{3}, k_posn{3});
  test::fill_pattern(s);
  tensor<bool, batch, k_posn> pad(batch{2}, k_posn{3});
  pad(batch{0}, k_posn{2}) = true;
  pad(batch{1}, k_posn{0}) = true;
  pad(batch{1}, k_posn{1}) = true;
  auto m = eval(masked_fill(s, pad, -1e9f));
  static_assert(has_dims<decltype(m), batch, nheads, q_posn, k_posn>);
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t h = 0; h < 2; ++h)
      for (std::size_t i = 0; i < 3; ++i)
        for (std::size_t j = 0; j < 3; ++j)
          CHECK(m(batch{b}, nheads{h}, q_posn{i}, k_posn{j}) ==
                (pad(batch{b}, k_posn{j}) ? -1e9f : s(batch{b}, nheads{h}, q_posn{i}, k_posn{j})));
  tensor<bool, batch, k_posn> bad(batch{2}, k_posn{4});
  REQUIRE_THROWS_WITH(masked_fill(s, bad, 0.0f),
                      Catch::Contains("'k_posn'") && Catch::Contains("3") && Catch::Contains("4"));
}

TEST_CASE("masked rows: -inf gives NaN, -1e9 gives uniform weights", "[mask]") {
  tensor<float, q_posn, k_posn> s(q_posn{2}, k_posn{3});
  test::fill_pattern(s);
  tensor<bool, q_posn> all(q_posn{2});
  all(q_posn{0}) = true;
  auto p_inf = eval(softmax<k_posn>(masked_fill(s, all, -std::numeric_limits<float>::infinity())));
  auto p_fin = eval(softmax<k_posn>(masked_fill(s, all, -1e9f)));
  for (std::size_t j = 0; j < 3; ++j) {
    CHECK(std::isnan(p_inf(q_posn{0}, k_posn{j})));
    CHECK(p_fin(q_posn{0}, k_posn{j}) == Approx(1.0 / 3));
    CHECK_FALSE(std::isnan(p_inf(q_posn{1}, k_posn{j})));
  }
}

TEST_CASE("tril: true where the key index is at most the query index", "[mask]") {
  auto t = tril(q_posn{3}, k_posn{4});
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 4; ++j) CHECK(t(q_posn{i}, k_posn{j}) == (j <= i));
}
