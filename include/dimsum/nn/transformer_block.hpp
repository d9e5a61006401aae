#pragma once
/// \file
/// Pre-norm residual blocks, with Hugging Face's state-dict names
/// `input_layernorm`, `self_attn`, `post_attention_layernorm` and `mlp`:
///
///     h = x + self_attn(input_layernorm(x))
///     y = h + mlp(post_attention_layernorm(h))
///
/// - `nn::pre_norm_block<Norm, Attention, MLP>`: the block for any norm,
///   attention and MLP modules: GPT-2's (`layer_norm`, a user's attention,
///   `gelu_mlp`) as well as Llama's. Any module with a var `operator()` is
///   an attention; on tensors the three need a const tensor `operator()`,
///   and `block(x, cache)` needs the attention's `operator()(x, cache)`.
/// - `nn::transformer_block<T, Pos, Model, Heads, KVHeads, Head, Hidden>`:
///   a pre-norm decoder layer as Llama writes it: `rms_norm`s,
///   `rotary_attention` and `swiglu`.
///
/// On tensors a block returns a tensor with x's dims; on a var it records
/// on its tape with every parameter watched (as bf16 copies of float32
/// parameters for a bf16 var, see nn/linear.hpp). `block(x, cache)` decodes
/// with the attention's key/value cache (`rotary_attention::make_cache`).
///
///     nn::pre_norm_block<nn::layer_norm<float, d_model>, my_attention, nn::gelu_mlp<float, d_model, d_mlp>> block{
///         nn::layer_norm<float, d_model>(d_model{64}), my_attention(...),
///         nn::layer_norm<float, d_model>(d_model{64}), nn::gelu_mlp<float, d_model, d_mlp>(d_model{64}, d_mlp{256})};
///     auto y = block(x);   // x: a var (batch, posn, d_model) of a tape

#include <cstdint>
#include <utility>

#include <boost/hana/define_struct.hpp>

#include <dimsum/grad/rules/elementwise.hpp>
#include <dimsum/grad/tape.hpp>
#include <dimsum/nn/detail/on_tape.hpp>
#include <dimsum/nn/mlp.hpp>
#include <dimsum/nn/rms_norm.hpp>
#include <dimsum/nn/rotary_attention.hpp>

namespace dimsum::nn {

/// A pre-norm residual block of a norm, an attention and an MLP module
/// (see the file's comment); the members are reflected, so state dicts and
/// optimizers see "input_layernorm.weight", "self_attn.<its names>", and so
/// on. Example: examples/char_transformer_model.hpp.
template <class Norm, class Attention, class MLP>
struct pre_norm_block {
  BOOST_HANA_DEFINE_STRUCT(pre_norm_block, (Norm, input_layernorm), (Attention, self_attn),
                           (Norm, post_attention_layernorm), (MLP, mlp));

  pre_norm_block() = default;
  pre_norm_block(Norm input_norm, Attention attention, Norm post_attention_norm, MLP feed_forward)
      : input_layernorm(std::move(input_norm)),
        self_attn(std::move(attention)),
        post_attention_layernorm(std::move(post_attention_norm)),
        mlp(std::move(feed_forward)) {}

  /// On tensors: a tensor with x's dims.
  template <named_expression X>
  auto operator()(const X& x) const {
    using Y = tensor_for_t<value_type_of_t<X>, dims_of_t<X>>;
    const Y h = x + self_attn(input_layernorm(x));
    return Y(h + mlp(post_attention_layernorm(h)));
  }

  /// Decoding with the attention's key/value cache: x's positions follow
  /// the cached ones.
  template <named_expression X, class Cache>
  auto operator()(const X& x, Cache& cache) const {
    using Y = tensor_for_t<value_type_of_t<X>, dims_of_t<X>>;
    const Y h = x + self_attn(input_layernorm(x), cache);
    return Y(h + mlp(post_attention_layernorm(h)));
  }

  /// On x's tape (a var x), with every parameter watched.
  template <grad::detail::var_like X>
  auto operator()(const X& x) {
    using V = grad::var_for_t<typename X::value_type, dims_of_t<X>>;
    const V h = x + self_attn(input_layernorm(x));
    return V(h + mlp(post_attention_layernorm(h)));
  }
};

template <class T, dimension Pos, dimension Model, dimension Heads, dimension KVHeads, dimension Head,
          dimension Hidden>
struct transformer_block {
  using attention_type = rotary_attention<T, Pos, Model, Heads, KVHeads, Head>;
  BOOST_HANA_DEFINE_STRUCT(transformer_block, (rms_norm<T, Model>, input_layernorm),
                           (attention_type, self_attn),
                           (rms_norm<T, Model>, post_attention_layernorm), (swiglu<T, Model, Hidden>, mlp));

  transformer_block() = default;
  /// Norm weights ones, the other weights zero (`reset_parameters` or a
  /// state-dict load fills them).
  transformer_block(Model model, Heads h, KVHeads kvh, Head d, Hidden hidden, double eps = 1e-6)
      : input_layernorm(model, eps),
        self_attn(model, h, kvh, d),
        post_attention_layernorm(model, eps),
        mlp(model, hidden) {}

  /// Norms ones; the attention's layers seeds `seed` to `seed + 3`, the
  /// MLP's `seed + 4` to `seed + 6`.
  void reset_parameters(std::uint64_t seed) {
    input_layernorm.reset_parameters();
    post_attention_layernorm.reset_parameters();
    self_attn.reset_parameters(seed);
    mlp.reset_parameters(seed + 4);
  }

  template <named_expression X>
  auto operator()(const X& x) const {
    using Y = tensor_for_t<T, dims_of_t<X>>;
    const Y h = x + self_attn(input_layernorm(x));
    return Y(h + mlp(post_attention_layernorm(h)));
  }

  /// Decoding with the attention's key/value cache (see
  /// `rotary_attention`): x's positions follow the cached ones.
  template <named_expression X, class Cache>
  auto operator()(const X& x, Cache& cache) const {
    using Y = tensor_for_t<T, dims_of_t<X>>;
    const Y h = x + self_attn(input_layernorm(x), cache);
    return Y(h + mlp(post_attention_layernorm(h)));
  }

  /// On x's tape (a var x), with every parameter watched.
  template <grad::detail::var_like X>
  auto operator()(const X& x) {
    auto h = x + self_attn(input_layernorm(x));
    return h + mlp(post_attention_layernorm(h));
  }
};

}  // namespace dimsum::nn
