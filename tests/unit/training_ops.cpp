// The tensor forms of layer_norm, log_softmax and cross_entropy against
// PyTorch float64 (tests/reference/make_loss_fixtures.py: F.layer_norm,
// F.log_softmax, F.cross_entropy), with the named dim in the middle of the
// tensor, a -inf logit, logits near 1000, a large mean for layer_norm and
// targets in another dim order than the logits; plus hand-computed cases
// and agreement with the var forms (grad/rules). gelu and relu on tensors
// are in ops/math.hpp and tested in tests/unit/math.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include <dimsum/grad/grad.hpp>
#include <dimsum/io/npy.hpp>
#include <dimsum/ops/cross_entropy.hpp>
#include <dimsum/ops/layer_norm.hpp>
#include <dimsum/ops/log_softmax.hpp>

namespace {
using dimsum::tensor;
DIMSUM_DIM(batch);
DIMSUM_DIM(posn);
DIMSUM_DIM(d_model);
DIMSUM_DIM(vocab);

const std::string dir = std::string(DIMSUM_SOURCE_DIR) + "/tests/reference/fixtures/loss/";

template <class Tensor>
Tensor load(const std::string& name) {
  return dimsum::load_npy<Tensor>(dir + name + ".npy");
}

// The largest |a - b| over the elements (same dims, same order); infinities
// must match exactly.
template <class A, class B>
double max_diff(const A& a, const B& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double x = double(a.data()[i]), y = double(b.data()[i]);
    if (std::isinf(x) || std::isinf(y)) {
      CHECK(x == y);
      continue;
    }
    m = std::max(m, std::abs(x - y));
  }
  return m;
}

using ln_t = tensor<double, batch, d_model, posn>;
}  // namespace

TEST_CASE("layer_norm on tensors: F.layer_norm over a middle dim, weight and bias by name", "[training_ops]") {
  const auto w = load<tensor<double, d_model>>("layer_norm_w");
  const auto b = load<tensor<double, d_model>>("layer_norm_b");
  for (const std::string name : {"layer_norm", "layer_norm_big"}) {
    INFO(name);
    const auto x = load<ln_t>(name + "_x");
    const auto want = load<ln_t>(name + "_y");
    const ln_t y = dimsum::layer_norm<d_model>(x, w, b);
    // The large case (mean 1e4) loses about 1e4 * 2^-52 to the centring,
    // divided by a standard deviation of about 1: both sides round there.
    CHECK(max_diff(y, want) <= (name == "layer_norm" ? 1e-13 : 1e-10));
  }
  // In float, from the same inputs: float32 rounding of values of size ~3.
  const auto x = load<ln_t>("layer_norm_x");
  const tensor<float, batch, d_model, posn> xf = dimsum::map([](double v) { return float(v); }, x);
  const tensor<float, d_model> wf = dimsum::map([](double v) { return float(v); }, w);
  const tensor<float, d_model> bf = dimsum::map([](double v) { return float(v); }, b);
  CHECK(max_diff(dimsum::layer_norm<d_model>(xf, wf, bf), load<ln_t>("layer_norm_y")) <= 2e-6);
  // The dims are found by name: x in another order normalises the same
  // rows, and the result keeps that order.
  const tensor<double, posn, batch, d_model> xt = x;
  const tensor<double, posn, batch, d_model> yt = dimsum::layer_norm<d_model>(xt, w, b);
  const ln_t back = yt;
  CHECK(max_diff(back, load<ln_t>("layer_norm_y")) <= 1e-13);
}

TEST_CASE("layer_norm on tensors: hand-computed row, eps", "[training_ops]") {
  // Row (1, 2, 3): mean 2, biased variance 2/3; with eps 0 the normalised
  // row is (-1, 0, 1) * sqrt(3/2).
  tensor<double, batch, d_model> x(batch{1}, d_model{3});
  for (std::size_t i = 0; i < 3; ++i) x.data()[i] = double(i + 1);
  tensor<double, d_model> ones(d_model{3}), zeros(d_model{3});
  ones.fill(1.0);
  const tensor<double, batch, d_model> y = dimsum::layer_norm<d_model>(x, ones, zeros, 0.0);
  CHECK(y.data()[0] == Approx(-std::sqrt(1.5)).epsilon(1e-14));
  CHECK(y.data()[1] == Approx(0.0).margin(1e-15));
  CHECK(y.data()[2] == Approx(std::sqrt(1.5)).epsilon(1e-14));
  // A constant row normalises to 0 (variance 0 + eps).
  x.fill(7.0);
  const tensor<double, batch, d_model> c = dimsum::layer_norm<d_model>(x, ones, zeros);
  for (std::size_t i = 0; i < 3; ++i) CHECK(c.data()[i] == 0.0);
}

TEST_CASE("log_softmax on tensors: F.log_softmax over a middle dim, -inf and large logits", "[training_ops]") {
  using t = tensor<double, batch, vocab, posn>;
  const auto x = load<t>("log_softmax_x");
  const t y = dimsum::log_softmax<vocab>(x);
  CHECK(max_diff(y, load<t>("log_softmax_y")) <= 1e-13);
  CHECK(std::isinf(y(batch{0}, vocab{2}, posn{1})));
  // Each row's probabilities sum to 1 (a plain loop).
  for (std::size_t bi = 0; bi < 2; ++bi)
    for (std::size_t p = 0; p < 3; ++p) {
      double s = 0;
      for (std::size_t v = 0; v < 4; ++v) s += std::exp(y(batch{bi}, vocab{v}, posn{p}));
      CHECK(s == Approx(1.0).epsilon(1e-14));
    }
  // A row that is -inf everywhere is NaN, as in torch (exp sums to 0 there).
  tensor<double, vocab> all_masked(vocab{3});
  all_masked.fill(-std::numeric_limits<double>::infinity());
  const tensor<double, vocab> m = dimsum::log_softmax<vocab>(all_masked);
  for (std::size_t v = 0; v < 3; ++v) CHECK(std::isnan(m.data()[v]));
}

TEST_CASE("cross_entropy on tensors: F.cross_entropy, mean and sum, targets in another order", "[training_ops]") {
  const auto logits = load<tensor<double, posn, vocab, batch>>("ce_logits");
  const auto targets = load<tensor<std::int64_t, batch, posn>>("ce_targets");
  const double want_mean = load<tensor<double>>("ce_mean").item();
  const double want_sum = load<tensor<double>>("ce_sum").item();
  const tensor<double> mean = dimsum::cross_entropy<vocab>(logits, targets);
  const tensor<double> sum = dimsum::cross_entropy<vocab>(logits, targets, dimsum::reduction::sum);
  CHECK(std::abs(mean.item() - want_mean) <= 1e-14 * std::abs(want_mean));
  CHECK(std::abs(sum.item() - want_sum) <= 1e-14 * std::abs(want_sum));
  const tensor<std::int64_t, posn, batch> transposed = targets;
  CHECK(dimsum::cross_entropy<vocab>(logits, transposed).item() == Approx(want_mean).epsilon(1e-14));
  // The var form gives the same value.
  dimsum::grad::tape tp;
  auto lv = tp.constant(logits);
  CHECK(dimsum::cross_entropy<vocab>(lv, targets).item() == mean.item());
}

TEST_CASE("cross_entropy on tensors: uniform logits give ln(classes); bad ids throw", "[training_ops]") {
  tensor<float, batch, vocab> logits(batch{4}, vocab{7});
  logits.fill(0.25f);
  tensor<std::int32_t, batch> ids(batch{4});
  for (std::size_t i = 0; i < 4; ++i) ids.data()[i] = std::int32_t(i);
  CHECK(dimsum::cross_entropy<vocab>(logits, ids).item() == Approx(std::log(7.0)).epsilon(1e-6));
  CHECK(dimsum::cross_entropy<vocab>(logits, ids, dimsum::reduction::sum).item() ==
        Approx(4 * std::log(7.0)).epsilon(1e-6));
  ids.data()[2] = 7;
  CHECK_THROWS_AS(dimsum::cross_entropy<vocab>(logits, ids), dimsum::shape_error);
  ids.data()[2] = -1;
  CHECK_THROWS_WITH(dimsum::cross_entropy<vocab>(logits, ids),
                    Catch::Contains("target -1") && Catch::Contains("'vocab' of extent 7"));
  // Mean over no targets is NaN, as in torch.
  tensor<float, batch, vocab> none(batch{0}, vocab{7});
  tensor<std::int32_t, batch> no_ids(batch{0});
  CHECK(std::isnan(dimsum::cross_entropy<vocab>(none, no_ids).item()));
}

TEST_CASE("cross_entropy: targets whose extents differ from the logits' throw, tensor and var forms", "[training_ops]") {
  // torch: "Expected input batch_size (2) to match target batch_size (3)".
  tensor<double, batch, posn, vocab> logits(batch{2}, posn{3}, vocab{4});
  tensor<std::int64_t, batch, posn> longer(batch{3}, posn{3});
  CHECK_THROWS_WITH(dimsum::cross_entropy<vocab>(logits, longer),
                    Catch::Contains("cross_entropy: dim 'batch' has extent 2 in the logits but 3 in the targets"));
  // In another order, shorter: would read fewer rows than there are.
  tensor<std::int64_t, posn, batch> shorter(posn{1}, batch{2});
  dimsum::grad::tape tp;
  auto lv = tp.watch(logits);
  CHECK_THROWS_WITH(dimsum::cross_entropy<vocab>(lv, shorter),
                    Catch::Contains("dim 'posn' has extent 3 in the logits but 1 in the targets"));
}

TEST_CASE("cross_entropy: a float loss over a million rows keeps float precision", "[training_ops]") {
  // Uniform logits over 2 classes: every row's loss is ln 2. Summed in
  // float one row at a time, the mean of 2^20 rows came out 0.65% low.
  const std::size_t rows = std::size_t(1) << 20;
  const tensor<float, batch, vocab> logits(batch{rows}, vocab{2});
  const tensor<std::int32_t, batch> ids(batch{rows});
  CHECK(dimsum::cross_entropy<vocab>(logits, ids).item() == Approx(std::log(2.0)).epsilon(1e-6));
  CHECK(dimsum::cross_entropy<vocab>(logits, ids, dimsum::reduction::sum).item() ==
        Approx(double(rows) * std::log(2.0)).epsilon(1e-6));
  dimsum::grad::tape tp;
  CHECK(dimsum::cross_entropy<vocab>(tp.constant(logits), ids).item() == Approx(std::log(2.0)).epsilon(1e-6));
}
