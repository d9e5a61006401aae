#pragma once
/// \file
/// `nn::rotary_attention<T, Pos, Model, Heads, KVHeads, Head>`: the causal
/// self-attention of Llama-style models, as a module of four reflected
/// bias-free `linear`s with Hugging Face's state-dict names ("q_proj.weight",
/// "k_proj.weight", "v_proj.weight", "o_proj.weight"): x (.., Pos, Model) is
/// projected to Heads query heads and KVHeads key/value heads of width Head,
/// rotary position embeddings (`rope`, half_split pairs as `rotate_half`,
/// base 10000) turn q and k along Pos, `scaled_dot_product_attention` runs
/// causal (with an optional sliding window) with the key/value heads
/// shared by groups when KVHeads differs from Heads, and o_proj maps the
/// merged heads back to Model. On tensors it returns a tensor with x's
/// dims; on a var it records on its tape with every weight watched.
///
///     nn::rotary_attention<float, posn, d_model, heads, kv_heads, d_head> attn(d_model{64}, heads{4}, kv_heads{2}, d_head{16});
///     auto y = attn(x);   // x (batch, posn, d_model) -> y (batch, posn, d_model)
///
/// For inference, `attn(x, cache)` decodes with a key/value cache
/// (`make_cache`, a `kv_cache` of the rotated keys and the values): x holds
/// the positions after the cached ones, RoPE turns them by their absolute
/// positions, their keys and values are appended, and each attends causally
/// (and within the window) to the cache; token by token this equals the
/// full causal forward.
///
///     auto cache = attn.make_cache(64, batch{1});    // up to 64 positions
///     auto y0 = attn(prompt, cache);                 // (batch 1, posn 5, d_model)
///     auto y1 = attn(next, cache);                   // (batch 1, posn 1, d_model): position 5

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include <boost/hana/define_struct.hpp>

#include <dimsum/core/bf16.hpp>
#include <dimsum/core/diagnostics.hpp>
#include <dimsum/grad/rules/regroup.hpp>
#include <dimsum/grad/rules/rename.hpp>
#include <dimsum/grad/rules/rope.hpp>
#include <dimsum/grad/tape.hpp>
#include <dimsum/nn/detail/on_tape.hpp>
#include <dimsum/nn/linear.hpp>
#include <dimsum/nn/scaled_dot_product_attention.hpp>
#include <dimsum/ops/kv_cache.hpp>
#include <dimsum/ops/regroup.hpp>
#include <dimsum/ops/rename.hpp>
#include <dimsum/ops/rope.hpp>

namespace dimsum {

/// Compile-time error: decoding with a key/value cache whose dims are not
/// those of the input's keys (its dims other than Pos and Model, then the
/// key positions, KVHeads and Head).
template <class CacheDims, class Expected>
struct rotary_attention_cache_does_not_fit_the_input {
  static_assert(detail::always_false<CacheDims, Expected>,
                "dimsum: nn::rotary_attention: the key/value cache's dims (first) are not those of the input's keys "
                "(second); make the cache with make_cache(capacity, batch...) for the input's other dims");
};

/// Checker: decoding with a key/value cache of a value type that is
/// neither the module's nor bf16 (for a float module).
template <class Module, class Cache>
struct rotary_attention_cache_value_type_is_neither_the_modules_nor_bf16 {
  static_assert(detail::always_false<Module, Cache>,
                "dimsum: nn::rotary_attention: a key/value cache holds the module's value type (first), or bf16 for a "
                "float module; the cache's (second) is neither");
};

}  // namespace dimsum

namespace dimsum::nn {

template <class T, dimension Pos, dimension Model, dimension Heads, dimension KVHeads, dimension Head,
          dimension QFeatures = dim<"q_features">, dimension KVFeatures = dim<"kv_features">>
struct rotary_attention {
  BOOST_HANA_DEFINE_STRUCT(rotary_attention, (linear<T, Model, QFeatures>, q_proj),
                           (linear<T, Model, KVFeatures>, k_proj), (linear<T, Model, KVFeatures>, v_proj),
                           (linear<T, QFeatures, Model>, o_proj));
  std::size_t heads = 0, kv_heads = 0, head_dim = 0;
  /// RoPE's base and pairing.
  double rope_base = 10000.0;
  rope_pairs pairs = rope_pairs::half_split;
  /// Nonzero: each query sees itself and the `window - 1` keys before it.
  std::size_t window = 0;

  rotary_attention() = default;
  /// Zero weights: `reset_parameters` or a state-dict load fills them.
  /// Heads's extent must be a multiple of KVHeads's (checked when called).
  rotary_attention(Model model, Heads h, KVHeads kvh, Head d)
      : q_proj(model, QFeatures{h.value * d.value}, false),
        k_proj(model, KVFeatures{kvh.value * d.value}, false),
        v_proj(model, KVFeatures{kvh.value * d.value}, false),
        o_proj(QFeatures{h.value * d.value}, model, false),
        heads(h.value),
        kv_heads(kvh.value),
        head_dim(d.value) {}

  /// Each layer's nn.Linear initialisation, seeds `seed` to `seed + 3`.
  void reset_parameters(std::uint64_t seed) {
    q_proj.reset_parameters(seed);
    k_proj.reset_parameters(seed + 1);
    v_proj.reset_parameters(seed + 2);
    o_proj.reset_parameters(seed + 3);
  }

  /// The key positions: Pos renamed, the dim along which a cache holds
  /// its positions.
  using key_posn = dim<"rotary_key_posn">;
  /// The key/value cache of inputs whose dims other than Pos and Model are
  /// `Batch...`: the rotated keys and the values, dims (Batch...,
  /// key_posn, KVHeads, Head).
  template <dimension... Batch>
  using cache_type = kv_cache<T, key_posn, Batch..., key_posn, KVHeads, Head>;
  /// The same cache storing C: T, or bf16 for a float module (half the
  /// memory; see `operator()(x, cache)`).
  template <class C, dimension... Batch>
  using cache_type_as = kv_cache<C, key_posn, Batch..., key_posn, KVHeads, Head>;

  /// An empty cache for up to `capacity` positions of inputs whose other
  /// dims have the given extents: `attn.make_cache(512, batch{4})`; a bf16
  /// cache of a float module: `attn.make_cache<bf16>(512, batch{4})`.
  template <class C = T, dimension... Batch>
  cache_type_as<C, Batch...> make_cache(std::size_t capacity, const Batch&... batch) const {
    static_assert(std::is_same_v<C, T> || (is_bf16_v<C> && std::is_same_v<T, float>),
                  "dimsum: nn::rotary_attention: make_cache<C> takes the module's value type, or bf16 for a float module");
    return cache_type_as<C, Batch...>(batch..., key_posn{capacity}, KVHeads{kv_heads}, Head{head_dim});
  }

  template <named_expression X>
  auto operator()(const X& x) const {
    auto apply = [](const auto& layer, const auto& in) { return layer(in); };
    auto [q, k, v] = project(*this, x, 0, apply);
    return attend(*this, q, rename<Pos, key_posn>(k), rename<Pos, key_posn>(v), 0, apply);
  }

  /// On x's tape (a var x), with the weights watched.
  template <grad::detail::var_like X>
  auto operator()(const X& x) {
    grad::tape& t = detail::tape_of_input(x, "nn::rotary_attention");
    auto apply = [&t](auto& layer, const auto& in) { return layer(t, in); };
    auto [q, k, v] = project(*this, x, 0, apply);
    return attend(*this, q, rename<Pos, key_posn>(k), rename<Pos, key_posn>(v), 0, apply);
  }

  /// Decoding with a cache: x's positions along Pos follow the `size()`
  /// positions the cache holds. Their keys and values are appended to the
  /// cache and each of x's positions attends to every cached position up
  /// to its own (and within the window). The result has x's dims. A cache
  /// without room for x's positions throws `shape_error` and is unchanged.
  /// A bf16 cache of a float module (`make_cache<bf16>`) stores the keys and
  /// values rounded to bf16; the queries are rounded too and the attention
  /// runs on the fused kernel's bf16 path (float32 inside), its output
  /// widened to float for `o_proj`.
  template <named_expression X, class C, dimension... Cs>
  auto operator()(const X& x, kv_cache<C, key_posn, Cs...>& cache) const {
    using want = typename dimsum::detail::concat<without_t<dims_of_t<X>, dim_list<Pos, Model>>,
                                                 dim_list<key_posn, KVHeads, Head>>::type;
    if constexpr (!(std::is_same_v<C, T> || (is_bf16_v<C> && std::is_same_v<T, float>))) {
      dimsum::detail::report<rotary_attention_cache_value_type_is_neither_the_modules_nor_bf16<T, C>>();
      return invalid_expression{};
    } else if constexpr (!same_name_set_v<dim_list<Cs...>, want>) {
      dimsum::detail::report<
          rotary_attention_cache_does_not_fit_the_input<diagnostic_dims_t<dim_list<Cs...>>, diagnostic_dims_t<want>>>();
      return invalid_expression{};
    } else {
      auto apply = [](const auto& layer, const auto& in) { return layer(in); };
      const std::size_t offset = cache.size();
      auto [q, k, v] = project(*this, x, offset, apply);
      if constexpr (std::is_same_v<C, T>) {
        cache.append(rename<Pos, key_posn>(k), rename<Pos, key_posn>(v));
        return attend(*this, q, cache.keys(), cache.values(), offset, apply);
      } else {
        cache.append(cast<C>(rename<Pos, key_posn>(k)), cast<C>(rename<Pos, key_posn>(v)));
        return attend(*this, tensor_for_t<C, dims_of_t<decltype(q)>>(cast<C>(q)), cache.keys(), cache.values(), offset,
                      apply);
      }
    }
  }

 private:
  static constexpr bool grouped = Heads::name.view() != KVHeads::name.view();
  using grouping = std::conditional_t<grouped, grouped_kv<Heads, KVHeads>, ungrouped>;

  template <dimension F, dimension H, class Y>
  static auto split(Y&& y, std::size_t h, std::size_t d) {
    constexpr std::size_t pos = dimsum::detail::find_name(dims_of_t<Y>::names, F::name.view());
    return split_dim<pos, dim_list<H, Head>>(std::forward<Y>(y), std::array<std::size_t, 2>{h, d});
  }

  // q, k (both rotated, position 0 of Pos at `offset`) and v of x, split
  // into heads; apply(layer, input) runs a layer of self (const for
  // tensors) on tensors or on the tape.
  template <class Self, class X, class Apply>
  static auto project(Self& self, const X& x, std::size_t offset, Apply apply) {
    const std::size_t heads = self.heads, kv_heads = self.kv_heads, head_dim = self.head_dim;
    auto q = rope<Pos, Head>(split<QFeatures, Heads>(apply(self.q_proj, x), heads, head_dim), self.pairs,
                             self.rope_base, offset);
    auto k = rope<Pos, Head>(split<KVFeatures, KVHeads>(apply(self.k_proj, x), kv_heads, head_dim), self.pairs,
                             self.rope_base, offset);
    auto v = split<KVFeatures, KVHeads>(apply(self.v_proj, x), kv_heads, head_dim);
    return std::tuple{std::move(q), std::move(k), std::move(v)};
  }

  // Causal attention of q (query i at position offset + i) over the keys
  // k and values v along key_posn, heads merged and projected by o_proj.
  template <class Self, class Q, class K, class V, class Apply>
  static auto attend(Self& self, const Q& q, const K& k, const V& v, std::size_t offset, Apply apply) {
    auto o = scaled_dot_product_attention<Pos, key_posn, Head, grouping>(
        q, k, v, no_mask{}, {.is_causal = true, .window = self.window, .offset = offset});
    constexpr std::size_t hp = dimsum::detail::find_name(dims_of_t<decltype(o)>::names, Heads::name.view());
    if constexpr (std::is_same_v<value_type_of_t<decltype(o)>, T>) {
      return apply(self.o_proj, merge_dims<hp, 2, QFeatures>(std::move(o)));
    } else {
      auto merged = merge_dims<hp, 2, QFeatures>(std::move(o));
      if constexpr (grad::detail::var_like<decltype(merged)>)  // a bf16 var: o_proj watches its weight as a bf16 copy
        return apply(self.o_proj, merged);
      else  // a bf16 cache's attention: its output widened (exactly) for o_proj
        return apply(self.o_proj, tensor_for_t<T, dims_of_t<decltype(merged)>>(cast<T>(merged)));
    }
  }
};

}  // namespace dimsum::nn
