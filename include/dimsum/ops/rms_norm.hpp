#pragma once
/// \file
/// `rms_norm<D>(x, weight, eps)` on tensors and expressions: x divided by
/// its root mean square over the named dim D (eps added to the mean of
/// squares), then scaled by weight, broadcast by name (dims (D) for
/// torch's RMSNorm(d)): `x * rsqrt(mean(x^2, -1) + eps) * weight`. It
/// evaluates into a tensor with x's dims in x's order. The var form, with
/// its gradient, is in grad/rules/rms_norm.hpp; the module is nn::rms_norm
/// (nn/rms_norm.hpp).
///
///     tensor<float, batch, posn, d_model> h = dimsum::rms_norm<d_model>(x, w);   // w: (d_model)

#include <cmath>
#include <type_traits>

#include <dimsum/core/diagnostics.hpp>
#include <dimsum/ops/elementwise.hpp>
#include <dimsum/ops/map.hpp>
#include <dimsum/ops/reduce.hpp>
#include <dimsum/tensor/named.hpp>

namespace dimsum {

/// Compile-time error: rms_norm<D> of a tensor without the dim D.
template <class Dim, class Dims>
struct rms_norm_dim_is_not_a_dim_of_the_tensor {
  static_assert(detail::always_false<Dim, Dims>, "dimsum: rms_norm over a dim that the tensor does not have");
};
/// Compile-time error: rms_norm's weight has a dim x lacks.
template <class WeightDims, class Dims>
struct rms_norm_weight_has_a_dim_the_input_lacks {
  static_assert(detail::always_false<WeightDims, Dims>,
                "dimsum: rms_norm's weight (first: its dims) must have only dims of x (second), e.g. (d_model)");
};

namespace detail {
/// The reciprocal root mean square of each row of x over D (x's dims
/// without D), which the gradient reuses.
template <dimension D, class T, class L>
tensor_for_t<T, without_t<L, dim_list<D>>> rms_norm_rstd(const tensor_for_t<T, L>& x, double eps) {
  using R = without_t<L, dim_list<D>>;
  const tensor_for_t<T, R> ms = dimsum::mean<D>(x * x);
  return dimsum::map([eps](T v) { return T(1) / std::sqrt(v + T(eps)); }, ms);
}

/// Whether rms_norm<D> of dims L with a weight of dims LW is well formed.
template <dimension D, class L, class LW>
inline constexpr bool rms_norm_ok = contains_v<L, D> && without_t<LW, L>::size == 0;

/// Reports why rms_norm<D> of dims L with a weight of dims LW is not.
template <dimension D, class L, class LW>
constexpr void report_rms_norm() {
  if constexpr (!contains_v<L, D>)
    report<rms_norm_dim_is_not_a_dim_of_the_tensor<diagnostic_name_t<D>, diagnostic_dims_t<L>>>();
  else
    report<rms_norm_weight_has_a_dim_the_input_lacks<diagnostic_dims_t<LW>, diagnostic_dims_t<L>>>();
}
}  // namespace detail

/// RMS normalisation of x over D, scaled by `weight` (a tensor or
/// expression over dims of x); eps defaults to 1e-6 (Llama's; pass
/// torch.finfo(dtype).eps for torch's nn.RMSNorm default). Compile errors
/// `rms_norm_dim_is_not_a_dim_of_the_tensor`,
/// `rms_norm_weight_has_a_dim_the_input_lacks`.
template <dimension D, named_expression X, named_expression W>
auto rms_norm(const X& x, const W& weight, double eps = 1e-6) {
  using T = value_type_of_t<X>;
  using L = dims_of_t<X>;
  if constexpr (!detail::rms_norm_ok<D, L, dims_of_t<W>>) {
    detail::report_rms_norm<D, L, dims_of_t<W>>();
    return invalid_expression{};
  } else {
    const tensor_for_t<T, L> xt = x;
    const auto rstd = detail::rms_norm_rstd<D, T, L>(xt, eps);
    const tensor_for_t<T, L> xhat = xt * rstd;
    return tensor_for_t<T, L>(xhat * weight);
  }
}

}  // namespace dimsum
