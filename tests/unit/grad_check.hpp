// The generic gradient checker of the grad_* tests: compares what
// tape.backward accumulates into each parameter's grad with central finite
// differences of the loss in double precision, and the PyTorch fixture
// helpers (tests/reference/make_grad_fixtures.py).
#pragma once
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <tuple>

#include <dimsum/grad/grad.hpp>
#include <dimsum/io/npy.hpp>

namespace grad_check {

/// A loss that sees every element of v with a different weight:
/// sum(v * (v + 0.5)), so a gradient check is not blind to any element.
template <class V>
auto loss_of(const V& v) {
  return dimsum::einsum<>(v * (v + 0.5));
}

/// The loss f(tape, var...) with each parameter watched on a fresh tape.
template <class F, class... P>
double value_of_loss(F& f, P&... ps) {
  dimsum::grad::tape t;
  return double(f(t, t.watch(ps)...).item());
}

/// Checks every element of every parameter's gradient against
/// (f(x + h) - f(x - h)) / 2h, the error of which is O(h^2) plus rounding
/// O(eps / h): with h = 1e-6 in double, about 1e-10 for O(1) values.
template <class F, class... P>
void check(F f, P&... ps) {
  (ps.zero_grad(), ...);
  {
    dimsum::grad::tape t;
    auto loss = f(t, t.watch(ps)...);
    t.backward(loss);
  }
  const double h = 1e-6;
  std::size_t checked = 0;
  auto one = [&](auto& p, std::size_t which) {
    for (std::size_t i = 0; i < p.value.size(); ++i) {
      double& x = p.value.data()[i];
      const double saved = x;
      x = saved + h;
      const double up = value_of_loss(f, ps...);
      x = saved - h;
      const double down = value_of_loss(f, ps...);
      x = saved;
      const double numeric = (up - down) / (2 * h);
      const double analytic = p.grad.data()[i];
      INFO("parameter " << which << " element " << i << ": analytic " << analytic << " numeric " << numeric);
      CHECK(std::abs(analytic - numeric) <= 1e-6 + 1e-6 * std::abs(numeric));
      ++checked;
    }
  };
  std::size_t k = 0;
  (one(ps, k++), ...);
  CHECK(checked > 0);
}

/// A fixed pseudo-random parameter of the given extents (N(0, 1) scaled).
template <class P, class... X>
P random_parameter(std::uint64_t seed, double scale, X... extents) {
  return P(P::tensor_type::random_normal(seed, extents...) * scale);
}

/// The path of a fixture written by tests/reference/make_grad_fixtures.py.
inline std::string fixture(const std::string& name) {
  return std::string(DIMSUM_SOURCE_DIR) + "/tests/reference/fixtures/grad/" + name + ".npy";
}
template <class TT>
TT load(const std::string& name) {
  return dimsum::load_npy<TT>(fixture(name));
}
template <class P>
P load_parameter(const std::string& name) {
  return P(load<typename P::tensor_type>(name));
}

/// Every element of got against the float64 fixture (read in got's dims
/// order): |got - want| <= atol + rtol * |want|.
template <class Got>
void expect_near(const Got& got, const std::string& name, double atol = 1e-10, double rtol = 1e-10) {
  using W = dimsum::tensor_for_t<double, dimsum::dims_of_t<Got>>;
  const W want = load<W>(name);
  REQUIRE(got.extents() == want.extents());
  double worst = 0;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double err = std::abs(double(got.data()[i]) - want.data()[i]);
    worst = std::max(worst, err);
    if (!(err <= atol + rtol * std::abs(want.data()[i]))) ++bad;
  }
  INFO("fixture " << name << ": worst abs error " << worst);
  CHECK(bad == 0);
}

/// A PyTorch case: y = f(tape, var...) with loss sum(y * r), r from the
/// fixture <case>_r; each parameter's gradient against <case>_grad_<name>.
template <class F, class... P>
void torch_case(const std::string& name, F f, std::initializer_list<const char*> names, P&... ps) {
  (ps.zero_grad(), ...);
  {
    dimsum::grad::tape t;
    auto y = f(t, t.watch(ps)...);
    using R = dimsum::tensor_for_t<double, typename decltype(y)::dims>;
    const R r = load<R>(name + "_r");
    t.backward(dimsum::einsum<>(y * r));
  }
  auto it = names.begin();
  (expect_near(ps.grad, name + "_grad_" + *it++), ...);
}

}  // namespace grad_check
