// The generic gradient checker of the grad_* tests: compares what
// tape.backward accumulates into each parameter's grad with central finite
// differences of the loss in double precision.
#pragma once
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <tuple>

#include <dimsum/grad/grad.hpp>

namespace grad_check {

/// The loss f(tape, var...) with each parameter watched on a fresh tape.
template <class F, class... P>
double loss_of(F& f, P&... ps) {
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
      const double up = loss_of(f, ps...);
      x = saved - h;
      const double down = loss_of(f, ps...);
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

}  // namespace grad_check
