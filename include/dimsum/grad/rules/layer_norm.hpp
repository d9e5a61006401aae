#pragma once
/// \file
/// `layer_norm<D>(x, weight, bias, eps)` on vars: normalises x over the dim
/// D (mean 0, variance 1, biased variance as torch), then scales by weight
/// and shifts by bias, both broadcast by name (dims (D) for torch's
/// nn.LayerNorm(d)). weight and bias may be vars or constant tensors.
/// When D is x's last dim and weight and bias have the dims (D) alone, it
/// runs on kernels/layer_norm.hpp's rows.
///
///     auto h = dimsum::layer_norm<d_model>(x, ln_w, ln_b);   // ln_w, ln_b: var<float, d_model>

#include <cmath>
#include <utility>

#include <string>
#include <type_traits>
#include <vector>

#include <dimsum/grad/rules/elementwise.hpp>
#include <dimsum/kernels/layer_norm.hpp>
#include <dimsum/ops/layer_norm.hpp>
#include <dimsum/ops/reduce.hpp>

namespace dimsum::grad::detail {

/// Whether layer_norm<D> runs on kernels/layer_norm.hpp's rows: D is the
/// last of x's dims L (rows are contiguous), weight and bias have the dims
/// (D) alone, values are float or double.
template <dimension D, class T, class L, class W, class B>
constexpr bool layer_norm_on_rows_v() {
  if constexpr (!(var_like<W> && var_like<B>) || !(std::is_same_v<T, float> || std::is_same_v<T, double>) ||
                L::size == 0) {
    return false;
  } else {
    return L::names[L::size - 1] == D::name.view() && same_name_set_v<typename W::dims, dim_list<D>> &&
           same_name_set_v<typename B::dims, dim_list<D>> && std::is_same_v<typename W::value_type, T> &&
           std::is_same_v<typename B::value_type, T>;
  }
}
template <dimension D, class T, class L, class W, class B>
inline constexpr bool layer_norm_on_rows = layer_norm_on_rows_v<D, T, L, W, B>();

/// layer_norm<D> of var x on the row kernels: the forward saves each row's
/// mean and rstd (not the normalised x); the backward writes dx in the
/// gradient's own buffer and sums dw and db down the rows.
template <dimension D, class X, class W, class B>
auto layer_norm_rows_var(const X& x, const W& w, const B& b, double eps) {
  using T = typename X::value_type;
  const std::size_t n = x.value().template extent<D>();
  for (std::size_t e : {w.value().size(), b.value().size()})
    if (e != n)
      throw shape_error("layer_norm: dim '" + std::string(D::name.view()) + "' has extent " + std::to_string(n) +
                        " in the input but " + std::to_string(e) + " in the weight or bias");
  const std::size_t rows = n == 0 ? 0 : x.value().size() / n;
  auto y = uninitialized_tensor<typename X::tensor_type>(x.value().extents());
  std::vector<T> mean(rows), rstd(rows);
  kernels::layer_norm_rows(x.value().data(), w.value().data(), b.value().data(), y.data(), mean.data(), rstd.data(),
                           rows, n, T(eps));
  return record(common_tape({tape_of(x), tape_of(w), tape_of(b)}), std::move(y),
                x.requires_grad() || w.requires_grad() || b.requires_grad(),
                [x, w, b, mean = std::move(mean), rstd = std::move(rstd), rows, n](auto& g, const auto&) {
                  using WT = typename W::tensor_type;
                  using BT = typename B::tensor_type;
                  WT dw = w.requires_grad() ? WT::from_extents(w.value().extents()) : WT();
                  BT db = b.requires_grad() ? BT::from_extents(b.value().extents()) : BT();
                  kernels::layer_norm_backward_rows(g.data(), x.value().data(), w.value().data(), mean.data(),
                                                    rstd.data(), x.requires_grad() ? g.data() : nullptr,
                                                    w.requires_grad() ? dw.data() : nullptr,
                                                    b.requires_grad() ? db.data() : nullptr, rows, n);
                  if (w.requires_grad()) w.node()->accumulate(std::move(dw));
                  if (b.requires_grad()) b.node()->accumulate(std::move(db));
                  if (x.requires_grad()) x.node()->accumulate(std::move(g));  // dx, written over g
                });
}

}  // namespace dimsum::grad::detail

namespace dimsum {

/// Layer normalisation of the var x over dim D with weight and bias (vars
/// or tensors whose dims are a subset of x's); eps is added to the
/// variance (torch's default 1e-5).
template <dimension D, class X, class W, class B>
  requires(grad::detail::any_var_v<X, W, B>)
auto layer_norm(X&& x0, W&& w0, B&& b0, double eps = 1e-5) {
  if constexpr (scalar<W> || scalar<B>) {
    detail::report<layer_norm_weight_and_bias_are_tensors<std::remove_cvref_t<W>, std::remove_cvref_t<B>>>();
    return invalid_expression{};
  } else if constexpr (grad::detail::mixes_bf16_v<X, W, B>) {
    grad::detail::report_bf16_mix<X, W, B>();
    return invalid_expression{};
  } else if constexpr (grad::detail::bf16_operands_v<X, W, B>) {
    // bf16: normalised in float32 (statistics and every gradient sum),
    // the value and the gradients rounded to bf16 once (rules/cast.hpp).
    return grad::detail::in_float32([eps](auto x, auto w, auto b) {
      return dimsum::layer_norm<D>(std::move(x), std::move(w), std::move(b), eps);
    }, std::forward<X>(x0), std::forward<W>(w0), std::forward<B>(b0));
  } else {
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
    } else if constexpr (grad::detail::layer_norm_on_rows<D, T, L, decltype(w), decltype(b)>) {
      return grad::detail::layer_norm_rows_var<D>(x, w, b, eps);
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
}

}  // namespace dimsum
