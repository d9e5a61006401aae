#pragma once
/// \file
/// The feed-forward halves of transformer blocks, as modules whose layers
/// are reflected members (state-dict names as in the usual PyTorch code):
///
/// - `nn::swiglu<T, Model, Hidden>`: Llama's MLP,
///   `down_proj(silu(gate_proj(x)) * up_proj(x))`, three bias-free
///   `linear`s ("gate_proj.weight", "up_proj.weight", "down_proj.weight");
/// - `nn::gelu_mlp<T, Model, Hidden>`: GPT-2's MLP,
///   `c_proj(gelu(c_fc(x)))` with the exact (erf) GELU and biases
///   ("c_fc.weight", "c_fc.bias", "c_proj.weight", "c_proj.bias").
///
/// Both map x's dim Model to Model through Hidden; on tensors they return a
/// tensor with x's dims, on a var they record on its tape with every weight
/// watched.
///
///     nn::swiglu<float, d_model, d_ff> mlp(d_model{64}, d_ff{172});
///     auto y = mlp(x);   // x (batch, posn, d_model) -> y (batch, posn, d_model)

#include <cstdint>
#include <utility>

#include <boost/hana/define_struct.hpp>

#include <dimsum/grad/rules/activation.hpp>
#include <dimsum/grad/rules/elementwise.hpp>
#include <dimsum/grad/tape.hpp>
#include <dimsum/nn/detail/on_tape.hpp>
#include <dimsum/nn/linear.hpp>
#include <dimsum/ops/math.hpp>

namespace dimsum::nn {

template <class T, dimension Model, dimension Hidden>
struct swiglu {
  BOOST_HANA_DEFINE_STRUCT(swiglu, (linear<T, Model, Hidden>, gate_proj), (linear<T, Model, Hidden>, up_proj),
                           (linear<T, Hidden, Model>, down_proj));

  swiglu() = default;
  /// Zero weights: `reset_parameters` or a state-dict load fills them.
  swiglu(Model model, Hidden hidden)
      : gate_proj(model, hidden, false), up_proj(model, hidden, false), down_proj(hidden, model, false) {}

  /// Each layer's nn.Linear initialisation, seeds `seed` to `seed + 2`.
  void reset_parameters(std::uint64_t seed) {
    gate_proj.reset_parameters(seed);
    up_proj.reset_parameters(seed + 1);
    down_proj.reset_parameters(seed + 2);
  }

  template <named_expression X>
  auto operator()(const X& x) const {
    auto gate = gate_proj(x);
    auto up = up_proj(x);
    using H = decltype(gate);
    const H h = dimsum::silu(gate) * up;
    return down_proj(h);
  }

  /// On x's tape (a var x), with the weights watched.
  template <grad::detail::var_like X>
  auto operator()(X&& x) {
    return (*this)(detail::tape_of_input(x, "nn::swiglu"), std::forward<X>(x));
  }

  /// On tape t, for a var of t or a tensor (a constant input).
  template <class X>
    requires(grad::detail::var_like<X> || named_expression<X>)
  auto operator()(grad::tape& t, X&& x) {
    return down_proj(t, dimsum::silu(gate_proj(t, x)) * up_proj(t, x));
  }
};

template <class T, dimension Model, dimension Hidden>
struct gelu_mlp {
  BOOST_HANA_DEFINE_STRUCT(gelu_mlp, (linear<T, Model, Hidden>, c_fc), (linear<T, Hidden, Model>, c_proj));

  gelu_mlp() = default;
  /// Zero weights and biases (none when `with_bias` is false).
  gelu_mlp(Model model, Hidden hidden, bool with_bias = true)
      : c_fc(model, hidden, with_bias), c_proj(hidden, model, with_bias) {}

  /// Each layer's nn.Linear initialisation, seeds `seed` and `seed + 1`.
  void reset_parameters(std::uint64_t seed) {
    c_fc.reset_parameters(seed);
    c_proj.reset_parameters(seed + 1);
  }

  template <named_expression X>
  auto operator()(const X& x) const {
    auto h = c_fc(x);
    const decltype(h) a = dimsum::gelu(h);
    return c_proj(a);
  }

  /// On x's tape (a var x), with the weights watched.
  template <grad::detail::var_like X>
  auto operator()(X&& x) {
    return (*this)(detail::tape_of_input(x, "nn::gelu_mlp"), std::forward<X>(x));
  }

  /// On tape t, for a var of t or a tensor (a constant input).
  template <class X>
    requires(grad::detail::var_like<X> || named_expression<X>)
  auto operator()(grad::tape& t, X&& x) {
    return c_proj(t, dimsum::gelu(c_fc(t, std::forward<X>(x))));
  }
};

}  // namespace dimsum::nn
