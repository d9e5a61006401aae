// Every operation on vars against central finite differences in double
// (grad_check.hpp): einsum in both spellings with grouped axes, three
// operands and dims summed out of one operand alone; element-wise
// operations with broadcasting by name and scalars; exp, sqrt; sum, mean,
// max, min; softmax; cumsum (and argmax, argmin: no gradient); causal_mask,
// masked_fill (fully masked rows included), where; sigmoid, silu, abs, clamp
// (scalar, tensor and var bounds), pow, minimum, maximum (and their values
// at the kinks against torch 1.13); rename, rearrange; extent-1 dims
// broadcast along several
// dims with a parameter used twice and x = f(x) in a loop.
#include "grad_check.hpp"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

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

TEST_CASE("grad comparisons: a var compared with a scalar, a tensor or a var is a bool tensor of the values",
          "[grad][elementwise]") {
  auto x = random_parameter<ab_t>(29, 1.0, a{3}, b{4});
  auto y = random_parameter<parameter<double, b>>(33, 1.0, b{4});
  const tensor<double, b, a> r = tensor<double, b, a>::random_normal(34, b{4}, a{3});
  grad::tape t;
  auto v = t.watch(x);
  auto w = t.watch(y);
  auto pos = v > 0.0;
  static_assert(std::is_same_v<decltype(pos), tensor<bool, a, b>>);
  auto below = v < w;    // w broadcast over a by name
  auto le = r <= v;      // a tensor of dims in another order on the left
  auto ge = v >= 0.25;
  auto eq = v == v;
  auto ne = w != 0.0;
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 4; ++j) {
      const double xv = x.value(a{i}, b{j});
      CHECK(pos(a{i}, b{j}) == (xv > 0.0));
      CHECK(below(a{i}, b{j}) == (xv < y.value(b{j})));
      CHECK(le(b{j}, a{i}) == (r(b{j}, a{i}) <= xv));
      CHECK(ge(a{i}, b{j}) == (xv >= 0.25));
      CHECK(eq(a{i}, b{j}));
    }
  for (std::size_t j = 0; j < 4; ++j) CHECK(ne(b{j}) == (y.value(b{j}) != 0.0));
  // A mask taken from a var selects its gradient: where(v > 0, v, 0) is relu.
  check([](grad::tape&, auto x) { return loss_of(dimsum::where(x > 0.0, x, 0.0)); }, x);
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

TEST_CASE("grad math: sigmoid, silu, abs, clamp against finite differences", "[grad][math]") {
  auto x = random_parameter<ab_t>(40, 1.5, a{3}, b{4});
  // Keep every element away from the kinks of abs (0) and clamp (+-0.5),
  // where a central difference straddles two slopes.
  for (auto& v : x.value.storage())
    for (double kink : {0.0, 0.5, -0.5})
      if (std::abs(v - kink) < 1e-3) v += 0.01;
  check([](grad::tape&, auto x) { return loss_of(dimsum::sigmoid(x)); }, x);
  check([](grad::tape&, auto x) { return loss_of(dimsum::silu(x)); }, x);
  check([](grad::tape&, auto x) { return loss_of(dimsum::abs(x)); }, x);
  check([](grad::tape&, auto x) { return loss_of(dimsum::clamp(x, -0.5, 0.5f)); }, x);
  check([](grad::tape&, auto x) { return loss_of(dimsum::silu(dimsum::abs(x) * 2.0) + dimsum::sigmoid(x)); }, x);
}

TEST_CASE("grad math: clamp with var and tensor bounds broadcast by name", "[grad][math]") {
  // torch.clamp(x, min, max) with tensor bounds: the gradient also reaches
  // a bound where it was chosen, summed onto the bound's dims.
  auto x = random_parameter<ab_t>(45, 1.5, a{3}, b{4});
  parameter<double, b> lo(tensor<double, b>(b{4})), hi(tensor<double, b>(b{4}));
  const double los[] = {-0.5, -0.25, 0.1, -1.0}, his[] = {0.5, 0.75, 0.4, 1.0};
  std::copy(los, los + 4, lo.value.data());
  std::copy(his, his + 4, hi.value.data());
  // Away from the kinks, where a central difference straddles two slopes.
  for (std::size_t i = 0; i < x.value.size(); ++i)
    for (double kink : {los[i % 4], his[i % 4]})
      if (std::abs(x.value.data()[i] - kink) < 1e-3) x.value.data()[i] += 0.01;
  check([](grad::tape&, auto x, auto lo, auto hi) { return loss_of(dimsum::clamp(x, lo, hi)); }, x, lo, hi);
  check([](grad::tape&, auto x, auto lo) { return loss_of(dimsum::clamp(x, lo, 0.5) * x); }, x, lo);
  check([&](grad::tape&, auto hi) { return loss_of(dimsum::clamp(x.value, -0.5, hi)); }, hi);
  check([&](grad::tape&, auto x) { return loss_of(dimsum::clamp(x, lo.value, hi.value)); }, x);
}

TEST_CASE("grad math: pow, minimum, maximum with broadcasting by name, tensors and scalars", "[grad][math]") {
  auto x = random_parameter<ab_t>(41, 1.0, a{3}, b{4});
  auto y = random_parameter<parameter<double, b>>(42, 1.0, b{4});
  auto pos = random_parameter<ab_t>(43, 1.0, a{3}, b{4});
  for (auto& v : pos.value.storage()) v = 0.5 + std::abs(v);  // a positive base
  const tensor<double, b> t = tensor<double, b>::random_normal(44, b{4});
  tensor<double, b> tpos = t;
  for (auto& v : tpos.storage()) v = 0.5 + std::abs(v);
  check([](grad::tape&, auto x) { return loss_of(dimsum::pow(x, 3.0)); }, x);
  check([](grad::tape&, auto x) { return loss_of(dimsum::pow(x, 2)); }, x);
  check([](grad::tape&, auto p) { return loss_of(dimsum::pow(p, -1.5)); }, pos);
  check([](grad::tape&, auto p, auto y) { return loss_of(dimsum::pow(p, y)); }, pos, y);
  check([&](grad::tape&, auto p) { return loss_of(dimsum::pow(p, t)); }, pos);
  check([&](grad::tape&, auto y) { return loss_of(dimsum::pow(tpos, y)); }, y);
  check([](grad::tape&, auto y) { return loss_of(dimsum::pow(2.0, y)); }, y);
  // x and y (broadcast along a) never tie: the gradients split cleanly.
  check([](grad::tape&, auto x, auto y) { return loss_of(dimsum::maximum(x, y)); }, x, y);
  check([](grad::tape&, auto x, auto y) { return loss_of(dimsum::minimum(y, x)); }, x, y);
  check([&](grad::tape&, auto x) { return loss_of(dimsum::maximum(t, x)); }, x);
  check([](grad::tape&, auto x) { return loss_of(dimsum::minimum(x, 0.25) + dimsum::maximum(0.25, x)); }, x);
}

namespace {
// The gradient of sum(f(x)) for x a parameter<double, a> holding xs.
template <class F>
std::vector<double> grad_of_sum(const std::vector<double>& xs, F f) {
  parameter<double, a> x(tensor<double, a>(a{xs.size()}));
  std::copy(xs.begin(), xs.end(), x.value.data());
  grad::tape t;
  t.backward(dimsum::einsum<>(f(t.watch(x))));
  return {x.grad.data(), x.grad.data() + xs.size()};
}
// The gradients of sum(f(x, y)) for two parameters.
template <class F>
std::pair<std::vector<double>, std::vector<double>> grads_of_sum(const std::vector<double>& xs,
                                                                 const std::vector<double>& ys, F f) {
  parameter<double, a> x(tensor<double, a>(a{xs.size()}));
  parameter<double, a> y(tensor<double, a>(a{ys.size()}));
  std::copy(xs.begin(), xs.end(), x.value.data());
  std::copy(ys.begin(), ys.end(), y.value.data());
  grad::tape t;
  t.backward(dimsum::einsum<>(f(t.watch(x), t.watch(y))));
  return {{x.grad.data(), x.grad.data() + xs.size()}, {y.grad.data(), y.grad.data() + ys.size()}};
}
// Equal as torch's values: NaN with NaN, an infinity with the same one,
// finite values to 1e-14 relative.
void check_torch(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << ", torch " << want[i]);
    if (std::isnan(want[i]))
      CHECK(std::isnan(got[i]));
    else if (std::isinf(want[i]))
      CHECK(got[i] == want[i]);
    else
      CHECK(std::abs(got[i] - want[i]) <= 1e-14 * std::abs(want[i]));
  }
}
}  // namespace

// The expected values are torch 1.13's (float64), printed by
//   /usr/bin/python3 -c "import torch; x = torch.tensor([...], dtype=torch.float64, requires_grad=True);
//                        torch.abs(x).sum().backward(); print(x.grad.tolist())"
// with the function and the values of each line.
TEST_CASE("grad math: gradients at the kinks are torch's", "[grad][math]") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  using V = std::vector<double>;
  // abs: sgn(x), 0 at +-0 and NaN.
  check_torch(grad_of_sum({-2.0, -0.0, 0.0, 1.5, nan}, [](auto x) { return dimsum::abs(x); }), {-1, 0, 0, 1, 0});
  // clamp(x, -1, 1): the bounds are inside; NaN gets 0; lo > hi gives 0 everywhere.
  check_torch(grad_of_sum({-2.0, -1.0, 0.0, 1.0, 2.0, nan}, [](auto x) { return dimsum::clamp(x, -1.0, 1.0); }),
              {0, 1, 1, 1, 0, 0});
  check_torch(grad_of_sum({-2.0, 0.0, 0.5, 1.0, 2.0}, [](auto x) { return dimsum::clamp(x, 1.0, -1.0); }),
              {0, 0, 0, 0, 0});
  // clamp(x, lo, hi) with tensor bounds (torch's clamp_backward and
  // clamp_backward_min_max): x's bounds inclusive; lo where x < lo < hi;
  // hi where x > hi or hi < lo (the last element: lo > hi).
  {
    parameter<double, a> x(tensor<double, a>(a{7})), lo(tensor<double, a>(a{7})), hi(tensor<double, a>(a{7}));
    const V xs{-2, -1, 0, 1, 2, nan, 0.5}, los{-1, -1, -1, -1, -1, -1, 1}, his{1, 1, 1, 1, 1, 1, -1};
    std::copy(xs.begin(), xs.end(), x.value.data());
    std::copy(los.begin(), los.end(), lo.value.data());
    std::copy(his.begin(), his.end(), hi.value.data());
    grad::tape t;
    t.backward(dimsum::einsum<>(dimsum::clamp(t.watch(x), t.watch(lo), t.watch(hi))));
    check_torch({x.grad.data(), x.grad.data() + 7}, {0, 1, 1, 1, 0, 0, 0});
    check_torch({lo.grad.data(), lo.grad.data() + 7}, {1, 0, 0, 0, 0, 0, 0});
    check_torch({hi.grad.data(), hi.grad.data() + 7}, {0, 0, 0, 0, 1, 0, 1});
  }
  // maximum / minimum: half each on a tie, whole to each where one is NaN.
  const V l{1, 2, 3, nan, 1}, r{1, 1, 4, 1, nan};
  auto [max_l, max_r] = grads_of_sum(l, r, [](auto x, auto y) { return dimsum::maximum(x, y); });
  check_torch(max_l, {0.5, 1, 0, 1, 1});
  check_torch(max_r, {0.5, 0, 1, 1, 1});
  auto [min_l, min_r] = grads_of_sum(l, r, [](auto x, auto y) { return dimsum::minimum(x, y); });
  check_torch(min_l, {0.5, 0, 1, 1, 1});
  check_torch(min_r, {0.5, 1, 0, 1, 1});
  // torch.maximum(x, torch.tensor(1.0)): a scalar ties too.
  check_torch(grad_of_sum({0.0, 1.0, 2.0}, [](auto x) { return dimsum::maximum(x, 1.0); }), {0, 0.5, 1});
  check_torch(grad_of_sum({0.0, 1.0, 2.0}, [](auto x) { return dimsum::minimum(1.0, x); }), {1, 0.5, 0});
  // pow(x, p) at 0 (torch.pow(x, p) with a Python float p).
  const V at{0.0, 2.0, -2.0};
  check_torch(grad_of_sum(at, [](auto x) { return dimsum::pow(x, 0.0); }), {0, 0, 0});
  check_torch(grad_of_sum(at, [](auto x) { return dimsum::pow(x, 1.0); }), {1, 1, 1});
  check_torch(grad_of_sum(at, [](auto x) { return dimsum::pow(x, 2.0); }), {0, 4, -4});
  check_torch(grad_of_sum(at, [](auto x) { return dimsum::pow(x, 3.0); }), {0, 12, 12});
  check_torch(grad_of_sum(at, [](auto x) { return dimsum::pow(x, 0.5); }), {inf, 0.35355339059327373, nan});
  check_torch(grad_of_sum(at, [](auto x) { return dimsum::pow(x, -1.0); }), {-inf, -0.25, -0.25});
  // pow(x, y) of two vars: 0 to x where y == 0, 0 to y where x == 0 and y >= 0.
  auto [pow_x, pow_y] = grads_of_sum({0, 0, 0, 2, -2, 0}, {0, 2, -1, 0.5, 2, 0.5},
                                     [](auto x, auto y) { return dimsum::pow(x, y); });
  check_torch(pow_x, {0, 0, -inf, 0.3535533905932738, -4, inf});
  check_torch(pow_y, {0, 0, -inf, 0.9802581434685472, nan, 0});
  // pow(base, y) with a scalar base.
  check_torch(grad_of_sum({0.0, 1.0, -1.0, 2.0}, [](auto y) { return dimsum::pow(0.0, y); }), {0, 0, -inf, 0});
  check_torch(grad_of_sum({0.0, 1.0, -1.0}, [](auto y) { return dimsum::pow(2.0, y); }),
              {0.6931471805599453, 1.3862943611198906, 0.34657359027997264});
  // sigmoid and silu at 0 and +-inf.
  check_torch(grad_of_sum({0.0, 2.0, -inf, inf}, [](auto x) { return dimsum::sigmoid(x); }),
              {0.25, 0.10499358540350662, 0, 0});
  check_torch(grad_of_sum({0.0, 2.0, -inf, inf, -50.0}, [](auto x) { return dimsum::silu(x); }),
              {0.5, 1.0907842487848955, nan, nan, -9.450874255023198e-21});
}
