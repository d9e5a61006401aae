#pragma once
/// \file
/// `nn::layer_norm<T, D>`: PyTorch's nn.LayerNorm over one named dim D, with
/// its parameters `weight` (ones) and `bias` (zeros), each a
/// `parameter<T, D>`, as reflected members (`BOOST_HANA_DEFINE_STRUCT`), so
/// a model that holds one has "ln.weight" and "ln.bias" in its state dict.
/// Applied to a tensor it is `dimsum::layer_norm<D>` (ops/layer_norm.hpp);
/// on a var x, `ln(x)` records it on x's tape with the parameters watched
/// (`ln(tape, x)` names the tape). A float module on a bf16 var watches
/// its parameters as bf16 copies (their gradients float32) and normalises
/// in float32, rounding the result to bf16 once.
///
///     nn::layer_norm<float, d_model> ln(d_model{64});
///     tensor<float, batch, posn, d_model> h = ln(x);

#include <utility>

#include <boost/hana/define_struct.hpp>

#include <dimsum/grad/parameter.hpp>
#include <dimsum/grad/rules/layer_norm.hpp>
#include <dimsum/grad/tape.hpp>
#include <dimsum/nn/detail/on_tape.hpp>
#include <dimsum/nn/init.hpp>
#include <dimsum/ops/layer_norm.hpp>

namespace dimsum::nn {

template <class T, dimension D>
struct layer_norm {
  BOOST_HANA_DEFINE_STRUCT(layer_norm, (parameter<T, D>, weight), (parameter<T, D>, bias));
  /// Added to the variance (torch's default).
  double eps = 1e-5;

  layer_norm() = default;
  /// Weight ones and bias zeros of extent d (nn.LayerNorm(d, eps)).
  explicit layer_norm(D d, double epsilon = 1e-5) : weight(d), bias(d), eps(epsilon) { reset_parameters(); }

  /// nn.LayerNorm.reset_parameters: weight ones, bias zeros.
  void reset_parameters() {
    init::ones(weight);
    init::zeros(bias);
  }

  /// x normalised over D, scaled and shifted: a tensor with x's dims.
  template <named_expression X>
  auto operator()(X&& x) const {
    return dimsum::layer_norm<D>(std::forward<X>(x), weight.value, bias.value, eps);
  }

  /// The same on x's tape, for a var x: weight and bias are watched, so a
  /// backward pass accumulates their gradients. A var on no tape throws
  /// `grad::tape_error`.
  template <grad::detail::var_like X>
  auto operator()(X&& x) {
    return (*this)(detail::tape_of_input(x, "nn::layer_norm"), std::forward<X>(x));
  }

  /// The same on tape t, for a var x: weight and bias are watched, so a
  /// backward pass accumulates their gradients.
  template <grad::detail::var_like X>
  auto operator()(grad::tape& t, X&& x) {
    using In = std::remove_cvref_t<X>;
    return dimsum::layer_norm<D>(std::forward<X>(x), detail::watch_for<In>(t, weight), detail::watch_for<In>(t, bias),
                                 eps);
  }
};

}  // namespace dimsum::nn
