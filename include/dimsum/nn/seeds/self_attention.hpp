#pragma once
/// \file
/// Seed 004's own classes, in `dimsum::nn::seeds`: SelfAttention_v1
/// (weight matrices (d_in, d_out) from torch.rand) and SelfAttention_v2
/// (nn.Linear layers, optional qkv bias): x (Token, DIn) -> context (Token,
/// DOut), scores scaled by 1/sqrt(extent of DOut), softmax over the key
/// tokens. `self_attention_v2` called on a `grad::var` records on its tape
/// (tests/unit/nn_tape.cpp). See examples/seed004_self_attention.cpp.

#include <cmath>
#include <cstdint>

#include <boost/hana/define_struct.hpp>

#include <dimsum/grad/rules/rename.hpp>
#include <dimsum/grad/rules/softmax.hpp>
#include <dimsum/nn/linear.hpp>
#include <dimsum/ops/softmax.hpp>
#include <dimsum/tensor/concepts.hpp>

namespace dimsum::nn::seeds {

/// The key positions of a self-attention over Token: the same positions
/// under a second name (`key_token`), so queries and keys are different dims.
template <dimension Token>
struct key_position : dim<"key_token"> {};

/// The intermediates of a self-attention forward pass: queries, keys,
/// values (Token, DOut); attn_scores (before scaling) and attn_weights
/// (Token, key_position<Token>).
template <class T, dimension Token, dimension DOut>
struct self_attention_trace {
  tensor<T, Token, DOut> queries, keys, values;
  tensor<T, Token, key_position<Token>> attn_scores, attn_weights;
};

namespace detail {
/// The dim of a rank-2 x other than DIn: the token positions, by name.
template <class X, dimension DIn>
using token_dim_t = dimsum::detail::at_t<without_t<dims_of_t<X>, dim_list<DIn>>, 0>;
template <class X, class DIn>
inline constexpr bool is_token_input_v = dims_of_t<X>::size == 2 && contains_v<dims_of_t<X>, DIn>;
}  // namespace detail

namespace detail {
// What both versions do after their projections, on tensors (scores and
// weights: the trace's) or on vars of one tape (scores and weights: vars).
template <class T, dimension Token, dimension DOut, class Q, class K, class V, class S>
auto self_attend(const Q& queries, const K& keys, const V& values, S& attn_scores, S& attn_weights) {
  using KT = key_position<Token>;
  const T d_k = static_cast<T>(std::sqrt(double(keys.template extent<DOut>())));
  attn_scores = einsum<Token, KT>(queries, rename<Token, KT>(keys));  // queries @ keys.T
  attn_weights = softmax<KT>(attn_scores / d_k);
  return einsum<Token, DOut>(attn_weights, rename<Token, KT>(values));  // attn_weights @ values
}
template <class T, dimension Token, dimension DOut>
tensor<T, Token, DOut> self_attend(self_attention_trace<T, Token, DOut>& t) {
  return self_attend<T, Token, DOut>(t.queries, t.keys, t.values, t.attn_scores, t.attn_weights);
}
}  // namespace detail

/// SelfAttention_v1: x @ W for each of query, key and value.
template <class T, dimension DIn, dimension DOut>
struct self_attention_v1 {
  /// The (DIn, DOut) weight matrices (`nn.Parameter(torch.rand(d_in, d_out))`
  /// in the seed), reflected members: `load_npy_dir` reads W_query.npy, ...
  BOOST_HANA_DEFINE_STRUCT(self_attention_v1, (parameter<T, DIn, DOut>, W_query), (parameter<T, DIn, DOut>, W_key),
                           (parameter<T, DIn, DOut>, W_value));

  self_attention_v1(DIn d_in, DOut d_out) : W_query(d_in, d_out), W_key(d_in, d_out), W_value(d_in, d_out) {}

  /// torch.rand-like U[0, 1) weights from a seeded generator.
  void reset_parameters(std::uint64_t seed) {
    const DIn i{W_query.value.template extent<DIn>()};
    const DOut o{W_query.value.template extent<DOut>()};
    W_query.value = tensor<T, DIn, DOut>::random_uniform(seed, i, o);
    W_key.value = tensor<T, DIn, DOut>::random_uniform(seed + 1, i, o);
    W_value.value = tensor<T, DIn, DOut>::random_uniform(seed + 2, i, o);
  }

  /// x: any named expression with two dims, DIn and the tokens (Token, the
  /// other one, found by name), in either order. A trace pointer (null:
  /// none) receives the intermediates.
  template <named_expression X, dimension Token = detail::token_dim_t<X, DIn>>
    requires(detail::is_token_input_v<X, DIn>)
  tensor<T, Token, DOut> operator()(const X& x, self_attention_trace<T, Token, DOut>* tr = nullptr) const {
    self_attention_trace<T, Token, DOut> local;
    auto& t = tr ? *tr : local;
    t.keys = einsum<Token, DOut>(x, W_key.value);  // x @ W_key
    t.queries = einsum<Token, DOut>(x, W_query.value);
    t.values = einsum<Token, DOut>(x, W_value.value);
    return detail::self_attend(t);
  }
};

/// SelfAttention_v2: nn.Linear layers for query, key and value.
template <class T, dimension DIn, dimension DOut>
struct self_attention_v2 {
  /// The Linear(DIn, DOut) layers (bias only with qkv_bias).
  BOOST_HANA_DEFINE_STRUCT(self_attention_v2, (linear<T, DIn, DOut>, W_query), (linear<T, DIn, DOut>, W_key),
                           (linear<T, DIn, DOut>, W_value));

  self_attention_v2(DIn d_in, DOut d_out, bool qkv_bias = false)
      : W_query(d_in, d_out, qkv_bias), W_key(d_in, d_out, qkv_bias), W_value(d_in, d_out, qkv_bias) {}

  /// PyTorch's Linear initialisation for each layer (seeds seed, seed + 1,
  /// seed + 2).
  void reset_parameters(std::uint64_t seed) {
    W_query.reset_parameters(seed);
    W_key.reset_parameters(seed + 1);
    W_value.reset_parameters(seed + 2);
  }

  /// x: any named expression with two dims, DIn and the tokens (Token, the
  /// other one, found by name), in either order. A trace pointer (null:
  /// none) receives the intermediates.
  template <named_expression X, dimension Token = detail::token_dim_t<X, DIn>>
    requires(detail::is_token_input_v<X, DIn>)
  tensor<T, Token, DOut> operator()(const X& x, self_attention_trace<T, Token, DOut>* tr = nullptr) const {
    self_attention_trace<T, Token, DOut> local;
    auto& t = tr ? *tr : local;
    t.keys = W_key(x);
    t.queries = W_query(x);
    t.values = W_value(x);
    return detail::self_attend(t);
  }

  /// The same on a var x, recorded on x's tape with every layer's weight
  /// (and bias) watched: backward accumulates their gradients (the seed's
  /// `sa_v2(inputs)` in a training loop). Returns a var (Token, DOut).
  template <grad::detail::var_like X, dimension Token = detail::token_dim_t<X, DIn>>
    requires(detail::is_token_input_v<X, DIn>)
  grad::var<T, Token, DOut> operator()(X&& x) {
    auto keys = W_key(x);
    auto queries = W_query(x);
    auto values = W_value(x);
    grad::var<T, Token, key_position<Token>> attn_scores, attn_weights;
    return detail::self_attend<T, Token, DOut>(queries, keys, values, attn_scores, attn_weights);
  }
};

}  // namespace dimsum::nn::seeds
