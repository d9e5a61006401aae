#pragma once
/// \file
/// Activations and unary maths on vars, computed directly in their rules:
/// `relu`, `gelu` (exact, with erf), `gelu_tanh` (PyTorch's
/// `approximate='tanh'`), `tanh`, `log`. Each keeps the var's dims.
///
///     auto h = dimsum::gelu(dimsum::einsum<"b p m, m f -> b p f">(x, w_in));

#include <cmath>
#include <numbers>

#include <dimsum/grad/rules/elementwise.hpp>

namespace dimsum::grad::detail {
/// Records y = f(x) element-wise with gradient g * df(x, y).
template <class V, class F, class DF>
auto record_unary(const V& v, F f, DF df) {
  using T = typename V::value_type;
  return record_op(map(v.value(), f), [v, df](const auto& g, const auto& out) {
    auto d = tensor_for_t<T, typename V::dims>::from_extents(out.extents());
    const T* x = v.value().data();
    const T* y = out.data();
    const T* gp = g.data();
    T* dp = d.data();
    for (std::size_t i = 0, n = d.size(); i < n; ++i) dp[i] = gp[i] * df(x[i], y[i]);
    v.node()->accumulate_raw(dp);
  }, v);
}
}  // namespace dimsum::grad::detail

namespace dimsum {

/// max(x, 0) of a var; the gradient passes where x > 0 (0 at x = 0, as torch).
template <grad::detail::var_like V>
auto relu(V&& v) {
  using T = typename std::remove_cvref_t<V>::value_type;
  return grad::detail::record_unary(
      v, [](T x) { return x > T(0) ? x : T(0); }, [](T x, T) { return x > T(0) ? T(1) : T(0); });
}

/// GELU of a var, exact form x Phi(x) = x (1 + erf(x / sqrt 2)) / 2 (torch's default).
template <grad::detail::var_like V>
auto gelu(V&& v) {
  using T = typename std::remove_cvref_t<V>::value_type;
  return grad::detail::record_unary(
      v, [](T x) { return T(0.5) * x * (T(1) + std::erf(x * T(std::numbers::sqrt2 / 2))); },
      [](T x, T) {
        const T cdf = T(0.5) * (T(1) + std::erf(x * T(std::numbers::sqrt2 / 2)));
        const T pdf = std::exp(T(-0.5) * x * x) * T(std::numbers::inv_sqrtpi / std::numbers::sqrt2);
        return cdf + x * pdf;
      });
}

/// GELU of a var, tanh form x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) / 2
/// (torch's `approximate='tanh'`).
template <grad::detail::var_like V>
auto gelu_tanh(V&& v) {
  using T = typename std::remove_cvref_t<V>::value_type;
  constexpr T c = T(std::numbers::sqrt2 * std::numbers::inv_sqrtpi);  // sqrt(2 / pi)
  constexpr T a = T(0.044715);
  return grad::detail::record_unary(
      v, [](T x) { return T(0.5) * x * (T(1) + std::tanh(c * (x + a * x * x * x))); },
      [](T x, T) {
        const T t = std::tanh(c * (x + a * x * x * x));
        return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * c * (T(1) + T(3) * a * x * x);
      });
}

/// tanh of a var; the gradient is g (1 - tanh^2).
template <grad::detail::var_like V>
auto tanh(V&& v) {
  using T = typename std::remove_cvref_t<V>::value_type;
  return grad::detail::record_unary(v, [](T x) { return std::tanh(x); }, [](T, T y) { return T(1) - y * y; });
}

/// Natural logarithm of a var; the gradient is g / x.
template <grad::detail::var_like V>
auto log(V&& v) {
  using T = typename std::remove_cvref_t<V>::value_type;
  return grad::detail::record_unary(v, [](T x) { return std::log(x); }, [](T x, T) { return T(1) / x; });
}

}  // namespace dimsum
