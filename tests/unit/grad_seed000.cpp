// The seed-000 attention layer (einops HiddenAttention) trained: its
// forward written once as a template, run on tensors (checked against the
// seed's golden output) and on vars; loss sum(out * r); every parameter's
// gradient and d loss / d x against PyTorch autograd in float64
// (tests/reference/make_grad_fixtures.py), within float32 tolerance; the
// attention pattern's gradient, kept with retain_grad, against PyTorch's
// retain_grad on the same intermediate.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include <dimsum/dimsum.hpp>
#include <dimsum/grad/grad.hpp>
#include <dimsum/io/npy.hpp>

using dimsum::parameter;
using dimsum::tensor;
namespace grad = dimsum::grad;

namespace {
DIMSUM_DIM(batch);
DIMSUM_DIM(posn);
DIMSUM_DIM(q_posn);
DIMSUM_DIM(k_posn);
DIMSUM_DIM(d_model, 30);
DIMSUM_DIM(nheads, 2);
DIMSUM_DIM(d_head, 10);

std::string fixture(const std::string& name) { return std::string(DIMSUM_SOURCE_DIR) + "/tests/reference/fixtures/" + name; }

/// HiddenAttention's eight weights, each of type W (tensors or vars).
template <class WQ, class WO, class BQ, class BO>
struct weights {
  WQ W_Q, W_K, W_V;
  WO W_O;
  BQ b_Q, b_K, b_V;
  BO b_O;
};

struct ignore_pattern {
  void operator()(const auto&) const {}
};

/// HiddenAttention.forward, written once for tensors and for vars;
/// `on_pattern` sees the attention pattern (softmax's output).
template <class X, class W, class OnPattern = ignore_pattern>
auto attention(const X& x, const W& w, OnPattern on_pattern = {}) {
  using dimsum::einsum;
  auto q = einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w.W_Q) + w.b_Q;
  auto k = einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w.W_K) + w.b_K;
  auto v = einsum<"batch posn d_model, nheads d_model d_head -> batch posn nheads d_head">(x, w.W_V) + w.b_V;
  const float scale = std::sqrt(float(w.W_Q.template extent<d_head>()));
  auto scores = einsum<"batch q_posn nheads d_head, batch k_posn nheads d_head -> batch nheads q_posn k_posn">(
      dimsum::rename<posn, q_posn>(q), dimsum::rename<posn, k_posn>(k));
  auto masked = dimsum::causal_mask<q_posn, k_posn>(scores / scale, -std::numeric_limits<float>::infinity());
  // A pattern that a callback sees is recorded as its own node (on vars the
  // softmax is otherwise lazy and fuses into the attention node).
  auto pattern = [&] {
    if constexpr (std::is_same_v<OnPattern, ignore_pattern>)
      return dimsum::softmax<k_posn>(masked);
    else
      return dimsum::eval(dimsum::softmax<k_posn>(masked));
  }();
  on_pattern(pattern);
  auto z = einsum<"batch k_posn nheads d_head, batch nheads q_posn k_posn -> batch q_posn nheads d_head">(
      dimsum::rename<posn, k_posn>(v), pattern);
  // eval: on tensors the lazy result must not outlive the locals it reads.
  return dimsum::eval(dimsum::rename<q_posn, posn>(
      einsum<"batch q_posn nheads d_head, nheads d_head d_model -> batch q_posn d_model">(z, w.W_O) + w.b_O));
}

template <class P>
P load_parameter(const std::string& name) {
  return P(dimsum::load_npy<typename P::tensor_type>(fixture("seed000/" + name + ".npy")));
}

/// got (float) against the float64 PyTorch gradient: |got - want| <=
/// 1e-5 * max(1, max|want|) + 1e-4 |want|. float32 rounds each product to
/// 6e-8 relative and the sums here run over at most 12 x 20 x 30 terms of
/// O(1) values, so the accumulated error stays near 1e-6 of the scale of
/// the computation. That scale is at least 1 even where the gradient is 0
/// in exact arithmetic: b_K's is (softmax ignores a constant added to a
/// row of scores), and float32 leaves about 1e-6 of noise there.
template <class Got>
void expect_gradient(const Got& got, const std::string& name) {
  using W = dimsum::tensor_for_t<double, dimsum::dims_of_t<Got>>;
  const W want = dimsum::load_npy<W>(fixture("grad/seed000_grad_" + name + ".npy"));
  REQUIRE(got.extents() == want.extents());
  double scale = 0, worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i) scale = std::max(scale, std::abs(want.data()[i]));
  std::size_t bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double err = std::abs(double(got.data()[i]) - want.data()[i]);
    worst = std::max(worst, err);
    if (!(err <= 1e-5 * std::max(scale, 1.0) + 1e-4 * std::abs(want.data()[i]))) ++bad;
  }
  INFO("gradient of " << name << ": worst abs error " << worst << ", largest magnitude " << scale);
  CHECK(bad == 0);
}
}  // namespace

TEST_CASE("grad seed 000: every parameter's gradient equals PyTorch's", "[grad][seed000]") {
  using wq_t = parameter<float, nheads, d_model, d_head>;
  using wo_t = parameter<float, nheads, d_head, d_model>;
  using bq_t = parameter<float, nheads, d_head>;
  using bo_t = parameter<float, d_model>;
  weights<wq_t, wo_t, bq_t, bo_t> p{load_parameter<wq_t>("W_Q"), load_parameter<wq_t>("W_K"), load_parameter<wq_t>("W_V"),
                                    load_parameter<wo_t>("W_O"), load_parameter<bq_t>("b_Q"), load_parameter<bq_t>("b_K"),
                                    load_parameter<bq_t>("b_V"), load_parameter<bo_t>("b_O")};
  const auto x = dimsum::load_npy<tensor<float, batch, posn, d_model>>(fixture("seed000/x.npy"));
  const auto r = dimsum::load_npy<tensor<double, batch, posn, d_model>>(fixture("grad/seed000_r.npy"));
  const tensor<float, batch, posn, d_model> rf = dimsum::cast<float>(r);

  // The same forward on tensors reproduces the seed's golden output.
  const weights<tensor<float, nheads, d_model, d_head>, tensor<float, nheads, d_head, d_model>,
                tensor<float, nheads, d_head>, tensor<float, d_model>>
      plain{p.W_Q.value, p.W_K.value, p.W_V.value, p.W_O.value, p.b_Q.value, p.b_K.value, p.b_V.value, p.b_O.value};
  const tensor<float, batch, posn, d_model> out = attention(x, plain);
  const auto golden = dimsum::load_npy<tensor<float, batch, posn, d_model>>(fixture("seed000/out.npy"));
  for (std::size_t i = 0; i < out.size(); ++i) REQUIRE(out.data()[i] == Approx(golden.data()[i]).margin(1e-5));

  grad::tape t;
  auto xv = t.watch(x);
  const weights<grad::var<float, nheads, d_model, d_head>, grad::var<float, nheads, d_head, d_model>,
                grad::var<float, nheads, d_head>, grad::var<float, d_model>>
      w{t.watch(p.W_Q), t.watch(p.W_K), t.watch(p.W_V), t.watch(p.W_O),
        t.watch(p.b_Q), t.watch(p.b_K), t.watch(p.b_V), t.watch(p.b_O)};
  grad::var<float, batch, nheads, q_posn, k_posn> pattern;
  auto y = attention(xv, w, [&](const auto& v) {
    v.retain_grad();  // PyTorch: pattern.retain_grad()
    pattern = v;
  });
  static_assert(std::is_same_v<decltype(y), grad::var<float, batch, posn, d_model>>);
  auto loss = dimsum::einsum<>(y * rf);
  const auto want_loss = dimsum::load_npy<tensor<double>>(fixture("grad/seed000_loss.npy"));
  // The loss sums 7200 products of O(1) that cancel down to 0.25: float32
  // rounding of the terms (6e-8 each, growing like the square root of the
  // count) allows 1e-4 absolute.
  CHECK(loss.item() == Approx(want_loss.item()).margin(1e-4));
  t.backward(loss);

  static_assert(std::is_same_v<std::remove_cvref_t<decltype(dimsum::gradient<nheads, d_model, d_head>(p.W_Q))>,
                               tensor<float, nheads, d_model, d_head>>);
  expect_gradient(p.W_Q.grad, "W_Q");
  expect_gradient(p.W_K.grad, "W_K");
  expect_gradient(p.W_V.grad, "W_V");
  expect_gradient(p.W_O.grad, "W_O");
  expect_gradient(p.b_Q.grad, "b_Q");
  expect_gradient(p.b_K.grad, "b_K");
  expect_gradient(p.b_V.grad, "b_V");
  expect_gradient(p.b_O.grad, "b_O");
  expect_gradient(dimsum::gradient(xv), "x");
  expect_gradient(dimsum::gradient(pattern), "pattern");
}
