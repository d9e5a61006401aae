#pragma once
/// \file
/// `layer_norm<D>(x, weight, bias, eps)` on vars: normalises x over the dim
/// D (mean 0, variance 1, biased variance as torch), then scales by weight
/// and shifts by bias, both broadcast by name (dims (D) for torch's
/// nn.LayerNorm(d)). weight and bias may be vars or constant tensors.
///
///     auto h = dimsum::layer_norm<d_model>(x, ln_w, ln_b);   // ln_w, ln_b: var<float, d_model>

#include <cmath>
#include <utility>

#include <dimsum/grad/rules/elementwise.hpp>
#include <dimsum/ops/layer_norm.hpp>
#include <dimsum/ops/reduce.hpp>

namespace dimsum {

/// Layer normalisation of the var x over dim D with weight and bias (vars
/// or tensors whose dims are a subset of x's); eps is added to the
/// variance (torch's default 1e-5).
template <dimension D, class X, class W, class B>
  requires(grad::detail::any_var_v<X, W, B>)
auto layer_norm(X&& x0, W&& w0, B&& b0, double eps = 1e-5) {
  auto x = grad::detail::lift(std::forward<X>(x0));
  auto w = grad::detail::lift(std::forward<W>(w0));
  auto b = grad::detail::lift(std::forward<B>(b0));
  using XV = decltype(x);
  using T = typename XV::value_type;
  using L = typename XV::dims;
  using R = without_t<L, dim_list<D>>;
  if constexpr (!contains_v<L, D>) {
    detail::report<layer_norm_dim_is_not_a_dim_of_the_tensor<diagnostic_name_t<D>, diagnostic_dims_t<L>>>();
    return invalid_expression{};
  } else {
    auto parts = detail::layer_norm_normalise<D, T, L>(x.value(), eps);
    const tensor_for_t<T, L> scaled = parts.xhat * w.value();
    auto fwd = scaled + b.value();
    return grad::detail::record_op(std::move(fwd), [x, w, b, xhat = std::move(parts.xhat), rstd = std::move(parts.rstd)](const auto& g, const auto&) {
      grad::detail::send(b, g);
      grad::detail::send(w, g * xhat);
      if (x.requires_grad()) {
        // dx = rstd (gh - mean<D>(gh) - xhat mean<D>(gh xhat)), gh = g w.
        const tensor_for_t<T, L> gh = g * w.value();
        const tensor_for_t<T, R> m1 = dimsum::mean<D>(gh);
        const tensor_for_t<T, L> ghx = gh * xhat;
        const tensor_for_t<T, R> m2 = dimsum::mean<D>(ghx);
        const tensor_for_t<T, L> t1 = gh - m1;
        const tensor_for_t<T, L> t2 = xhat * m2;
        const tensor_for_t<T, L> t3 = t1 - t2;
        x.node()->accumulate(t3 * rstd);
      }
    }, x, w, b);
  }
}

}  // namespace dimsum
