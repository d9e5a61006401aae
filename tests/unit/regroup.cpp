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

TEST_CASE("regroup: a length passed for a dim an operand has is checked against it", "[regroup]") {
  tensor<float, posn, emb> x(posn{3}, emb{4});
  test::fill_pattern(x);
  // posn sits in an output group only: the length is still checked.
  REQUIRE_THROWS_WITH((rearrange<"posn emb -> pe(emb posn)">(x, posn{4})),
                      Catch::Contains("'posn' was passed with extent 4") && Catch::Contains("operand 0 has extent 3"));
  auto r = eval(rearrange<"posn emb -> pe(emb posn)">(x, posn{3}));
  REQUIRE(r.extents() == std::array<std::size_t, 1>{12});
  for (std::size_t p = 0; p < 3; ++p)
    for (std::size_t e = 0; e < 4; ++e) CHECK(r(dim<"pe">{e * 3 + p}) == x(posn{p}, emb{e}));
  // A group label that another operand has: the passed length must agree.
  tensor<float, batch, features> X(batch{2}, features{12});
  test::fill_pattern(X);
  tensor<float, d_k> Y(d_k{3});
  test::fill_pattern(Y, 0.5, 0.25);
  REQUIRE_THROWS_WITH((einsum<"batch features(nheads d_k), d_k -> batch nheads">(X, Y, d_k{4})),
                      Catch::Contains("'d_k' was passed with extent 4") && Catch::Contains("operand 1 has extent 3"));
  auto o = eval(einsum<"batch features(nheads d_k), d_k -> batch nheads">(X, Y, d_k{3}));
  REQUIRE(o.extents() == std::array<std::size_t, 2>{2, 4});
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t hh = 0; hh < 4; ++hh) {
      double want = 0;
      for (std::size_t d = 0; d < 3; ++d) want += double(X(batch{b}, features{hh * 3 + d})) * Y(d_k{d});
      CHECK(o(batch{b}, nheads{hh}) == Approx(want).epsilon(1e-6));
    }
}

TEST_CASE("regroup: a label left to infer from static extents is static", "[regroup]") {
  // Grouped-query heads: 4 query heads in groups over the 2 key/value heads.
  using q_heads = dim<"q_heads", 4>;
  using kv = dim<"kv", 2>;
  tensor<float, batch, q_heads> q(batch{2});
  test::fill_pattern(q);
  tensor<float, batch, kv> k(batch{2});
  test::fill_pattern(k, 0.5, 0.25);
  auto s = eval(einsum<"batch q_heads(kv group), batch kv -> batch kv group">(q, k));
  static_assert(dims_of_t<decltype(s)>::names[2] == "group" && dims_of_t<decltype(s)>::static_extents[2] == 2);
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t g = 0; g < 2; ++g)
      for (std::size_t j = 0; j < 2; ++j)
        CHECK(s(batch{b}, kv{j}, dim<"group", 2>{g}) == Approx(q(batch{b}, q_heads{j * 2 + g}) * k(batch{b}, kv{j})));
  // The same from a static dim passed after the operand.
  auto split = eval(rearrange<"batch q_heads(kv group) -> batch group kv">(q, kv{}));
  static_assert(dims_of_t<decltype(split)>::static_extents[1] == 2);
  CHECK(split(batch{1}, dim<"group", 2>{1}, kv{1}) == q(batch{1}, q_heads{3}));
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

// --- size-1 axes and lists of tensors, against make_einops_fixtures.py ---

#include "einops_fixtures.hpp"

namespace {
DIMSUM_DIM(h);
DIMSUM_DIM(w);
DIMSUM_DIM(n);
DIMSUM_DIM(nw);
DIMSUM_DIM(c);
}  // namespace

using einops_fixture::expect_near;
using einops_fixture::load;

TEST_CASE("regroup: size-1 axes dropped and added by rearrange", "[regroup][size-1]") {
  // `1` stands for the operand's dim at its position, which must have
  // extent 1 (c is dynamic here: checked at run time).
  const auto x = load<tensor<double, batch, c, h, w>>("squeeze_x");
  auto s = rearrange<"batch 1 h w -> batch h w">(x);
  expect_near(s, load<tensor<double, batch, h, w>>("squeeze_out"), 0);
  const auto y = load<tensor<double, batch, h, w>>("unsqueeze_x");
  auto u = rearrange<"batch h w -> batch 1 h () w">(y);
  static_assert(has_dims<decltype(u), batch, unit_axis<1>, h, unit_axis<3>, w>);
  expect_near(u, load<tensor<double, batch, unit_axis<1>, h, unit_axis<3>, w>>("unsqueeze_out"), 0);
  // Inside a group, 1 changes nothing (einops ignores it).
  auto g = eval(rearrange<"batch h w -> batch hw(h 1 w)">(y));
  CHECK(g(dim<"hw">{5}, batch{1}) == y(batch{1}, h{1}, w{1}));
  // A `1` at a dim whose extent is not 1: shape_error naming the dim.
  CHECK_THROWS_WITH((rearrange<"1 h w -> h w">(y)), Catch::Contains("'batch'") && Catch::Contains("extent 2"));
  // A size-1 axis in einsum: dropped from the operand, added to the output.
  const auto v = tensor<double, h, w>::random_normal(5, h{3}, w{4});
  auto e = eval(einsum<"batch 1 h w, h w -> 1 batch">(x, v));
  static_assert(has_dims<decltype(e), unit_axis<0>, batch>);
  double want = 0;
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 4; ++j) want += x(batch{1}, c{0}, h{i}, w{j}) * v(h{i}, w{j});
  CHECK(e(unit_axis<0>{0}, batch{1}) == Approx(want).epsilon(1e-14));
}

TEST_CASE("regroup: a list of tensors as rearrange's operand", "[regroup][list]") {
  std::vector<tensor<double, h, w>> parts;
  for (int i = 0; i < 5; ++i) parts.push_back(load<tensor<double, h, w>>("list_part" + std::to_string(i)));
  // einops: rearrange([t1, ...], "n h w -> h (n w)"); the first label names the list's dim.
  auto r = rearrange<"n h w -> h nw(n w)">(parts);
  expect_near(r, load<tensor<double, h, nw>>("list_out"), 0);
  // A std::array's length is the list dim's static extent.
  const std::array<tensor<double, h, w>, 2> pair{parts[0], parts[1]};
  auto st = eval(rearrange<"n h w -> n h w">(pair));
  static_assert(dims_of_t<decltype(st)>::static_extents[0] == 2);
  CHECK(st(dim<"n", 2>{1}, h{2}, w{3}) == parts[1](h{2}, w{3}));
  // Elements of different extents, and an empty list: shape_error.
  parts.push_back(tensor<double, h, w>(h{3}, w{5}));
  CHECK_THROWS_WITH((rearrange<"n h w -> h nw(n w)">(parts)), Catch::Contains("'w'") && Catch::Contains("element 5"));
  CHECK_THROWS_AS((rearrange<"n h w -> h nw(n w)">(std::vector<tensor<double, h, w>>{})), shape_error);
}
