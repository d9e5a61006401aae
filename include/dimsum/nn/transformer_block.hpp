#pragma once
/// \file
/// `nn::transformer_block<T, Pos, Model, Heads, KVHeads, Head, Hidden>`: a
/// pre-norm decoder layer as Llama writes it, with Hugging Face's
/// state-dict names: `input_layernorm` (`rms_norm`), `self_attn`
/// (`rotary_attention`), `post_attention_layernorm` (`rms_norm`) and `mlp`
/// (`swiglu`):
///
///     h = x + self_attn(input_layernorm(x))
///     y = h + mlp(post_attention_layernorm(h))
///
/// On tensors it returns a tensor with x's dims; on a var it records on its
/// tape with every parameter watched. `block(x, cache)` decodes with the
/// attention's key/value cache (`rotary_attention::make_cache`).

#include <cstdint>

#include <boost/hana/define_struct.hpp>

#include <dimsum/grad/rules/elementwise.hpp>
#include <dimsum/grad/tape.hpp>
#include <dimsum/nn/detail/on_tape.hpp>
#include <dimsum/nn/mlp.hpp>
#include <dimsum/nn/rms_norm.hpp>
#include <dimsum/nn/rotary_attention.hpp>

namespace dimsum::nn {

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
