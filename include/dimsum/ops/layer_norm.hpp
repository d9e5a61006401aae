#pragma once
/// \file
/// `layer_norm<D>(x, weight, bias, eps)` on tensors and expressions: x
/// normalised over the named dim D (mean 0, biased variance 1, eps added to
/// the variance as torch does), then scaled by weight and shifted by bias,
/// both broadcast by name (dims (D) for torch's `F.layer_norm(x, (d,), w,
/// b)`). It evaluates into a tensor with x's dims in x's order. The var
/// form, with its gradient, is in grad/rules/layer_norm.hpp; the module
/// with its parameters is nn::layer_norm (nn/layer_norm.hpp).
///
///     tensor<float, batch, posn, d_model> h = dimsum::layer_norm<d_model>(x, w, b);   // w, b: (d_model)

#include <cmath>
#include <type_traits>
#include <utility>

#include <dimsum/core/bf16.hpp>
#include <dimsum/core/diagnostics.hpp>
#include <dimsum/ops/map.hpp>
#include <dimsum/ops/reduce.hpp>

namespace dimsum {

/// Compile-time error: layer_norm<D> of a tensor without the dim D.
template <class Dim, class Dims>
struct layer_norm_dim_is_not_a_dim_of_the_tensor {
  static_assert(detail::always_false<Dim, Dims>, "dimsum: layer_norm over a dim that the tensor does not have");
};
/// Checker: layer_norm's weight or bias is a number, not a tensor.
template <class Weight, class Bias>
struct layer_norm_weight_and_bias_are_tensors {
  static_assert(detail::always_false<Weight, Bias>,
                "dimsum: layer_norm's weight and bias are tensors (or vars) over dims of x, e.g. tensor<float, d_model>; "
                "without an affine part, pass ones and zeros");
};

namespace detail {
/// x normalised over D (xhat, dims L) and the reciprocal standard deviation
/// of each row (rstd, L without D), which the gradient reuses.
template <dimension D, class T, class L>
struct layer_norm_parts {
  tensor_for_t<T, L> xhat;
  tensor_for_t<T, without_t<L, dim_list<D>>> rstd;
};

template <dimension D, class T, class L>
layer_norm_parts<D, T, L> layer_norm_normalise(const tensor_for_t<T, L>& x, double eps) {
  using R = without_t<L, dim_list<D>>;
  const tensor_for_t<T, R> mu = dimsum::mean<D>(x);
  const tensor_for_t<T, L> xc = x - mu;
  const tensor_for_t<T, R> var = dimsum::mean<D>(xc * xc);
  tensor_for_t<T, R> rstd = dimsum::map([eps](T v) { return T(1) / std::sqrt(v + T(eps)); }, var);
  tensor_for_t<T, L> xhat = xc * rstd;
  return {std::move(xhat), std::move(rstd)};
}
}  // namespace detail

/// Layer normalisation of x over the dim D, scaled by `weight` and shifted
/// by `bias` (tensors or expressions whose dims are among x's, broadcast by
/// name); `eps` is added to the variance (torch's default 1e-5). Compile
/// error `layer_norm_dim_is_not_a_dim_of_the_tensor` if x has no dim D,
/// `layer_norm_weight_and_bias_are_tensors` if weight or bias is a number.
template <dimension D, named_expression X, class W, class B>
  requires(named_expression<W> || scalar<W>) && (named_expression<B> || scalar<B>)
auto layer_norm(X&& x, W&& weight, B&& bias, double eps = 1e-5) {
  using T = value_type_of_t<X>;
  using L = dims_of_t<X>;
  if constexpr (scalar<W> || scalar<B>) {
    detail::report<layer_norm_weight_and_bias_are_tensors<std::remove_cvref_t<W>, std::remove_cvref_t<B>>>();
    return invalid_expression{};
  } else if constexpr (is_invalid_v<X> || is_invalid_v<W> || is_invalid_v<B>) {
    return invalid_expression{};  // an error already reported
  } else if constexpr (!contains_v<L, D>) {
    detail::report<layer_norm_dim_is_not_a_dim_of_the_tensor<diagnostic_name_t<D>, diagnostic_dims_t<L>>>();
    return invalid_expression{};
  } else if constexpr (is_bf16_v<T>) {
    // bf16: normalised in float32 (x, weight and bias converted exactly),
    // each result rounded once.
    const auto as_float = [](auto&& e) -> decltype(auto) {
      if constexpr (is_bf16_v<value_type_of_t<decltype(e)>>)
        return cast<float>(std::forward<decltype(e)>(e));
      else
        return std::forward<decltype(e)>(e);
    };
    return tensor_for_t<T, L>(cast<bf16>(layer_norm<D>(as_float(std::forward<X>(x)), as_float(std::forward<W>(weight)),
                                                       as_float(std::forward<B>(bias)), eps)));
  } else {
    static_assert(std::is_floating_point_v<T>, "dimsum: layer_norm needs floating-point values");
    auto parts = detail::layer_norm_normalise<D, T, L>(tensor_for_t<T, L>(std::forward<X>(x)), eps);
    return tensor_for_t<T, L>(dimsum::map([](T xh, value_type_of_t<W> w, value_type_of_t<B> b) { return xh * w + b; },
                                          std::move(parts.xhat), std::forward<W>(weight), std::forward<B>(bias)));
  }
}

}  // namespace dimsum
