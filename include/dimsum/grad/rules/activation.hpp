#pragma once
/// \file
/// Activations and unary maths on vars, computed directly in their rules
/// (gelu and gelu_tanh on the vectorised kernels of kernels/vector_math.hpp,
/// sigmoid and silu forward on them): `relu`, `gelu` (exact, with erf),
/// `gelu_tanh` (PyTorch's `approximate='tanh'`), `tanh`, `log`, `sigmoid`,
/// `silu`. Each keeps the var's dims.
///
///     auto h = dimsum::gelu(dimsum::einsum<"b p m, m f -> b p f">(x, w_in));

#include <cmath>
#include <numbers>

#include <dimsum/grad/rules/elementwise.hpp>
#include <dimsum/grad/rules/cast.hpp>
#include <dimsum/kernels/vector_math.hpp>

namespace dimsum::grad::detail {
/// Records the forward value y = f(x) (a tensor, computed already) of a
/// unary element-wise function of var v, with gradient back(g, x, y) (g
/// times the derivative, or a selection), computed in g's buffer, which
/// then becomes (or is added to) x's gradient.
template <class V, class Y, class Back>
auto record_unary_value(const V& v, Y&& y, Back back) {
  using T = typename V::value_type;
  return record_op(std::forward<Y>(y), [v, back](auto& g, const auto& out) {
    const T* x = v.value().data();
    const T* y = out.data();
    T* gp = g.data();
    for (std::size_t i = 0, n = g.size(); i < n; ++i) gp[i] = back(gp[i], x[i], y[i]);
    v.node()->accumulate(std::move(g));
  }, v);
}

/// Records y = f(x) element-wise with gradient back(g, x, y), as above.
template <class V, class F, class Back>
auto record_unary(const V& v, F f, Back back) {
  return record_unary_value(v, map(v.value(), f), back);
}

/// F(x) (kernels::math_fn F) of every element of a var's value, vectorised.
template <kernels::math_fn F, class V>
auto vector_value(const V& v) {
  auto y = uninitialized_tensor<typename V::tensor_type>(v.value().extents());
  kernels::math_contiguous<F>(v.value().data(), y.data(), y.size());
  return y;
}

/// Records y = F(x) (kernels::math_fn F, vectorised) with gradient
/// g * F'(x) (kernels::math_grad_contiguous), computed in g's buffer.
template <kernels::math_fn F, class V>
auto record_vector_unary(const V& v) {
  using T = typename V::value_type;
  return record(v.owner(), vector_value<F>(v), v.requires_grad(), [v](auto& g, const auto&) {
    kernels::math_grad_contiguous<F>(v.value().data(), static_cast<const T*>(g.data()), g.data(), g.size());
    v.node()->accumulate(std::move(g));
  });
}
}  // namespace dimsum::grad::detail

namespace dimsum {

/// max(x, 0) of a var, NaN kept (as the tensor form and torch.relu); the
/// gradient is selected, not multiplied, as torch's threshold_backward: 0
/// where x <= 0 (at x = 0 too) even if g is inf or NaN there, g elsewhere
/// (where x is NaN too).
template <grad::detail::var_like V>
auto relu(V&& v) {
  using T = typename std::remove_cvref_t<V>::value_type;
  return grad::detail::record_unary(
      v, [](T x) { return x < T(0) ? T(0) : x; }, [](T g, T x, T) { return x <= T(0) ? T(0) : g; });
}

/// GELU of a var, exact form x Phi(x) = x (1 + erf(x / sqrt 2)) / 2 (torch's
/// default); its gradient is Phi(x) + x phi(x). Both vectorised for float.
template <grad::detail::var_like V>
auto gelu(V&& v) {
  if constexpr (grad::detail::bf16_operands_v<V>) {  // in float32, rounded once (rules/cast.hpp)
    return grad::detail::in_float32([](auto x) { return dimsum::gelu(std::move(x)); }, std::forward<V>(v));
  } else {
    return grad::detail::record_vector_unary<kernels::math_fn::gelu>(v);
  }
}

/// GELU of a var, tanh form x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) / 2
/// (torch's `approximate='tanh'`). Vectorised for float and double.
template <grad::detail::var_like V>
auto gelu_tanh(V&& v) {
  if constexpr (grad::detail::bf16_operands_v<V>) {  // in float32, rounded once (rules/cast.hpp)
    return grad::detail::in_float32([](auto x) { return dimsum::gelu_tanh(std::move(x)); }, std::forward<V>(v));
  } else {
    return grad::detail::record_vector_unary<kernels::math_fn::gelu_tanh>(v);
  }
}

/// tanh of a var; the gradient is g (1 - tanh^2).
template <grad::detail::var_like V>
auto tanh(V&& v) {
  if constexpr (grad::detail::bf16_operands_v<V>) {  // in float32, rounded once (rules/cast.hpp)
    return grad::detail::in_float32([](auto x) { return dimsum::tanh(std::move(x)); }, std::forward<V>(v));
  } else {
    using T = typename std::remove_cvref_t<V>::value_type;
    return grad::detail::record_unary(v, [](T x) { return std::tanh(x); }, [](T g, T, T y) { return g * (T(1) - y * y); });
  }
}

/// Natural logarithm of a var; the gradient is g / x.
template <grad::detail::var_like V>
auto log(V&& v) {
  if constexpr (grad::detail::bf16_operands_v<V>) {  // in float32, rounded once (rules/cast.hpp)
    return grad::detail::in_float32([](auto x) { return dimsum::log(std::move(x)); }, std::forward<V>(v));
  } else {
    using T = typename std::remove_cvref_t<V>::value_type;
    return grad::detail::record_unary(v, [](T x) { return std::log(x); }, [](T g, T x, T) { return g * (T(1) / x); });
  }
}

/// The logistic function 1 / (1 + e^-x) of a var (forward vectorised, as
/// the tensor form); the gradient is g y (1 - y), as torch's
/// sigmoid_backward: 0 at +-inf.
template <grad::detail::var_like V>
auto sigmoid(V&& v) {
  if constexpr (grad::detail::bf16_operands_v<V>) {  // in float32, rounded once (rules/cast.hpp)
    return grad::detail::in_float32([](auto x) { return dimsum::sigmoid(std::move(x)); }, std::forward<V>(v));
  } else {
    using T = typename std::remove_cvref_t<V>::value_type;
    return grad::detail::record_unary_value(v, grad::detail::vector_value<kernels::math_fn::sigmoid>(v),
                                            [](T g, T, T y) { return g * ((T(1) - y) * y); });
  }
}

/// SiLU (swish) x sigmoid(x) of a var (forward vectorised, as the tensor
/// form and torch.nn.functional.silu); the gradient is
/// g s (1 + x (1 - s)) with s = sigmoid(x), as torch's silu_backward
/// (NaN at +-inf, where the forward is NaN at -inf too).
template <grad::detail::var_like V>
auto silu(V&& v) {
  if constexpr (grad::detail::bf16_operands_v<V>) {  // in float32, rounded once (rules/cast.hpp)
    return grad::detail::in_float32([](auto x) { return dimsum::silu(std::move(x)); }, std::forward<V>(v));
  } else {
    using T = typename std::remove_cvref_t<V>::value_type;
    return grad::detail::record_unary_value(v, grad::detail::vector_value<kernels::math_fn::silu>(v), [](T g, T x, T) {
      const T s = kernels::scalar_math<kernels::math_fn::sigmoid>(x);
      return g * (s * (T(1) + x * (T(1) - s)));
    });
  }
}

}  // namespace dimsum
