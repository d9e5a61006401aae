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

// --- ... in every pattern, on tensors and on grad vars ---------------------
// Gradients against torch float64 autograd of einops' rules written out
// (make_einops_fixtures.py): loss = sum(out * r), d loss / d x.

#include <dimsum/grad/grad.hpp>

#include "einops_fixtures.hpp"

namespace {
DIMSUM_DIM(h);
DIMSUM_DIM(w);
DIMSUM_DIM(h2);
DIMSUM_DIM(w2);
DIMSUM_DIM(n);
DIMSUM_DIM(d);
DIMSUM_DIM(r);
DIMSUM_DIM(hh);
DIMSUM_DIM(ww);
DIMSUM_DIM(one, 1);
DIMSUM_DIM(f);

using einops_fixture::expect_near;
using einops_fixture::load;

// Watches the fixture's x on a tape, applies op, and checks the value and
// d sum(out * r) / dx against the fixture.
template <class X, class Out, class Op>
void check_grad(const std::string& name, Op op) {
  dimsum::grad::tape tape;
  auto x = tape.watch(load<X>(name + "_x"));
  auto out = op(x);
  static_assert(dimsum::grad::detail::var_like<decltype(out)>);
  expect_near(out.value(), load<Out>(name + "_out"), 1e-13);
  tape.backward(dimsum::einsum<>(out * load<Out>(name + "_r")));
  expect_near(dimsum::gradient(x), load<X>(name + "_grad"), 1e-13);
}
}  // namespace

TEST_CASE("ellipsis on vars: reduce, with its gradient", "[ellipsis][grad]") {
  using dimsum::reduce;
  using dimsum::unit_axis;
  check_grad<tensor<double, batch, h, w>, tensor<double, batch, h, w>>(
      "grad_maxpool", [](const auto& x) { return reduce<"batch (h h2) (w w2) -> batch h w", "max">(x, h2{2}, w2{3}); });
  check_grad<tensor<double, batch, h, w>, tensor<double, batch, unit_axis<1>, unit_axis<2>>>(
      "grad_mean_keepdims",
      [](const auto& x) { return dimsum::rearrange<"batch -> batch 1 1">(reduce<"batch ... -> batch 1 1", "mean">(x)); });
  check_grad<tensor<double, batch, n>, tensor<double, batch>>(
      "grad_prod", [](const auto& x) { return reduce<"batch n -> batch", "prod">(x); });
  check_grad<tensor<double, batch, posn, n>, tensor<double, batch, posn>>(
      "grad_logsumexp", [](const auto& x) { return reduce<"... n -> ...", "logsumexp">(x); });
  check_grad<tensor<double, batch, posn, d>, tensor<double, d>>(
      "grad_min_ellipsis", [](const auto& x) { return reduce<"... d -> d", "min">(x); });
  // The named spellings of prod and logsumexp share the rule.
  check_grad<tensor<double, batch, n>, tensor<double, batch>>("grad_prod",
                                                               [](const auto& x) { return dimsum::prod<n>(x); });
  check_grad<tensor<double, batch, posn, n>, tensor<double, batch, posn>>(
      "grad_logsumexp", [](const auto& x) { return dimsum::logsumexp<n>(x); });
}

TEST_CASE("ellipsis on vars: repeat, rearrange and einsum, with their gradients", "[ellipsis][grad]") {
  using dimsum::repeat;
  using dimsum::unit_axis;
  check_grad<tensor<double, h, w>, tensor<double, hh, w>>(
      "grad_repeat_tile", [](const auto& x) { return repeat<"h w -> hh(r h) w">(x, r{2}); });
  check_grad<tensor<double, h, w>, tensor<double, h, ww>>(
      "grad_repeat_interleave", [](const auto& x) { return repeat<"h w -> h ww(w r)">(x, r{3}); });
  check_grad<tensor<double, batch, posn, d>, tensor<double, batch, posn, r, d>>(
      "grad_repeat_ellipsis", [](const auto& x) { return repeat<"... d -> ... r d">(x, r{5}); });
  // A named size-1 dim dropped by `one()`, a size-1 axis added by `1`.
  check_grad<tensor<double, batch, posn, one, w>, tensor<double, w, batch, posn, unit_axis<3>>>(
      "grad_rearrange_units", [](const auto& x) { return dimsum::rearrange<"... one() w -> w ... 1">(x); });
  const auto wt = load<tensor<double, d, f>>("grad_einsum_w");
  check_grad<tensor<double, batch, posn, d>, tensor<double, batch, posn, f>>(
      "grad_einsum_ellipsis", [&](const auto& x) { return dimsum::einsum<"... d, d f -> ... f">(x, wt); });
  // The named repeat on a var sums the gradient over the new dim.
  dimsum::grad::tape tape;
  auto x = tape.watch(tensor<double, n>::random_normal(3, n{3}));
  tape.backward(dimsum::einsum<>(repeat(x, batch{4}) * 2.0));
  for (std::size_t i = 0; i < 3; ++i) CHECK(dimsum::gradient(x)(n{i}) == 8.0);
}

TEST_CASE("ellipsis: size-1 axes made by a pattern are matched by `1`, or stand in `...`", "[ellipsis]") {
  using dimsum::unit_axis;
  const auto x = tensor<double, batch, posn, d>::random_normal(11, batch{2}, posn{3}, d{4});
  const auto m = dimsum::eval(dimsum::rearrange<"batch d -> batch 1 d">(dimsum::reduce<"batch posn d -> batch d", "mean">(x)));
  static_assert(has_dims<decltype(m), batch, unit_axis<1>, d>);
  // `1` in a term with `...` takes the operand's size-1 axes in order...
  auto squeezed = dimsum::eval(dimsum::rearrange<"... 1 d -> d ...">(m));
  static_assert(has_dims<decltype(squeezed), d, batch>);
  CHECK(squeezed(d{2}, batch{1}) == m(batch{1}, unit_axis<1>{0}, d{2}));
  // ...and otherwise `...` carries them, as size-1 axes at their new places.
  auto moved = dimsum::eval(dimsum::rearrange<"... d -> d ...">(m));
  static_assert(has_dims<decltype(moved), d, batch, unit_axis<2>>);
  CHECK(moved(d{3}, batch{0}, unit_axis<2>{0}) == m(batch{0}, unit_axis<1>{0}, d{3}));
  // Flattening `...` into a named group (einops' "b (...)").
  auto flat = dimsum::eval(dimsum::rearrange<"batch ... -> batch rest(...)">(x));
  static_assert(has_dims<decltype(flat), batch, dimsum::dim<"rest">>);
  CHECK(flat(batch{1}, dimsum::dim<"rest">{2 * 4 + 1}) == x(batch{1}, posn{2}, d{1}));
  const auto v = tensor<double, batch>::random_normal(12, batch{2});
  auto nothing = dimsum::eval(dimsum::rearrange<"batch ... -> batch rest(...)">(v));  // zero dims: extent 1
  CHECK(nothing.extents() == std::array<std::size_t, 2>{2, 1});
}
