#pragma once
/// \file
/// `nn::transformer<T, Vocab, Pos, Model, Heads, KVHeads, Head, Hidden>`: a
/// small decoder-only language model as Llama writes it, with Hugging
/// Face's state-dict names (without the "model." prefix):
///
///     h      = embed_tokens(ids)                 (nn::embedding, Vocab -> Model)
///     h      = layers.i(h)   for each layer      (nn::transformer_block)
///     logits = lm_head(norm(h))                  (nn::rms_norm, then Model -> Vocab)
///
/// The LM head is a bias-free `linear` of its own (`embeddings::untied`) or
/// reads the embedding's table (`embeddings::tied`, PyTorch's
/// `lm_head.weight = embed_tokens.weight`): then `lm_head` is empty, so
/// reflection, optimizers and state dicts see one parameter,
/// "embed_tokens.weight", whose gradient is the sum of the lookup's and the
/// head's. Token ids (integers, with Pos among their dims) give logits with
/// the ids' dims and Vocab: `m(ids)` on tensors, `m(tape, ids)` on a tape
/// with every parameter watched; `m(ids, cache)` decodes with one key/value
/// cache per layer (`make_cache`).
///
///     nn::transformer<float, vocab, posn, d_model, heads, kv_heads, d_head, d_ff> m(
///         vocab{65}, d_model{64}, heads{4}, kv_heads{2}, d_head{16}, d_ff{172}, 4, nn::embeddings::tied);
///     m.reset_parameters(1);
///     grad::tape t;
///     auto loss = cross_entropy<vocab>(m(t, ids), targets);   // ids, targets (batch, posn)

#include <cstddef>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include <boost/hana/define_struct.hpp>

#include <dimsum/core/diagnostics.hpp>
#include <dimsum/grad/rules/einsum.hpp>
#include <dimsum/grad/rules/log_softmax.hpp>  // cross_entropy on the logits' vars
#include <dimsum/grad/tape.hpp>
#include <dimsum/nn/embedding.hpp>
#include <dimsum/nn/linear.hpp>
#include <dimsum/nn/rms_norm.hpp>
#include <dimsum/nn/transformer_block.hpp>
#include <dimsum/ops/einsum.hpp>
#include <dimsum/ops/kv_cache.hpp>

namespace dimsum {

/// Compile-time error: token ids without the model's position dim (the
/// dim the rotary attention runs along).
template <class Pos, class IdDims>
struct transformer_ids_lack_the_position_dim {
  static_assert(detail::always_false<Pos, IdDims>,
                "dimsum: nn::transformer: the token ids need the model's position dim (first) among their dims "
                "(second)");
};
/// Compile-time error: token ids that are not integers.
template <class ValueType, class IdDims>
struct transformer_ids_are_not_integers {
  static_assert(detail::always_false<ValueType, IdDims>,
                "dimsum: nn::transformer: the token ids must be integers (class indices, as torch's int64 ids); "
                "convert them with dimsum::cast<std::int64_t>(ids)");
};

}  // namespace dimsum

namespace dimsum::nn {

/// Whether a transformer's LM head reads the embedding's table (`tied`) or
/// has a weight of its own (`untied`).
enum class embeddings { untied, tied };

template <class T, dimension Vocab, dimension Pos, dimension Model, dimension Heads, dimension KVHeads,
          dimension Head, dimension Hidden>
struct transformer {
  using block_type = transformer_block<T, Pos, Model, Heads, KVHeads, Head, Hidden>;
  BOOST_HANA_DEFINE_STRUCT(transformer, (embedding<T, Vocab, Model>, embed_tokens),
                           (std::vector<block_type>, layers), (rms_norm<T, Model>, norm),
                           (std::optional<linear<T, Model, Vocab>>, lm_head));

  transformer() = default;
  /// `n_layers` blocks; the norms' weights ones, every other weight zero
  /// (`reset_parameters` or a state-dict load fills them). With
  /// `embeddings::tied` the model has no `lm_head`: the head reads
  /// `embed_tokens.weight`.
  transformer(Vocab vocab, Model model, Heads h, KVHeads kvh, Head d, Hidden hidden, std::size_t n_layers,
              embeddings head = embeddings::untied, double eps = 1e-6)
      : embed_tokens(vocab, model), layers(n_layers, block_type(model, h, kvh, d, hidden, eps)), norm(model, eps) {
    if (head == embeddings::untied) lm_head.emplace(model, vocab, false);
  }

  /// Whether the LM head reads the embedding's table.
  bool tied() const { return !lm_head.has_value(); }

  /// The embedding N(0, 1) from `seed`; layer i's weights from seeds
  /// `seed + 1 + 7 i` on (`transformer_block::reset_parameters`); the
  /// norms ones; an untied head nn.Linear's initialisation from
  /// `seed + 1 + 7 n_layers`.
  void reset_parameters(std::uint64_t seed) {
    embed_tokens.reset_parameters(seed);
    for (std::size_t i = 0; i < layers.size(); ++i) layers[i].reset_parameters(seed + 1 + 7 * i);
    norm.reset_parameters();
    if (lm_head) lm_head->reset_parameters(seed + 1 + 7 * layers.size());
  }

  /// The logits of integer token ids: the ids' dims, then Vocab.
  template <named_expression Ids>
  auto operator()(const Ids& ids) const {
    return checked(ids, [&](const auto& in) {
      auto h = embed_tokens(in);
      for (const auto& layer : layers) h = layer(h);
      return logits(norm(h));
    });
  }

  /// The same on tape t, with every parameter watched (the tied table
  /// twice: its gradient sums the lookup's and the head's).
  template <named_expression Ids>
  auto operator()(grad::tape& t, const Ids& ids) {
    return checked(ids, [&](const auto& in) {
      auto h = embed_tokens(t, in);
      for (auto& layer : layers) h = layer(h);
      auto n = norm(t, h);
      using V = decltype(tied_logits(n, t.watch(embed_tokens.weight)));
      if (lm_head) return V((*lm_head)(t, n));
      return tied_logits(n, t.watch(embed_tokens.weight));
    });
  }

  /// The key/value caches of every layer for decoding, for ids whose dims
  /// other than Pos are `Batch...`.
  template <dimension... Batch>
  using cache_type = std::vector<typename block_type::attention_type::template cache_type<Batch...>>;

  /// Empty caches for up to `capacity` positions of ids whose other dims
  /// have the given extents: `m.make_cache(256, batch{1})`.
  template <dimension... Batch>
  cache_type<Batch...> make_cache(std::size_t capacity, const Batch&... batch) const {
    cache_type<Batch...> c;
    c.reserve(layers.size());
    for (const auto& layer : layers) c.push_back(layer.self_attn.make_cache(capacity, batch...));
    return c;
  }

  /// Decoding: the logits of ids whose positions follow the ones the
  /// caches hold (a prompt, then one token at a time), each position seeing
  /// the cached ones and those before it. Caches of another layer count
  /// throw `shape_error`.
  template <named_expression Ids, dimension... Cs>
  auto operator()(const Ids& ids,
                  std::vector<kv_cache<T, typename block_type::attention_type::key_posn, Cs...>>& cache) const {
    if (cache.size() != layers.size())
      throw shape_error("nn::transformer: " + std::to_string(cache.size()) + " key/value caches for " +
                        std::to_string(layers.size()) + " layers; make them with make_cache");
    return checked(ids, [&](const auto& in) {
      auto h = embed_tokens(in);
      for (std::size_t i = 0; i < layers.size(); ++i) h = layers[i](h, cache[i]);
      return logits(norm(h));
    });
  }

 private:
  // The compile-time checks of the ids, then f(ids) (a generic lambda,
  // instantiated only for ids that pass).
  template <class Ids, class F>
  static auto checked(const Ids& ids, F&& f) {
    using L = dims_of_t<Ids>;
    if constexpr (!std::is_integral_v<value_type_of_t<Ids>>) {
      dimsum::detail::report<transformer_ids_are_not_integers<value_type_of_t<Ids>, diagnostic_dims_t<L>>>();
      return invalid_expression{};
    } else if constexpr (!contains_v<L, Pos>) {
      dimsum::detail::report<transformer_ids_lack_the_position_dim<diagnostic_name_t<Pos>, diagnostic_dims_t<L>>>();
      return invalid_expression{};
    } else {
      return f(ids);
    }
  }

  // The logits (.., Vocab) of the normalised h (.., Model) on tensors.
  template <class H>
  auto logits(H&& h) const {
    if (lm_head) return (*lm_head)(std::forward<H>(h));
    return tied_logits(std::forward<H>(h), embed_tokens.weight.value);
  }

  // h (.., Model) against the embedding's table (Vocab, Model): the tied
  // head's logits (.., Vocab), tensors or vars of one tape.
  template <class H, class W>
  static auto tied_logits(H&& h, const W& table) {
    using R = replace_dim_t<dims_of_t<H>, Model, Vocab>;
    if constexpr (grad::detail::any_var_v<H, W>) {
      using V = grad::var_for_t<T, R>;
      return [&]<dimension... O>(dim_list<O...>*) { return V(einsum<O...>(std::forward<H>(h), table)); }(
          static_cast<R*>(nullptr));
    } else {
      return tensor_for_t<T, R>(dimsum::detail::make_einsum<R>(std::forward<H>(h), table));
    }
  }
};

}  // namespace dimsum::nn
