// The operations training needs beyond the seeds, on vars: activations
// (relu, gelu exact and tanh, tanh, log), log_softmax, cross_entropy (mean
// and sum, integer targets), layer_norm with weight and bias, select,
// slice, stack, concat, lookup (embedding, repeated ids) and dropout (same
// mask in both passes). Each against central finite differences in double
// (grad_check.hpp) and against PyTorch autograd fixtures
// (tests/reference/make_grad_fixtures.py, float64, loss sum(y * r)).
#include "grad_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <dimsum/io/npy.hpp>

using dimsum::parameter;
using dimsum::tensor;
using grad_check::random_parameter;
namespace grad = dimsum::grad;
using namespace grad_check;

namespace {
DIMSUM_DIM(a);
DIMSUM_DIM(b);
DIMSUM_DIM(c);
DIMSUM_DIM(batch);
DIMSUM_DIM(posn);
DIMSUM_DIM(vocab);
DIMSUM_DIM(emb);
DIMSUM_DIM(part);


using ab_t = parameter<double, a, b>;
}  // namespace

TEST_CASE("grad activations: relu, gelu, gelu_tanh, tanh, log", "[grad][activation]") {
  auto x = random_parameter<ab_t>(40, 1.0, a{3}, b{4});
  check([](grad::tape&, auto x) { return loss_of(dimsum::relu(x)); }, x);
  check([](grad::tape&, auto x) { return loss_of(dimsum::gelu(x)); }, x);
  check([](grad::tape&, auto x) { return loss_of(dimsum::gelu_tanh(x)); }, x);
  check([](grad::tape&, auto x) { return loss_of(dimsum::tanh(x)); }, x);
  for (auto& v : x.value.storage()) v = 0.5 + std::abs(v);
  check([](grad::tape&, auto x) { return loss_of(dimsum::log(x)); }, x);
  for (const char* n : {"relu", "gelu", "gelu_tanh", "tanh", "log"}) {
    auto p = load_parameter<ab_t>(std::string(n) + "_x");
    const std::string name = n;
    torch_case(name, [&](grad::tape&, auto x) {
      if (name == "relu") return dimsum::relu(x);
      if (name == "gelu") return dimsum::gelu(x);
      if (name == "gelu_tanh") return dimsum::gelu_tanh(x);
      if (name == "tanh") return dimsum::tanh(x);
      return dimsum::log(x);
    }, {"x"}, p);
  }
}

TEST_CASE("grad relu: NaN kept in the forward, the gradient selected as torch's threshold_backward", "[grad][activation]") {
  // torch 1.13, float64: x = [nan, -1, 2, 0], y = relu(x), y.backward([1, inf, 3, nan])
  // gives y = [nan, 0, 2, 0] and x.grad = [1, 0, 3, 0].
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  tensor<double, b> x(b{4}), g(b{4});
  const double xs[] = {nan, -1.0, 2.0, 0.0}, gs[] = {1.0, inf, 3.0, nan};
  std::copy_n(xs, 4, x.data());
  std::copy_n(gs, 4, g.data());
  grad::tape t;
  auto v = t.watch(x);
  auto y = dimsum::relu(v);
  CHECK(std::isnan(y.value()(b{0})));
  CHECK(y.value()(b{1}) == 0.0);
  CHECK(y.value()(b{2}) == 2.0);
  CHECK(y.value()(b{3}) == 0.0);
  t.backward(dimsum::sum<b>(y * g));  // d/dy sum(y * g) = g, then relu's rule
  const auto& dx = dimsum::gradient(v);
  CHECK(dx(b{0}) == 1.0);
  CHECK(dx(b{1}) == 0.0);
  CHECK(dx(b{2}) == 3.0);
  CHECK(dx(b{3}) == 0.0);
}

TEST_CASE("grad log_softmax along a named dim", "[grad][log_softmax]") {
  auto x = random_parameter<ab_t>(41, 1.0, a{3}, b{5});
  check([](grad::tape&, auto x) { return loss_of(dimsum::log_softmax<b>(x)); }, x);
  check([](grad::tape&, auto x) { return loss_of(dimsum::log_softmax<a>(x)); }, x);
  auto p = load_parameter<ab_t>("log_softmax_x");
  torch_case("log_softmax", [](grad::tape&, auto x) { return dimsum::log_softmax<b>(x); }, {"x"}, p);
}

TEST_CASE("grad cross_entropy: integer targets by name, mean and sum", "[grad][cross_entropy]") {
  using logits_t = parameter<double, batch, posn, vocab>;
  auto x = random_parameter<logits_t>(42, 1.0, batch{2}, posn{3}, vocab{5});
  tensor<std::int64_t, posn, batch> t(batch{2}, posn{3});  // another order than the logits: placed by name
  const std::int64_t ids[2][3] = {{1, 4, 1}, {0, 1, 3}};
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 3; ++j) t(batch{i}, posn{j}) = ids[i][j];
  check([&](grad::tape&, auto x) { return dimsum::cross_entropy<vocab>(x, t); }, x);
  check([&](grad::tape&, auto x) { return dimsum::cross_entropy<vocab>(x, t, dimsum::reduction::sum) * 0.3; }, x);
  const auto targets = load<tensor<std::int64_t, batch, posn>>("cross_entropy_mean_t");
  for (const auto& c : {std::pair{"mean", dimsum::reduction::mean}, std::pair{"sum", dimsum::reduction::sum}}) {
    const dimsum::reduction how = c.second;
    auto p = load_parameter<logits_t>(std::string("cross_entropy_") + c.first + "_x");
    torch_case(std::string("cross_entropy_") + c.first,
               [&](grad::tape&, auto x) { return dimsum::cross_entropy<vocab>(x, targets, how); }, {"x"}, p);
  }
  tensor<std::int64_t, batch, posn> bad = targets;
  bad(batch{1}, posn{2}) = 5;
  grad::tape tp;
  CHECK_THROWS_AS(dimsum::cross_entropy<vocab>(tp.watch(x), bad), dimsum::shape_error);
}

TEST_CASE("grad layer_norm with weight and bias", "[grad][layer_norm]") {
  auto x = random_parameter<parameter<double, a, b, c>>(43, 1.0, a{2}, b{3}, c{4});
  auto w = random_parameter<parameter<double, c>>(44, 1.0, c{4});
  auto bias = random_parameter<parameter<double, c>>(45, 1.0, c{4});
  check([](grad::tape&, auto x, auto w, auto bias) { return loss_of(dimsum::layer_norm<c>(x, w, bias)); }, x, w, bias);
  auto px = load_parameter<parameter<double, a, b, c>>("layer_norm_x");
  auto pw = load_parameter<parameter<double, c>>("layer_norm_w");
  auto pb = load_parameter<parameter<double, c>>("layer_norm_b");
  torch_case("layer_norm", [](grad::tape&, auto x, auto w, auto bias) { return dimsum::layer_norm<c>(x, w, bias); },
             {"x", "w", "b"}, px, pw, pb);
}

TEST_CASE("grad layer_norm: the row kernel on long rows, and the general path over a middle dim", "[grad][layer_norm]") {
  // c last with weight and bias (c): kernels/layer_norm.hpp's rows; 21
  // doubles are whole vectors and a scalar tail on AVX-512 and AVX2.
  auto x = random_parameter<parameter<double, a, b, c>>(61, 1.0, a{2}, b{3}, c{21});
  auto w = random_parameter<parameter<double, c>>(62, 1.0, c{21});
  auto bias = random_parameter<parameter<double, c>>(63, 1.0, c{21});
  check([](grad::tape&, auto x, auto w, auto bias) { return loss_of(dimsum::layer_norm<c>(x, w, bias)); }, x, w, bias);
  // Normalised over b, a middle dim: the general path.
  auto y = random_parameter<parameter<double, a, b, c>>(64, 1.0, a{2}, b{5}, c{3});
  auto wb = random_parameter<parameter<double, b>>(65, 1.0, b{5});
  auto bb = random_parameter<parameter<double, b>>(66, 1.0, b{5});
  check([](grad::tape&, auto y, auto w, auto bias) { return loss_of(dimsum::layer_norm<b>(y, w, bias)); }, y, wb, bb);
  // The two paths agree: the row kernel's forward and gradients against
  // the general path run on the same values with the dims reordered.
  grad::tape t1, t2;
  auto x1 = t1.watch(x.value);
  const auto y1 = dimsum::layer_norm<c>(x1, t1.watch(w), t1.watch(bias));
  const tensor<double, c, a, b> xt = x.value;
  auto x2 = t2.watch(xt);
  const auto y2 = dimsum::layer_norm<c>(x2, w.value, bias.value);  // c first: the general path
  const tensor<double, a, b, c> y2t = y2.value();
  double diff = 0;
  for (std::size_t i = 0; i < y2t.size(); ++i) diff = std::max(diff, std::abs(y2t.data()[i] - y1.value().data()[i]));
  CHECK(diff <= 1e-13);
  t1.backward(dimsum::sum<a, b, c>(y1 * y1.value()));
  t2.backward(dimsum::sum<c, a, b>(y2 * y2.value()));
  const tensor<double, a, b, c> g2 = dimsum::gradient(x2);
  diff = 0;
  for (std::size_t i = 0; i < g2.size(); ++i) diff = std::max(diff, std::abs(g2.data()[i] - dimsum::gradient(x1).data()[i]));
  CHECK(diff <= 1e-12);
  // A weight whose extent differs from the input's: shape_error, not a read past its end.
  auto w_short = random_parameter<parameter<double, c>>(67, 1.0, c{20});
  grad::tape t3;
  CHECK_THROWS_AS(dimsum::layer_norm<c>(t3.watch(x), t3.watch(w_short), t3.watch(bias)), dimsum::shape_error);
}

TEST_CASE("grad element-wise: a bias on the row kernel, a dim static on one side, extents checked", "[grad][elementwise]") {
  using c4 = dimsum::dim<dimsum::fixed_string<2>{"c"}, 4>;  // the dim c, static on this side
  auto x = random_parameter<parameter<double, a, b, c>>(68, 1.0, a{2}, b{3}, c{4});
  auto bias = random_parameter<parameter<double, b, c>>(69, 1.0, b{3}, c{4});
  check([](grad::tape&, auto x, auto bias) { return loss_of(x + bias); }, x, bias);
  check([](grad::tape&, auto x, auto bias) { return loss_of(x * bias); }, x, bias);
  check([](grad::tape&, auto x, auto bias) { return loss_of(bias - x); }, x, bias);
  // x (c dynamic) times a tensor with c static: the result has the static
  // dim, as on tensors, and the values and gradient are x * t and t.
  tensor<double, a, b, c4> t(a{2}, b{3});
  for (std::size_t i = 0; i < t.size(); ++i) t.data()[i] = 0.5 + 0.25 * double(i);
  grad::tape tp;
  auto xv = tp.watch(x.value);
  auto y = xv * t;
  static_assert(std::is_same_v<typename decltype(y)::dims, dimsum::dim_list<a, b, c4>>);
  for (std::size_t i = 0; i < t.size(); ++i) CHECK(y.value().data()[i] == x.value.data()[i] * t.data()[i]);
  tp.backward(dimsum::sum<a, b, c4>(y));
  for (std::size_t i = 0; i < t.size(); ++i) CHECK(dimsum::gradient(xv).data()[i] == t.data()[i]);
  // A bias whose extent differs: shape_error from the element-wise check.
  auto short_bias = random_parameter<parameter<double, b, c>>(70, 1.0, b{3}, c{3});
  grad::tape t2;
  CHECK_THROWS_AS(t2.watch(x) + t2.watch(short_bias), dimsum::shape_error);
}

TEST_CASE("grad select, slice, stack, concat", "[grad][slice]") {
  using p3 = parameter<double, a, b, c>;
  auto x = random_parameter<p3>(46, 1.0, a{2}, b{3}, c{4});
  check([](grad::tape&, auto x) { return loss_of(dimsum::select<b>(x, 1)); }, x);
  check([](grad::tape&, auto x) { return loss_of(dimsum::slice<b>(x, 1, 3)); }, x);
  auto p = load_parameter<p3>("select_x");
  torch_case("select", [](grad::tape&, auto x) { return dimsum::select<b>(x, 1); }, {"x"}, p);
  auto q = load_parameter<p3>("slice_x");
  torch_case("slice", [](grad::tape&, auto x) { return dimsum::slice<b>(x, 1, 3); }, {"x"}, q);

  auto sx = load_parameter<ab_t>("stack_x");
  auto sy = load_parameter<ab_t>("stack_y");
  torch_case("stack", [](grad::tape&, auto x, auto y) { return dimsum::stack<part>(std::vector{x, y, x}); }, {"x", "y"},
             sx, sy);
  check([](grad::tape&, auto x, auto y) { return loss_of(dimsum::stack<part>(std::vector{x, y, x})); }, sx, sy);
  auto cx = load_parameter<ab_t>("concat_x");
  auto cy = load_parameter<ab_t>("concat_y");
  torch_case("concat", [](grad::tape&, auto x, auto y) { return dimsum::concat<b>(std::vector{x, y}); }, {"x", "y"}, cx,
             cy);
  check([](grad::tape&, auto x, auto y) { return loss_of(dimsum::concat<b>(std::vector{x, y})); }, cx, cy);
}

TEST_CASE("grad lookup: embedding rows, gradient summed over repeated ids", "[grad][embedding]") {
  auto table = load_parameter<parameter<double, vocab, emb>>("lookup_table");
  const auto ids = load<tensor<std::int64_t, batch, posn>>("lookup_ids");
  torch_case("lookup", [&](grad::tape&, auto tb) { return dimsum::lookup<vocab>(tb, ids); }, {"table"}, table);
  check([&](grad::tape&, auto tb) { return loss_of(dimsum::lookup<vocab>(tb, ids)); }, table);
  // By hand: with loss sum(rows), row v of the gradient is the count of id v.
  table.zero_grad();
  grad::tape t;
  t.backward(dimsum::einsum<>(dimsum::lookup<vocab>(t.watch(table), ids)));
  const double count[4] = {2, 1, 3, 0};
  for (std::size_t v = 0; v < 4; ++v)
    for (std::size_t e = 0; e < 3; ++e) CHECK(table.grad(vocab{v}, emb{e}) == count[v]);
}

TEST_CASE("grad dropout: the backward pass uses the forward's mask", "[grad][dropout]") {
  auto x = random_parameter<ab_t>(47, 1.0, a{8}, b{8});
  check([](grad::tape&, auto x) { return loss_of(dimsum::dropout(x, 0.25, 9)); }, x);
  // d/dx sum(dropout(x)) is the scaled mask: 0 where the output is 0, 1/(1-p) elsewhere.
  x.zero_grad();
  grad::tape t;
  auto y = dimsum::dropout(t.watch(x), 0.25, 9);
  t.backward(dimsum::einsum<>(y));
  std::size_t dropped = 0;
  for (std::size_t i = 0; i < x.value.size(); ++i) {
    const bool kept = y.value().data()[i] != 0.0;
    dropped += kept ? 0 : 1;
    CHECK(x.grad.data()[i] == (kept ? 1.0 / 0.75 : 0.0));
    if (kept) CHECK(y.value().data()[i] == Approx(x.value.data()[i] / 0.75));
  }
  CHECK(dropped > 0);
  CHECK(dropped < x.value.size());
}
