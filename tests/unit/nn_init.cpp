// nn/init.hpp against the formulas of torch.nn.init: bounds and moments
// over many draws (tolerances of 5 standard errors), kaiming_uniform's
// bound by hand, determinism from the seed, and the modules'
// reset_parameters (nn.Linear, nn.Embedding, nn.LayerNorm).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>

#include <dimsum/nn/nn.hpp>

namespace {
using dimsum::parameter;
using dimsum::tensor;
namespace init = dimsum::nn::init;
DIMSUM_DIM(d_in);
DIMSUM_DIM(d_out);
DIMSUM_DIM(nheads);
DIMSUM_DIM(vocab);

struct moments {
  double mean = 0, var = 0, lo = 1e300, hi = -1e300, within_1 = 0;
};
template <class T>
moments moments_of(const T& t, double centre = 0, double scale = 1) {
  moments m;
  const std::size_t n = t.size();
  for (std::size_t i = 0; i < n; ++i) {
    const double v = double(t.data()[i]);
    m.mean += v;
    m.lo = std::min(m.lo, v);
    m.hi = std::max(m.hi, v);
    if (std::abs(v - centre) < scale) m.within_1 += 1;
  }
  m.mean /= double(n);
  for (std::size_t i = 0; i < n; ++i) m.var += (double(t.data()[i]) - m.mean) * (double(t.data()[i]) - m.mean);
  m.var /= double(n - 1);
  m.within_1 /= double(n);
  return m;
}
constexpr std::size_t n = 200000;
}  // namespace

TEST_CASE("nn::init::uniform: U(a, b) bounds, mean (a+b)/2, variance (b-a)^2/12", "[nn_init]") {
  tensor<double, d_in> t(d_in{n});
  init::uniform(t, 11, -0.5, 1.5);
  const auto m = moments_of(t);
  CHECK(m.lo >= -0.5);
  CHECK(m.hi < 1.5);
  CHECK(m.lo < -0.49);
  CHECK(m.hi > 1.49);
  const double var = 4.0 / 12;
  CHECK(std::abs(m.mean - 0.5) <= 5 * std::sqrt(var / n));
  // The sample variance of a uniform has standard error sqrt((mu4 - var^2) / n), mu4 = (b-a)^4 / 80.
  CHECK(std::abs(m.var - var) <= 5 * std::sqrt((16.0 / 80 - var * var) / n));
}

TEST_CASE("nn::init: bounds torch refuses are errors, and the tensor is left as it was", "[nn_init]") {
  // torch: uniform_(t, 1, 0) "expects to return a [from, to) range",
  // normal_(t, 0, -1) "expects std >= 0.0"
  tensor<double, d_in> t(d_in{4});
  t.fill(7.0);
  CHECK_THROWS_WITH(init::uniform(t, 1, 1.0, 0.0), Catch::Contains("a <= b"));
  CHECK_THROWS_AS(init::uniform(t, 1, 0.0, INFINITY), dimsum::error);
  CHECK_THROWS_AS(init::uniform(t, 1, NAN, 1.0), dimsum::error);
  CHECK_THROWS_WITH(init::normal(t, 1, 0.0, -1.0), Catch::Contains("std >= 0"));
  CHECK_THROWS_AS(init::normal(t, 1, 0.0, NAN), dimsum::error);
  for (std::size_t i = 0; i < 4; ++i) CHECK(t(d_in{i}) == 7.0);
  init::uniform(t, 1, 2.0, 2.0);  // a == b and std == 0 are allowed, as in torch
  CHECK(t(d_in{3}) == 2.0);
  init::normal(t, 1, -3.0, 0.0);
  CHECK(t(d_in{0}) == -3.0);
}

TEST_CASE("nn::init::normal: mean, variance and the one-sigma mass of N(mean, std^2)", "[nn_init]") {
  tensor<double, d_in> t(d_in{n});
  init::normal(t, 12, 3.0, 0.02);
  const auto m = moments_of(t, 3.0, 0.02);
  CHECK(std::abs(m.mean - 3.0) <= 5 * 0.02 / std::sqrt(double(n)));
  CHECK(std::abs(m.var - 0.0004) <= 5 * 0.0004 * std::sqrt(2.0 / n));  // var of s^2 = 2 sigma^4 / (n - 1)
  const double p = std::erf(1 / std::sqrt(2.0));                          // 0.6827
  CHECK(std::abs(m.within_1 - p) <= 5 * std::sqrt(p * (1 - p) / n));
  CHECK(std::isfinite(m.lo));
}

TEST_CASE("nn::init::kaiming_uniform: bound sqrt(2 / (1 + a^2)) sqrt(3 / fan_in), fan-in by name", "[nn_init]") {
  // a = sqrt(5) gives 1 / sqrt(fan_in): nn.Linear's weight.
  CHECK(init::kaiming_uniform_bound(64) == Approx(1.0 / 8).epsilon(1e-15));
  CHECK(init::kaiming_uniform_bound(6, 0.0) == Approx(1.0).epsilon(1e-15));  // sqrt(2) sqrt(3/6)
  CHECK(init::kaiming_uniform_bound(0) == 0.0);
  // (d_out 400, nheads 5, d_in 100): the fan-in of d_in and nheads is 500.
  parameter<float, d_out, nheads, d_in> w(d_out{400}, nheads{5}, d_in{100});
  w.grad.fill(1.0f);
  CHECK(init::fan<d_in, nheads>(w) == 500);
  init::kaiming_uniform<d_in, nheads>(w, 13);
  const double bound = 1.0 / std::sqrt(500.0);
  const auto m = moments_of(w.value);
  CHECK(m.lo >= -bound);
  CHECK(m.hi <= bound);
  CHECK(m.hi > 0.999 * bound);
  CHECK(std::abs(m.mean) <= 5 * bound / std::sqrt(3.0 * double(w.value.size())));
  CHECK(m.var == Approx(bound * bound / 3).epsilon(0.01));
  CHECK(w.grad.data()[17] == 0.0f);  // a parameter's gradient is zeroed
}

TEST_CASE("nn::init: deterministic from the seed, portable engine", "[nn_init]") {
  // The engine is std::mt19937_64, whose 10000th output from the default
  // seed the standard fixes ([rand.predef]).
  std::mt19937_64 e;
  e.discard(9999);
  CHECK(e() == 9981545732273789042ull);
  // uniform() is the top 53 bits of one draw.
  init::generator g(5489);
  CHECK(g.uniform() == double(std::mt19937_64(5489)() >> 11) * 0x1p-53);
  tensor<float, d_in> a(d_in{64}), b(d_in{64}), c(d_in{64});
  init::normal(a, 42);
  init::normal(b, 42);
  init::normal(c, 43);
  CHECK(std::equal(a.data(), a.data() + 64, b.data()));
  CHECK(!std::equal(a.data(), a.data() + 64, c.data()));
  // One stream for two tensors continues where the first stopped.
  tensor<float, d_in> both(d_in{128}), first(d_in{64}), second(d_in{64});
  init::uniform(both, 9);
  init::generator s(9);
  init::uniform(first, s);
  init::uniform(second, s);
  CHECK(std::equal(first.data(), first.data() + 64, both.data()));
  CHECK(std::equal(second.data(), second.data() + 64, both.data() + 64));
}

TEST_CASE("nn modules' reset_parameters: nn.Linear, nn.Embedding, nn.LayerNorm", "[nn_init]") {
  dimsum::nn::linear<double, d_in, d_out> lin(d_in{25}, d_out{2000});
  lin.reset_parameters(3);
  const double bound = 0.2;  // 1 / sqrt(25)
  const auto w = moments_of(lin.weight.value);
  CHECK(w.lo >= -bound);
  CHECK(w.hi <= bound);
  CHECK(w.var == Approx(bound * bound / 3).epsilon(0.03));
  const auto b = moments_of(lin.bias->value);
  CHECK(b.lo >= -bound);
  CHECK(b.hi <= bound);
  CHECK(b.hi > 0.95 * bound);
  CHECK(b.var == Approx(bound * bound / 3).epsilon(0.15));  // 2000 draws: 5 standard errors is 16%
  dimsum::nn::linear<double, d_in, d_out> again(d_in{25}, d_out{2000});
  again.reset_parameters(3);
  CHECK(std::equal(again.bias->value.data(), again.bias->value.data() + 2000, lin.bias->value.data()));

  dimsum::nn::embedding<double, vocab, d_in> emb(vocab{1000}, d_in{100});
  emb.reset_parameters(4);
  const auto e = moments_of(emb.weight.value, 0, 1);
  CHECK(std::abs(e.mean) <= 5 / std::sqrt(1e5));
  CHECK(std::abs(e.var - 1) <= 5 * std::sqrt(2 / 1e5));

  dimsum::nn::layer_norm<float, d_in> ln(d_in{7});
  for (std::size_t i = 0; i < 7; ++i) {
    CHECK(ln.weight.value.data()[i] == 1.0f);
    CHECK(ln.bias.value.data()[i] == 0.0f);
  }
  CHECK(ln.eps == 1e-5);
}
