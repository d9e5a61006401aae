#pragma once
/// \file
/// `nn::rms_norm<T, D>`: RMSNorm over one named dim D (torch's nn.RMSNorm,
/// Llama's RMSNorm), with its parameter `weight` (ones), a
/// `parameter<T, D>` found by reflection, so a model that holds one as
/// `norm` has "norm.weight" in its state dict. Applied to a tensor it is
/// `dimsum::rms_norm<D>` (ops/rms_norm.hpp); on a var x, `norm(x)` records
/// it on x's tape with the weight watched (`norm(tape, x)` names the tape);
/// a float module on a bf16 var watches it as a bf16 copy (its gradient
/// float32) and normalises in float32.
///
///     nn::rms_norm<float, d_model> norm(d_model{64});
///     tensor<float, batch, posn, d_model> h = norm(x);

#include <utility>

#include <boost/hana/define_struct.hpp>

#include <dimsum/grad/parameter.hpp>
#include <dimsum/grad/rules/rms_norm.hpp>
#include <dimsum/grad/tape.hpp>
#include <dimsum/nn/detail/on_tape.hpp>
#include <dimsum/nn/init.hpp>
#include <dimsum/ops/rms_norm.hpp>

namespace dimsum::nn {

template <class T, dimension D>
struct rms_norm {
  BOOST_HANA_DEFINE_STRUCT(rms_norm, (parameter<T, D>, weight));
  /// Added to the mean of squares.
  double eps = 1e-6;

  rms_norm() = default;
  /// Weight ones of extent d.
  explicit rms_norm(D d, double epsilon = 1e-6) : weight(d), eps(epsilon) { reset_parameters(); }

  /// Weight ones.
  void reset_parameters() { init::ones(weight); }

  /// x normalised over D and scaled: a tensor with x's dims.
  template <named_expression X>
  auto operator()(const X& x) const {
    return dimsum::rms_norm<D>(x, weight.value, eps);
  }

  /// The same on x's tape, for a var x, with the weight watched. A var on
  /// no tape throws `grad::tape_error`.
  template <grad::detail::var_like X>
  auto operator()(X&& x) {
    return (*this)(detail::tape_of_input(x, "nn::rms_norm"), std::forward<X>(x));
  }

  /// The same on tape t, for a var x.
  template <grad::detail::var_like X>
  auto operator()(grad::tape& t, X&& x) {
    return dimsum::rms_norm<D>(std::forward<X>(x), detail::watch_for<std::remove_cvref_t<X>>(t, weight), eps);
  }
};

}  // namespace dimsum::nn
