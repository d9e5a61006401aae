// Ellipsis in einsum and rearrange strings (ops/detail/einsum_ellipsis.hpp):
// `...` stands for the operand's dims the term does not name, by name, in
// its order. Expected values from plain loops; the result types by
// static_assert, including an ellipsis that matches no dim.
#include <catch2/catch.hpp>

#include <dimsum/dimsum.hpp>

using dimsum::has_dims;
using dimsum::tensor;

namespace {
DIMSUM_DIM(batch);
DIMSUM_DIM(posn);
DIMSUM_DIM(nheads);
DIMSUM_DIM(d_head);
DIMSUM_DIM(hd);
DIMSUM_DIM(d_model);
DIMSUM_DIM(d_ff);

// A linear layer written once for any leading dims.
template <class X, class W>
auto linear(const X& x, const W& w) {
  return dimsum::eval(dimsum::einsum<"... d_model, d_model d_ff -> ... d_ff">(x, w));
}
}  // namespace

TEST_CASE("einsum with ... over any leading dims, zero included", "[ellipsis]") {
  const auto w = tensor<double, d_model, d_ff>::random_normal(1, d_model{4}, d_ff{3});
  const auto x3 = tensor<double, batch, posn, d_model>::random_normal(2, batch{2}, posn{5}, d_model{4});
  const auto x1 = tensor<double, d_model>::random_normal(3, d_model{4});
  const auto y3 = linear(x3, w);
  const auto y1 = linear(x1, w);  // the ellipsis matches no dim
  static_assert(has_dims<decltype(y3), batch, posn, d_ff>);
  static_assert(has_dims<decltype(y1), d_ff>);
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t p = 0; p < 5; ++p)
      for (std::size_t f = 0; f < 3; ++f) {
        double want = 0;
        for (std::size_t m = 0; m < 4; ++m) want += x3(batch{b}, posn{p}, d_model{m}) * w(d_model{m}, d_ff{f});
        CHECK(std::abs(y3(batch{b}, posn{p}, d_ff{f}) - want) < 1e-12);
      }
  for (std::size_t f = 0; f < 3; ++f) {
    double want = 0;
    for (std::size_t m = 0; m < 4; ++m) want += x1(d_model{m}) * w(d_model{m}, d_ff{f});
    CHECK(std::abs(y1(d_ff{f}) - want) < 1e-12);
  }
}

TEST_CASE("ellipsis dims are found by name wherever they sit", "[ellipsis]") {
  // d_model is in the middle: the ellipsis stands for (batch, posn) around it.
  const auto x = tensor<double, batch, d_model, posn>::random_normal(4, batch{2}, d_model{3}, posn{2});
  const auto w = tensor<double, d_model, d_ff>::random_normal(5, d_model{3}, d_ff{2});
  const auto y = dimsum::eval(dimsum::einsum<"... d_model, d_model d_ff -> d_ff ...">(x, w));
  static_assert(has_dims<decltype(y), d_ff, batch, posn>);
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t p = 0; p < 2; ++p)
      for (std::size_t f = 0; f < 2; ++f) {
        double want = 0;
        for (std::size_t m = 0; m < 3; ++m) want += x(batch{b}, d_model{m}, posn{p}) * w(d_model{m}, d_ff{f});
        CHECK(std::abs(y(d_ff{f}, batch{b}, posn{p}) - want) < 1e-12);
      }
}

TEST_CASE("rearrange with ...: merge and split the last dims of any tensor", "[ellipsis]") {
  const auto q = tensor<double, batch, posn, nheads, d_head>::random_normal(6, batch{2}, posn{3}, nheads{2}, d_head{4});
  const auto merged = dimsum::eval(dimsum::rearrange<"... nheads d_head -> ... hd(nheads d_head)">(q));
  static_assert(has_dims<decltype(merged), batch, posn, hd>);
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t p = 0; p < 3; ++p)
      for (std::size_t h = 0; h < 2; ++h)
        for (std::size_t d = 0; d < 4; ++d)
          CHECK(merged(batch{b}, posn{p}, hd{h * 4 + d}) == q(batch{b}, posn{p}, nheads{h}, d_head{d}));
  const auto split = dimsum::eval(dimsum::rearrange<"... hd(nheads d_head) -> nheads ... d_head">(merged, nheads{2}));
  static_assert(has_dims<decltype(split), nheads, batch, posn, d_head>);
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t p = 0; p < 3; ++p)
      for (std::size_t h = 0; h < 2; ++h)
        for (std::size_t d = 0; d < 4; ++d)
          CHECK(split(nheads{h}, batch{b}, posn{p}, d_head{d}) == q(batch{b}, posn{p}, nheads{h}, d_head{d}));
  // Zero dims matched: a rank-2 tensor.
  const auto small = tensor<double, nheads, d_head>::random_normal(7, nheads{2}, d_head{3});
  const auto flat = dimsum::eval(dimsum::rearrange<"... nheads d_head -> ... hd(nheads d_head)">(small));
  static_assert(has_dims<decltype(flat), hd>);
  CHECK(flat(hd{4}) == small(nheads{1}, d_head{1}));
}

TEST_CASE("einsum with ... in two operands: the union of their other dims", "[ellipsis]") {
  const auto a = tensor<double, batch, posn, d_model>::random_normal(8, batch{2}, posn{3}, d_model{4});
  const auto b = tensor<double, nheads, d_model>::random_normal(9, nheads{2}, d_model{4});
  const auto y = dimsum::eval(dimsum::einsum<"... d_model, ... d_model -> ...">(a, b));
  static_assert(has_dims<decltype(y), batch, posn, nheads>);
  double want = 0;
  for (std::size_t m = 0; m < 4; ++m) want += a(batch{1}, posn{2}, d_model{m}) * b(nheads{1}, d_model{m});
  CHECK(std::abs(y(batch{1}, posn{2}, nheads{1}) - want) < 1e-12);
}
