#pragma once
/// \file
/// Scaled dot-product attention and seed 003's multi-head attention, with
/// named dims. Query positions QP and key positions KP are different dims
/// (rename one for self-attention); a mask is a bool tensor whose dims are
/// a subset of the scores' dims (a padding mask (batch, k_posn) broadcasts
/// over heads and queries by name) and is true where attending is allowed,
/// as in the seed (`masked_fill(mask == 0, -1e9)`).

#include <algorithm>
#include <cmath>
#include <string>
#include <cstddef>
#include <type_traits>

#include <boost/hana/define_struct.hpp>

#include <dimsum/nn/dropout.hpp>
#include <dimsum/nn/linear.hpp>
#include <dimsum/ops/mask.hpp>
#include <dimsum/ops/regroup.hpp>
#include <dimsum/ops/softmax.hpp>
#include <dimsum/tensor/concepts.hpp>
#include <dimsum/tensor/named.hpp>

namespace dimsum::nn {

/// What attention returns: the output, the (masked, pre-softmax) scores as
/// seed 003 returns them, and the softmax weights.
template <class Output, class Scores>
struct attention_result {
  Output output;
  Scores scores;
  Scores weights;
};

/// No mask (the default).
struct no_mask {};

namespace detail {
template <class LQ, class LK, dimension D>
using scores_dims_t = union_t<without_t<LQ, dim_list<D>>, without_t<LK, dim_list<D>>>;
template <class LS, class LV, dimension KP>
using output_dims_t = union_t<without_t<LS, dim_list<KP>>, without_t<LV, dim_list<KP>>>;
}  // namespace detail

/// seed 003's dot_product_attention: scores = q·k / sqrt(extent of D) over
/// dim D, masked with `masked_value` where the mask is false, softmax over
/// KP, then the weighted sum of v over KP. q has QP and D, k has KP and D, v
/// has KP. Returns output, scores and weights.
template <dimension QP, dimension KP, dimension D, named_expression Q, named_expression K, named_expression V,
          class M = no_mask>
auto dot_product_attention(const Q& q, const K& k, const V& v, const M& mask = {}, double masked_value = -1e9,
                           dropout* drop = nullptr) {
  using T = value_type_of_t<Q>;
  using LS = detail::scores_dims_t<dims_of_t<Q>, dims_of_t<K>, D>;
  using LO = detail::output_dims_t<LS, dims_of_t<V>, KP>;
  using LQ = dims_of_t<Q>;
  using LK = dims_of_t<K>;
  using LV = dims_of_t<V>;
  using dimsum::detail::report;
  if constexpr (!contains_v<LQ, QP> || !contains_v<LQ, D>) {
    report<attention_operand_lacks_a_dim<chars<'q'>, diagnostic_name_t<std::conditional_t<contains_v<LQ, QP>, D, QP>>,
                                         diagnostic_dims_t<LQ>>>();
    return invalid_expression{};
  } else if constexpr (!contains_v<LK, KP> || !contains_v<LK, D>) {
    report<attention_operand_lacks_a_dim<chars<'k'>, diagnostic_name_t<std::conditional_t<contains_v<LK, KP>, D, KP>>,
                                         diagnostic_dims_t<LK>>>();
    return invalid_expression{};
  } else if constexpr (!contains_v<LV, KP>) {
    report<attention_operand_lacks_a_dim<chars<'v'>, diagnostic_name_t<KP>, diagnostic_dims_t<LV>>>();
    return invalid_expression{};
  } else if constexpr (QP::name.view() == KP::name.view()) {
    dimsum::detail::report<attention_query_and_key_positions_share_a_name<diagnostic_name_t<QP>>>();
    return invalid_expression{};
  } else {
    const T scale = static_cast<T>(std::sqrt(double(extent<D>(q))));
    tensor_for_t<T, LS> scores = dimsum::detail::make_einsum<LS>(q, k) / scale;
    if constexpr (!std::is_same_v<M, no_mask>) scores = masked_fill(scores, !mask, static_cast<T>(masked_value));
    tensor_for_t<T, LS> weights = softmax<KP>(scores);
    if (drop) weights = (*drop)(weights);
    tensor_for_t<T, LO> output = dimsum::detail::make_einsum<LO>(weights, v);
    return attention_result<tensor_for_t<T, LO>, tensor_for_t<T, LS>>{std::move(output), std::move(scores),
                                                                      std::move(weights)};
  }
}

/// seed 003's MultiHeadAttention(num_heads, emb_dim, dim_k, dropout): q, k,
/// v Linear layers Emb -> Features (= NHeads x DK), split into heads, scaled
/// dot-product attention per head, heads concatenated, output Linear back to
/// Emb. Query and key/value lengths may differ (cross-attention). The four
/// layers are reflected members, so its state dict has seed 003's keys
/// ("q_linear.weight", ..., "out.bias").
template <class T, dimension Emb, dimension NHeads, dimension DK, dimension Features = dim<"nheads_dim_k">>
struct multi_head_attention {
  BOOST_HANA_DEFINE_STRUCT(multi_head_attention, (linear<T, Emb, Features>, q_linear),
                           (linear<T, Emb, Features>, k_linear), (linear<T, Emb, Features>, v_linear),
                           (linear<T, Features, Emb>, out));
  dropout drop;
  std::size_t num_heads = 0, dim_k = 0;

  /// dim_k = 0 means emb_dim / num_heads, as in the seed. Weights start at
  /// zero: call reset_parameters or load them. Dropout (probability
  /// dropout_p) applies to the attention weights only when `drop.training`
  /// is set; the default is inference, where it is the identity.
  multi_head_attention(NHeads heads, Emb emb, DK dk = DK{0}, double dropout_p = 0.1)
      : drop(dropout_p), num_heads(heads.value), dim_k(dk.value ? dk.value : emb.value / std::max<std::size_t>(heads.value, 1)) {
    if (num_heads == 0 || dim_k == 0)
      throw shape_error("multi_head_attention: dim '" + std::string(NHeads::name.view()) + "' has extent " +
                        std::to_string(num_heads) + " and dim '" + std::string(DK::name.view()) + "' has extent " +
                        std::to_string(dim_k) + "; both must be at least 1");
    if (num_heads > static_cast<std::size_t>(-1) / dim_k)
      throw shape_error("multi_head_attention: dim '" + std::string(NHeads::name.view()) + "' of extent " +
                        std::to_string(num_heads) + " times dim '" + std::string(DK::name.view()) + "' of extent " +
                        std::to_string(dim_k) + " overflows std::size_t (dim '" +
                        std::string(Features::name.view()) + "' is their product)");
    const Features f{num_heads * dim_k};
    q_linear = linear<T, Emb, Features>(emb, f);
    k_linear = linear<T, Emb, Features>(emb, f);
    v_linear = linear<T, Emb, Features>(emb, f);
    out = linear<T, Features, Emb>(f, emb);
  }

  void reset_parameters(std::uint64_t seed) {
    q_linear.reset_parameters(seed);
    k_linear.reset_parameters(seed + 1);
    v_linear.reset_parameters(seed + 2);
    out.reset_parameters(seed + 3);
  }

  /// Every intermediate of one forward pass, in the seed's dim orders.
  template <dimension Batch, dimension QSeq, dimension KSeq>
  struct trace {
    tensor<T, Batch, QSeq, Features> q_lin;
    tensor<T, Batch, KSeq, Features> k_lin, v_lin;
    tensor<T, Batch, NHeads, QSeq, DK> q_heads;
    tensor<T, Batch, NHeads, KSeq, DK> k_heads, v_heads;
    tensor<T, Batch, NHeads, QSeq, DK> attn;
    tensor<T, Batch, QSeq, Features> concat;
  };

  /// Attention of q (Batch, QSeq, Emb) over k and v (Batch, KSeq, Emb), with
  /// an optional bool mask (true = attend) whose dims are among Batch, QSeq,
  /// KSeq. Returns output (Batch, QSeq, Emb) and scores and weights (Batch,
  /// NHeads, QSeq, KSeq), in those orders whatever the inputs' orders.
  ///
  /// Dims are found by name, in any order: q and k each have Emb and two
  /// more dims; the one they share is the batch, q's other is QSeq and k's
  /// other KSeq (so QSeq and KSeq must differ: rename one for
  /// self-attention); v has Batch, KSeq and Emb. q, k and v may be any named
  /// expressions (tensors, views, renames); pass `&t` for a
  /// `trace<Batch, QSeq, KSeq>` to keep the intermediates (a null pointer
  /// keeps none).
  template <named_expression Q, named_expression K, named_expression V, class M = no_mask,
            class Trace = std::nullptr_t>
  auto operator()(const Q& q, const K& k, const V& v, const M& mask = {}, Trace tr = nullptr) {
    using LQ = dims_of_t<Q>;
    using LK = dims_of_t<K>;
    using LV = dims_of_t<V>;
    using dimsum::detail::report;
    // Every dim by name, in any order: Emb is the module's; of the other
    // two dims of q and of k, the one they share is the batch, the other
    // is q's (k's) positions.
    using QRest = without_t<LQ, dim_list<Emb>>;
    using KRest = without_t<LK, dim_list<Emb>>;
    using Shared = without_t<QRest, without_t<QRest, KRest>>;
    using required = dims<chars<'b', 'a', 't', 'c', 'h'>, chars<'p', 'o', 's', 'i', 't', 'i', 'o', 'n', 's'>,
                          diagnostic_name_t<Emb>>;
    if constexpr (!contains_v<LQ, Emb>) {
      report<attention_operand_lacks_a_dim<chars<'q'>, diagnostic_name_t<Emb>, diagnostic_dims_t<LQ>>>();
      return invalid_expression{};
    } else if constexpr (!contains_v<LK, Emb>) {
      report<attention_operand_lacks_a_dim<chars<'k'>, diagnostic_name_t<Emb>, diagnostic_dims_t<LK>>>();
      return invalid_expression{};
    } else if constexpr (LQ::size != 3) {
      report<tensor_dims_are_not_the_required_dims<required, diagnostic_dims_t<LQ>>>();
      return invalid_expression{};
    } else if constexpr (LK::size != 3) {
      report<tensor_dims_are_not_the_required_dims<required, diagnostic_dims_t<LK>>>();
      return invalid_expression{};
    } else if constexpr (Shared::size == 0) {
      // k must share q's batch dim (one of q's other two).
      report<attention_operand_lacks_a_dim<chars<'k'>, diagnostic_dims_t<QRest>, diagnostic_dims_t<LK>>>();
      return invalid_expression{};
    } else if constexpr (Shared::size == 2) {
      // q and k share both: one of them is the positions, which need two names.
      report<attention_query_and_key_positions_share_a_name<diagnostic_dims_t<Shared>>>();
      return invalid_expression{};
    } else {
      using Batch = dimsum::detail::at_t<Shared, 0>;
      using QSeq = dimsum::detail::at_t<without_t<QRest, Shared>, 0>;
      using KSeq = dimsum::detail::at_t<without_t<KRest, Shared>, 0>;
      if constexpr (!same_name_set_v<LV, dim_list<Batch, KSeq, Emb>>) {
        report<tensor_dims_are_not_the_required_dims<
            dims<diagnostic_name_t<Batch>, diagnostic_name_t<KSeq>, diagnostic_name_t<Emb>>, diagnostic_dims_t<LV>>>();
        return invalid_expression{};
      } else {
        trace<Batch, QSeq, KSeq> local;
        if constexpr (!std::is_null_pointer_v<Trace>) {
          if (tr) return run<Batch, QSeq, KSeq>(q, k, v, mask, *tr);
        }
        return run<Batch, QSeq, KSeq>(q, k, v, mask, local);
      }
    }
  }

 private:
  template <dimension Batch, dimension QSeq, dimension KSeq, class Q, class K, class V, class M>
  auto run(const Q& q, const K& k, const V& v, const M& mask, trace<Batch, QSeq, KSeq>& t) {
    t.q_lin = q_linear(q);
    t.k_lin = k_linear(k);
    t.v_lin = v_linear(v);
    const std::array<std::size_t, 2> heads{num_heads, dim_k};
    // view(batch, -1, num_heads, dim_k).transpose(1, 2), by name.
    t.q_heads = split_dim<2, dim_list<NHeads, DK>>(t.q_lin, heads);
    t.k_heads = split_dim<2, dim_list<NHeads, DK>>(t.k_lin, heads);
    t.v_heads = split_dim<2, dim_list<NHeads, DK>>(t.v_lin, heads);
    auto r = dot_product_attention<QSeq, KSeq, DK>(t.q_heads, t.k_heads, t.v_heads, mask, -1e9, &drop);
    t.attn = r.output;
    // attn.transpose(1, 2).contiguous().view(batch, -1, num_heads * dim_k)
    tensor<T, Batch, QSeq, NHeads, DK> by_position = t.attn;
    t.concat = merge_expr<2, 2, Features, tensor<T, Batch, QSeq, NHeads, DK>>(std::move(by_position));
    return attention_result<tensor<T, Batch, QSeq, Emb>, tensor<T, Batch, NHeads, QSeq, KSeq>>{
        out(t.concat), std::move(r.scores), std::move(r.weights)};
  }
};

}  // namespace dimsum::nn
