// Every operation on vars against central finite differences in double
// (grad_check.hpp): einsum in both spellings with grouped axes, three
// operands and dims summed out of one operand alone; element-wise
// operations with broadcasting by name and scalars; exp, sqrt; sum, mean,
// max, min; softmax; cumsum (and argmax, argmin: no gradient); causal_mask, masked_fill (fully masked rows
// included), where; rename, rearrange; extent-1 dims broadcast along several
// dims with a parameter used twice and x = f(x) in a loop.
#include "grad_check.hpp"

#include <limits>

using dimsum::parameter;
using dimsum::tensor;
using grad_check::check;
using grad_check::loss_of;
using grad_check::random_parameter;
namespace grad = dimsum::grad;

namespace {
DIMSUM_DIM(a);
DIMSUM_DIM(b);
DIMSUM_DIM(c);
DIMSUM_DIM(e);
DIMSUM_DIM(h);
DIMSUM_DIM(d);
DIMSUM_DIM(hd);
DIMSUM_DIM(q);
DIMSUM_DIM(k);


using ab_t = parameter<double, a, b>;
using bc_t = parameter<double, b, c>;
}  // namespace

TEST_CASE("grad einsum: string form, two operands", "[grad][einsum]") {
  auto x = random_parameter<ab_t>(1, 1.0, a{3}, b{4});
  auto y = random_parameter<bc_t>(2, 1.0, b{4}, c{2});
  check([](grad::tape&, auto x, auto y) { return loss_of(dimsum::einsum<"a b, b c -> a c">(x, y)); }, x, y);
}

TEST_CASE("grad einsum: named form, output order differs from the operands", "[grad][einsum]") {
  auto x = random_parameter<ab_t>(3, 1.0, a{3}, b{4});
  auto y = random_parameter<bc_t>(4, 1.0, b{4}, c{2});
  check([](grad::tape&, auto x, auto y) { return loss_of(dimsum::einsum<c, a>(x, y)); }, x, y);
}

TEST_CASE("grad einsum: three operands", "[grad][einsum]") {
  auto x = random_parameter<ab_t>(5, 1.0, a{2}, b{3});
  auto y = random_parameter<bc_t>(6, 1.0, b{3}, c{4});
  auto z = random_parameter<parameter<double, c, e>>(7, 1.0, c{4}, e{2});
  check([](grad::tape&, auto x, auto y, auto z) { return loss_of(dimsum::einsum<"a b, b c, c e -> a e">(x, y, z)); },
        x, y, z);
}

TEST_CASE("grad einsum: a dim summed out of one operand alone is broadcast back", "[grad][einsum]") {
  auto x = random_parameter<ab_t>(8, 1.0, a{3}, b{4});
  auto y = random_parameter<bc_t>(9, 1.0, b{4}, c{2});
  check([](grad::tape&, auto x, auto y) { return loss_of(dimsum::einsum<"a b, b c -> c">(x, y)); }, x, y);
  check([](grad::tape&, auto x) { return loss_of(dimsum::einsum<b>(x)); }, x);
}

TEST_CASE("grad einsum: a grouped input axis (nheads d_head) and a constant operand", "[grad][einsum]") {
  auto x = random_parameter<parameter<double, a, hd>>(10, 1.0, a{3}, hd{6});
  auto w = random_parameter<parameter<double, h, d, c>>(11, 1.0, h{2}, d{3}, c{2});
  const tensor<double, c> s = tensor<double, c>::random_normal(12, c{2});
  check([&](grad::tape&, auto x, auto w) { return loss_of(dimsum::einsum<"a (h d), h d c, c -> a">(x, w, s)); }, x, w);
}

TEST_CASE("grad einsum: a named output group merges dims", "[grad][einsum]") {
  auto x = random_parameter<parameter<double, a, c>>(13, 1.0, a{3}, c{2});
  auto w = random_parameter<parameter<double, c, h, d>>(14, 1.0, c{2}, h{2}, d{3});
  check([](grad::tape&, auto x, auto w) {
    auto y = dimsum::einsum<"a c, c h d -> a hd(h d)">(x, w);
    static_assert(dimsum::grad::detail::var_like<decltype(y)>);
    return loss_of(y);
  }, x, w);
}

TEST_CASE("grad rearrange: split, permute and merge", "[grad][einsum]") {
  auto x = random_parameter<parameter<double, a, hd>>(15, 1.0, a{2}, hd{6});
  const tensor<double, h, a, d> wt = tensor<double, h, a, d>::random_normal(16, h{2}, a{2}, d{3});
  check([&](grad::tape&, auto x) { return dimsum::einsum<>(dimsum::rearrange<"a (h d) -> h a d">(x, h{2}) * wt); }, x);
}

TEST_CASE("grad element-wise: + - * / with broadcasting by name", "[grad][elementwise]") {
  auto x = random_parameter<ab_t>(20, 1.0, a{3}, b{4});
  auto bias = random_parameter<parameter<double, b>>(21, 1.0, b{4});
  auto col = random_parameter<parameter<double, a>>(22, 1.0, a{3});
  for (auto& v : col.value.storage()) v = 1.5 + std::abs(v);  // keep divisors away from 0
  check([](grad::tape&, auto x, auto bias) { return loss_of(x + bias); }, x, bias);
  check([](grad::tape&, auto x, auto bias) { return loss_of(bias - x); }, x, bias);
  check([](grad::tape&, auto x, auto bias) { return loss_of(x * bias); }, x, bias);
  check([](grad::tape&, auto x, auto col) { return loss_of(x / col); }, x, col);
  check([](grad::tape&, auto x, auto col) { return loss_of(col / x); }, x, col);
}

TEST_CASE("grad element-wise: scalars on either side, unary minus, a tensor constant", "[grad][elementwise]") {
  auto x = random_parameter<ab_t>(23, 1.0, a{3}, b{4});
  for (auto& v : x.value.storage()) v = 0.5 + std::abs(v);
  const tensor<double, b> t = tensor<double, b>::random_normal(24, b{4});
  check([](grad::tape&, auto x) { return loss_of(2.5 * x - 1.0); }, x);
  check([](grad::tape&, auto x) { return loss_of(x / 3.0 + 0.25); }, x);
  check([](grad::tape&, auto x) { return loss_of(1.0 / x); }, x);
  check([](grad::tape&, auto x) { return loss_of(-x * 2.0); }, x);
  check([&](grad::tape&, auto x) { return loss_of(t * x - t); }, x);
  check([&](grad::tape&, auto x) { return loss_of(x / t); }, x);
}

TEST_CASE("grad element-wise: exp and sqrt", "[grad][elementwise]") {
  auto x = random_parameter<ab_t>(25, 0.5, a{3}, b{4});
  check([](grad::tape&, auto x) { return loss_of(dimsum::exp(x)); }, x);
  for (auto& v : x.value.storage()) v = 0.5 + std::abs(v);
  check([](grad::tape&, auto x) { return loss_of(dimsum::sqrt(x)); }, x);
}

TEST_CASE("grad where: each branch gets the gradient where it was chosen, summed onto its dims", "[grad][elementwise]") {
  auto x = random_parameter<ab_t>(26, 1.0, a{3}, b{4});
  auto y = random_parameter<parameter<double, b>>(27, 1.0, b{4});
  const tensor<double, a, b> r = tensor<double, a, b>::random_normal(28, a{3}, b{4});
  const tensor<bool, a, b> cond = r > 0.0;
  check([&](grad::tape&, auto x, auto y) { return loss_of(dimsum::where(cond, x, y)); }, x, y);
  check([&](grad::tape&, auto x) { return loss_of(dimsum::where(cond, 0.5, x)); }, x);
}

TEST_CASE("grad reductions: sum, mean, max, min over named dims", "[grad][reduce]") {
  auto x = random_parameter<parameter<double, a, b, c>>(30, 1.0, a{2}, b{3}, c{4});
  check([](grad::tape&, auto x) { return loss_of(dimsum::sum<b>(x)); }, x);
  check([](grad::tape&, auto x) { return loss_of(dimsum::sum<c, a>(x)); }, x);
  check([](grad::tape&, auto x) { return loss_of(dimsum::mean<b>(x)); }, x);
  check([](grad::tape&, auto x) { return loss_of(dimsum::mean<a, b, c>(x)); }, x);
  check([](grad::tape&, auto x) { return loss_of(dimsum::max<c>(x)); }, x);
  check([](grad::tape&, auto x) { return loss_of(dimsum::min<a, b>(x)); }, x);
}

TEST_CASE("grad max: ties share the gradient equally (amax rule)", "[grad][reduce]") {
  parameter<double, a> x(tensor<double, a>::ones(a{4}));
  x.value(a{2}) = 0.5;
  grad::tape t;
  t.backward(dimsum::max<a>(t.watch(x)));
  CHECK(x.grad(a{0}) == Approx(1.0 / 3));
  CHECK(x.grad(a{1}) == Approx(1.0 / 3));
  CHECK(x.grad(a{2}) == 0.0);
  CHECK(x.grad(a{3}) == Approx(1.0 / 3));
}

TEST_CASE("grad softmax: along a named dim", "[grad][softmax]") {
  auto x = random_parameter<parameter<double, a, b>>(31, 1.0, a{3}, b{4});
  check([](grad::tape&, auto x) { return loss_of(dimsum::softmax<b>(x)); }, x);
  check([](grad::tape&, auto x) { return loss_of(dimsum::softmax<a>(x)); }, x);
}

TEST_CASE("grad cumsum: the reversed cumulative sum of the gradient, along either dim", "[grad][cumsum]") {
  auto x = random_parameter<parameter<double, a, b>>(37, 1.0, a{3}, b{5});
  check([](grad::tape&, auto x) { return loss_of(dimsum::cumsum<b>(x)); }, x);
  check([](grad::tape&, auto x) { return loss_of(dimsum::cumsum<a>(x * 2.0) + x); }, x);
}

TEST_CASE("grad argmax, argmin: indices of a var's value, a tensor without gradient", "[grad][argmax]") {
  auto x = random_parameter<parameter<double, a, b>>(41, 1.0, a{3}, b{5});
  grad::tape t;
  auto v = t.watch(x);
  auto ids = dimsum::argmax<b>(v * 1.0);
  static_assert(std::is_same_v<decltype(ids), tensor<std::int64_t, a>>);
  auto low = dimsum::argmin<a>(v);
  for (std::size_t i = 0; i < 3; ++i) {
    std::size_t best = 0;
    for (std::size_t j = 1; j < 5; ++j)
      if (x.value(a{i}, b{j}) > x.value(a{i}, b{best})) best = j;
    CHECK(ids(a{i}) == std::int64_t(best));
  }
  for (std::size_t j = 0; j < 5; ++j) {
    std::size_t best = 0;
    for (std::size_t i = 1; i < 3; ++i)
      if (x.value(a{i}, b{j}) < x.value(a{best}, b{j})) best = i;
    CHECK(low(b{j}) == std::int64_t(best));
  }
}

TEST_CASE("grad causal_mask: masked scores get no gradient, -inf and finite", "[grad][mask]") {
  auto s = random_parameter<parameter<double, a, q, k>>(32, 1.0, a{2}, q{3}, k{4});
  check([](grad::tape&, auto s) {
    return loss_of(dimsum::softmax<k>(dimsum::causal_mask<q, k>(s, -std::numeric_limits<double>::infinity())));
  }, s);
  check([](grad::tape&, auto s) { return loss_of(dimsum::causal_mask<q, k>(s, -3.0)); }, s);
  grad::tape t;
  t.backward(loss_of(dimsum::causal_mask<q, k>(t.watch(s), 7.0)));
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 4; ++j)
      if (j > i) CHECK(s.grad(a{1}, q{i}, k{j}) == 0.0);
}

TEST_CASE("grad masked_fill: a padding mask broadcast by name, a fully masked row", "[grad][mask]") {
  auto s = random_parameter<parameter<double, a, q, k>>(33, 1.0, a{2}, q{3}, k{4});
  tensor<bool, a, k> pad(a{2}, k{4});
  pad(a{0}, k{3}) = true;
  pad(a{1}, k{2}) = true;
  pad(a{1}, k{3}) = true;
  check([&](grad::tape&, auto s) { return loss_of(dimsum::softmax<k>(dimsum::masked_fill(s, pad, -1e9))); }, s);
  tensor<bool, q, k> full(q{3}, k{4});
  for (std::size_t j = 0; j < 4; ++j) full(q{1}, k{j}) = true;  // every key of query 1 masked
  check([&](grad::tape&, auto s) { return loss_of(dimsum::softmax<k>(dimsum::masked_fill(s, full, -1e9))); }, s);
  grad::tape t;
  t.backward(loss_of(dimsum::softmax<k>(dimsum::masked_fill(t.watch(s), full, -1e9))));
  for (std::size_t j = 0; j < 4; ++j) CHECK(s.grad(a{0}, q{1}, k{j}) == 0.0);
}

TEST_CASE("grad rename: the gradient is renamed back", "[grad][rename]") {
  auto x = random_parameter<ab_t>(34, 1.0, a{3}, b{4});
  const tensor<double, a, c> w = tensor<double, a, c>::random_normal(35, a{3}, c{4});
  check([&](grad::tape&, auto x) { return loss_of(dimsum::rename<b, c>(x) * w); }, x);
}

TEST_CASE("grad: extent-1 dims, broadcasting along several dims, a parameter used twice, x = f(x) in a loop",
          "[grad][elementwise]") {
  // Shapes the other cases do not use: a (1, 3, 1) parameter, a (1) one
  // broadcast over two dims and a (1, 1) one over one; each appears
  // several times in one expression, and a loop reassigns its var.
  using abc_t = parameter<double, a, b, c>;
  using cc_t = parameter<double, c>;
  using ac_t = parameter<double, a, c>;
  auto x = random_parameter<abc_t>(50, 1.0, a{1}, b{3}, c{1});
  auto w = random_parameter<cc_t>(51, 1.0, c{1});
  auto u = random_parameter<ac_t>(52, 1.0, a{1}, c{1});
  check([](grad::tape&, auto X, auto W, auto U) {
    return loss_of(X * W + U * X - W * W * U + X / (W * W + 1.0));
  }, x, w, u);
  check([](grad::tape&, auto X, auto W, auto U) {
    auto y = X;
    for (int i = 0; i < 4; ++i) y = dimsum::tanh(y * W + U) + y;
    return loss_of(y);
  }, x, w, u);
  check([](grad::tape&, auto X, auto W, auto U) {
    auto y = dimsum::einsum<"a b c, a b c -> b">(X, X);
    auto z = dimsum::einsum<"a b c, c, a c -> a b">(X, W, U);
    return loss_of(y) + loss_of(z) + loss_of(dimsum::softmax<c>(X * W)) + loss_of(dimsum::max<b>(X) * U);
  }, x, w, u);
}
