// Grouped axes: einsum strings that split `(nheads d_k)` and merge
// `features(nheads d_k)`, rearrange, and their extent checks: seed 003's
// Linear -> view -> transpose in one line.
#include <catch2/catch.hpp>

#include "support.hpp"

namespace {
DIMSUM_DIM(batch);
DIMSUM_DIM(posn);
DIMSUM_DIM(features);
DIMSUM_DIM(nheads);
DIMSUM_DIM(d_k);
DIMSUM_DIM(emb);
}  // namespace

using namespace dimsum;
using x_t = tensor<float, batch, posn, features>;

TEST_CASE("regroup: split features into heads, as view(b, p, h, d).transpose(1, 2)", "[regroup]") {
  x_t x(batch{2}, posn{3}, features{6});
  test::fill_pattern(x);
  auto h = eval(rearrange<"batch posn (nheads d_k) -> batch nheads posn d_k">(x, nheads{2}));
  static_assert(has_dims<decltype(h), batch, nheads, posn, d_k>);
  CHECK(h.extents() == std::array<std::size_t, 4>{2, 2, 3, 3});
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t hh = 0; hh < 2; ++hh)
      for (std::size_t p = 0; p < 3; ++p)
        for (std::size_t d = 0; d < 3; ++d)
          CHECK(h(batch{b}, nheads{hh}, posn{p}, d_k{d}) == x(batch{b}, posn{p}, features{hh * 3 + d}));
  // The other label's extent may be the one given.
  auto h2 = eval(rearrange<"batch posn (nheads d_k) -> batch nheads posn d_k">(x, d_k{3}));
  CHECK(test::flat(h2) == test::flat(h));
}

TEST_CASE("regroup: merge heads back, as transpose(1, 2).contiguous().view(b, p, h * d)", "[regroup]") {
  tensor<float, batch, nheads, posn, d_k> h(batch{2}, nheads{2}, posn{3}, d_k{3});
  test::fill_pattern(h);
  auto x = eval(rearrange<"batch nheads posn d_k -> batch posn features(nheads d_k)">(h));
  static_assert(has_dims<decltype(x), batch, posn, features>);
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t hh = 0; hh < 2; ++hh)
      for (std::size_t p = 0; p < 3; ++p)
        for (std::size_t d = 0; d < 3; ++d)
          CHECK(x(batch{b}, posn{p}, features{hh * 3 + d}) == h(batch{b}, nheads{hh}, posn{p}, d_k{d}));
  // A merged dim that a tensor type names takes that type.
  x_t typed = rearrange<"batch nheads posn d_k -> batch posn features(nheads d_k)">(h);
  CHECK(test::flat(typed) == test::flat(x));
}

TEST_CASE("regroup: split inside a contraction takes extents from the other operand", "[regroup]") {
  x_t x(batch{2}, posn{3}, features{6});
  test::fill_pattern(x);
  tensor<float, nheads, d_k, emb> W(nheads{2}, d_k{3}, emb{4});
  test::fill_pattern(W, 0.3, 0.2);
  auto o = eval(einsum<"batch posn (nheads d_k), nheads d_k emb -> batch posn emb">(x, W));
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t p = 0; p < 3; ++p)
      for (std::size_t e = 0; e < 4; ++e) {
        double want = 0;
        for (std::size_t hh = 0; hh < 2; ++hh)
          for (std::size_t d = 0; d < 3; ++d)
            want += double(x(batch{b}, posn{p}, features{hh * 3 + d})) * W(nheads{hh}, d_k{d}, emb{e});
        CHECK(o(batch{b}, posn{p}, emb{e}) == Approx(want).epsilon(1e-5));
      }
  // A named group must name its operand's dim; lazy and rvalue operands are
  // evaluated once and reshaped in place.
  auto o2 = eval(einsum<"batch posn features(nheads d_k), nheads d_k emb -> batch posn emb">(x * 1.0f, W));
  CHECK(test::flat(o2) == test::flat(o));
  x_t copy = x;
  auto o3 = eval(einsum<"batch posn (nheads d_k), nheads d_k emb -> batch posn emb">(std::move(copy), W));
  CHECK(test::flat(o3) == test::flat(o));
}

TEST_CASE("regroup: a dim given for a static group label must agree", "[regroup]") {
  x_t x(batch{1}, posn{2}, features{8});
  using four = dim<"four", 4>;
  auto ok = eval(rearrange<"batch posn (four d_k) -> batch four posn d_k">(x, four{}));
  CHECK(ok.extent<d_k>() == 2);
  REQUIRE_THROWS_WITH((rearrange<"batch posn (four d_k) -> batch four posn d_k">(x, four{5})),
                      Catch::Contains("'four' is static with extent 4") && Catch::Contains("5"));
}

TEST_CASE("regroup: a group whose extents do not multiply out throws", "[regroup]") {
  x_t x(batch{1}, posn{2}, features{6});
  REQUIRE_THROWS_WITH((rearrange<"batch posn (nheads d_k) -> batch nheads posn d_k">(x, nheads{4})),
                      Catch::Contains("dim 'features' of extent 6") && Catch::Contains("nheads=4"));
  tensor<float, nheads, d_k, emb> W(nheads{2}, d_k{4}, emb{1});
  REQUIRE_THROWS_WITH((einsum<"batch posn (nheads d_k), nheads d_k emb -> batch posn emb">(x, W)),
                      Catch::Contains("'features' of extent 6") && Catch::Contains("nheads=2 x d_k=4"));
}

TEST_CASE("regroup: a merge into a static dim checks its extent", "[regroup]") {
  tensor<float, batch, nheads, posn, d_k> h(batch{1}, nheads{2}, posn{3}, d_k{2});
  using six = dim<"six", 6>;
  REQUIRE_THROWS_WITH((rearrange<"batch nheads posn d_k -> batch posn six(nheads d_k)">(h, six{})),
                      Catch::Contains("'six' is static with extent 6") && Catch::Contains("4"));
}
