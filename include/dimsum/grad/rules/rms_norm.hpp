#pragma once
/// \file
/// `rms_norm<D>(x, weight, eps)` on vars: x divided by its root mean square
/// over D, scaled by weight (a var or a constant tensor over dims of x),
/// recorded as one node. With r = 1 / sqrt(mean<D>(x^2) + eps) and
/// gh = g weight, the gradients are dweight = sum of g x r over the dims
/// weight lacks, and dx = r gh - x r^3 mean<D>(gh x).
///
///     auto h = dimsum::rms_norm<d_model>(x, w);   // w: var<float, d_model>

#include <utility>

#include <dimsum/grad/rules/elementwise.hpp>
#include <dimsum/ops/rms_norm.hpp>

namespace dimsum {

/// RMS normalisation of the var x over D with weight (see the file comment).
template <dimension D, class X, class W>
  requires(grad::detail::any_var_v<X, W>)
auto rms_norm(X&& x0, W&& w0, double eps = 1e-6) {
  if constexpr (grad::detail::mixes_bf16_v<X, W>) {
    grad::detail::report_bf16_mix<X, W>();
    return invalid_expression{};
  } else if constexpr (grad::detail::bf16_operands_v<X, W>) {  // in float32, rounded once (rules/cast.hpp)
    return grad::detail::in_float32(
        [eps](auto x, auto w) { return dimsum::rms_norm<D>(std::move(x), std::move(w), eps); }, std::forward<X>(x0),
        std::forward<W>(w0));
  } else {
  auto x = grad::detail::lift(std::forward<X>(x0));
  auto w = grad::detail::lift(std::forward<W>(w0));
  using XV = decltype(x);
  using T = typename XV::value_type;
  using L = typename XV::dims;
  using R = without_t<L, dim_list<D>>;
  if constexpr (!detail::rms_norm_ok<D, L, typename decltype(w)::dims>) {
    detail::report_rms_norm<D, L, typename decltype(w)::dims>();
    return invalid_expression{};
  } else {
    tensor_for_t<T, R> rstd = detail::rms_norm_rstd<D, T, L>(x.value(), eps);
    tensor_for_t<T, L> xhat = x.value() * rstd;
    // evaluated before xhat moves into the rule
    tensor_for_t<T, L> fwd = xhat * w.value();
    return grad::detail::record_op(
        std::move(fwd),
        [x, w, xhat = std::move(xhat), rstd = std::move(rstd)](const auto& g, const auto&) {
          grad::detail::send(w, g * xhat);
          if (x.requires_grad()) {
            const tensor_for_t<T, L> gh = g * w.value();
            const tensor_for_t<T, L> ghx = gh * xhat;
            const tensor_for_t<T, R> m = dimsum::mean<D>(ghx);  // r mean<D>(gh x)
            const tensor_for_t<T, L> t = gh - xhat * m;
            x.node()->accumulate(t * rstd);
          }
        },
        x, w);
  }
  }
}

}  // namespace dimsum
