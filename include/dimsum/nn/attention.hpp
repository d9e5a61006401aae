#pragma once
/// \file
/// Scaled dot-product attention and seed 003's multi-head attention, with
/// named dims. Query positions QP and key positions KP are different dims
/// (rename one for self-attention); a mask is a bool tensor whose dims are
/// a subset of the scores' dims (a padding mask (batch, k_posn) broadcasts
/// over heads and queries by name) and is true where attending is allowed,
/// as in the seed (`masked_fill(mask == 0, -1e9)`). `multi_head_attention`
/// called on `grad::var`s records on their tape (tests/unit/nn_tape.cpp).

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <cstddef>
#include <type_traits>
#include <utility>

#include <boost/hana/define_struct.hpp>

#include <dimsum/grad/rules/attention.hpp>
#include <dimsum/grad/rules/dropout.hpp>
#include <dimsum/grad/rules/mask.hpp>
#include <dimsum/grad/rules/regroup.hpp>
#include <dimsum/grad/rules/softmax.hpp>
#include <dimsum/nn/detail/on_tape.hpp>
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
/// What attention returns after a compile-time mistake (already reported):
/// each member is an `invalid_expression`, so reading `.output` adds no
/// second error.
using invalid_attention_result = attention_result<invalid_expression, invalid_expression>;

/// No mask (the default).
struct no_mask {};

namespace detail {
template <class LQ, class LK, dimension D>
using scores_dims_t = union_t<without_t<LQ, dim_list<D>>, without_t<LK, dim_list<D>>>;
template <class LS, class LV, dimension KP>
using output_dims_t = union_t<without_t<LS, dim_list<KP>>, without_t<LV, dim_list<KP>>>;

/// An input of multi_head_attention: a named expression, or a var.
template <class X>
concept attention_input = named_expression<X> || grad::detail::var_like<X>;

/// Whether M is an attention mask of bool values (or no mask). A mask of
/// numbers is refused at compile time rather than read as `mask != 0`: a
/// float mask in PyTorch is usually additive (0 where attending is allowed,
/// -inf where not), which that reading would silently invert.
template <class M>
constexpr bool mask_is_bool() {
  if constexpr (std::is_same_v<M, no_mask> || !named_expression<M>)
    return true;  // no mask; a non-expression is reported by masked_fill
  else
    return bool_valued_v<M>;
}

/// The tape of the first var among xs (a var on no tape: `grad::tape_error`).
template <class X, class... Xs>
grad::tape& tape_of_first_var(std::string_view module, const X& x, const Xs&... xs) {
  if constexpr (grad::detail::var_like<X>)
    return tape_of_input(x, module);
  else
    return tape_of_first_var(module, xs...);
}
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
    return invalid_attention_result{};
  } else if constexpr (!contains_v<LK, KP> || !contains_v<LK, D>) {
    report<attention_operand_lacks_a_dim<chars<'k'>, diagnostic_name_t<std::conditional_t<contains_v<LK, KP>, D, KP>>,
                                         diagnostic_dims_t<LK>>>();
    return invalid_attention_result{};
  } else if constexpr (!contains_v<LV, KP>) {
    report<attention_operand_lacks_a_dim<chars<'v'>, diagnostic_name_t<KP>, diagnostic_dims_t<LV>>>();
    return invalid_attention_result{};
  } else if constexpr (QP::name.view() == KP::name.view()) {
    dimsum::detail::report<attention_query_and_key_positions_share_a_name<diagnostic_name_t<QP>>>();
    return invalid_attention_result{};
  } else if constexpr (!detail::mask_is_bool<M>()) {
    report<masked_fill_mask_is_not_boolean<value_type_of_t<M>>>();
    return invalid_attention_result{};
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
      : q_linear(emb, features(heads, emb, dk)),
        k_linear(emb, features(heads, emb, dk)),
        v_linear(emb, features(heads, emb, dk)),
        out(features(heads, emb, dk), emb),
        drop(dropout_p),
        num_heads(heads.value),
        dim_k(head_width(heads, emb, dk)) {}

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
  /// Called with a `grad::var` among q, k and v (tensors among them are
  /// constants), it records on that var's tape with the four layers'
  /// parameters watched and returns the output alone, a var (Batch, QSeq,
  /// Emb): backward accumulates every weight's and bias's gradient (the
  /// seed's `mha(q, k, v, mask)` in a training loop). Its attention is one
  /// `grad::fused_attention` node (neither pass materialises the scores,
  /// hence no scores or weights returned), except when the dropout is
  /// active (`drop.training` and p > 0): then the scores, softmax, dropout
  /// (the mask the tensor form would draw, the same in both passes) and
  /// weighted sum are recorded one by one. A trace receives the values.
  ///
  /// Dims are found by name, in any order: q and k each have Emb and two
  /// more dims; the one they share is the batch, q's other is QSeq and k's
  /// other KSeq (so QSeq and KSeq must differ: rename one for
  /// self-attention); v has Batch, KSeq and Emb. q, k and v may be any named
  /// expressions (tensors, views, renames); pass `&t` for a
  /// `trace<Batch, QSeq, KSeq>` to keep the intermediates (a null pointer
  /// keeps none).
  template <detail::attention_input Q, detail::attention_input K, detail::attention_input V, class M = no_mask,
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
      return invalid_result<Q, K, V>();
    } else if constexpr (!contains_v<LK, Emb>) {
      report<attention_operand_lacks_a_dim<chars<'k'>, diagnostic_name_t<Emb>, diagnostic_dims_t<LK>>>();
      return invalid_result<Q, K, V>();
    } else if constexpr (LQ::size != 3) {
      report<tensor_dims_are_not_the_required_dims<required, diagnostic_dims_t<LQ>>>();
      return invalid_result<Q, K, V>();
    } else if constexpr (LK::size != 3) {
      report<tensor_dims_are_not_the_required_dims<required, diagnostic_dims_t<LK>>>();
      return invalid_result<Q, K, V>();
    } else if constexpr (Shared::size == 0) {
      // k must share q's batch dim (one of q's other two).
      report<attention_operand_lacks_a_dim<chars<'k'>, diagnostic_dims_t<QRest>, diagnostic_dims_t<LK>>>();
      return invalid_result<Q, K, V>();
    } else if constexpr (Shared::size == 2) {
      // q and k share both: one of them is the positions, which need two names.
      report<attention_query_and_key_positions_share_a_name<diagnostic_dims_t<Shared>>>();
      return invalid_result<Q, K, V>();
    } else {
      using Batch = dimsum::detail::at_t<Shared, 0>;
      using QSeq = dimsum::detail::at_t<without_t<QRest, Shared>, 0>;
      using KSeq = dimsum::detail::at_t<without_t<KRest, Shared>, 0>;
      if constexpr (!same_name_set_v<LV, dim_list<Batch, KSeq, Emb>>) {
        report<tensor_dims_are_not_the_required_dims<
            dims<diagnostic_name_t<Batch>, diagnostic_name_t<KSeq>, diagnostic_name_t<Emb>>, diagnostic_dims_t<LV>>>();
        return invalid_result<Q, K, V>();
      } else if constexpr (!detail::mask_is_bool<M>()) {
        report<masked_fill_mask_is_not_boolean<value_type_of_t<M>>>();
        return invalid_result<Q, K, V>();
      } else if constexpr (grad::detail::any_var_v<Q, K, V>) {
        trace<Batch, QSeq, KSeq>* keep = nullptr;
        if constexpr (!std::is_null_pointer_v<Trace>) keep = tr;
        return run_on_tape<Batch, QSeq, KSeq>(detail::tape_of_first_var("nn::multi_head_attention", q, k, v), q, k,
                                              v, mask, keep);
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
  // What a call that reported a mistake returns: the tensor form returns an
  // attention_result, whose members the caller reads; the tape form a var.
  template <class Q, class K, class V>
  static auto invalid_result() {
    if constexpr (grad::detail::any_var_v<Q, K, V>)
      return invalid_expression{};
    else
      return invalid_attention_result{};
  }

  // dim_k, or emb / heads when it is 0 (the seed's default).
  static std::size_t head_width(NHeads heads, Emb emb, DK dk) {
    return dk.value ? dk.value : emb.value / std::max<std::size_t>(heads.value, 1);
  }
  // Features{heads * dim_k}, checked. The layers are built from it in the
  // member initialisers: assigning built layers in the constructor's body
  // made g++ 12 warn that a temporary's optional bias may be uninitialised.
  static Features features(NHeads heads, Emb emb, DK dk) {
    const std::size_t h = heads.value, d = head_width(heads, emb, dk);
    if (h == 0 || d == 0)
      throw shape_error("multi_head_attention: dim '" + std::string(NHeads::name.view()) + "' has extent " +
                        std::to_string(h) + " and dim '" + std::string(DK::name.view()) + "' has extent " +
                        std::to_string(d) + "; both must be at least 1");
    if (h > static_cast<std::size_t>(-1) / d)
      throw shape_error("multi_head_attention: dim '" + std::string(NHeads::name.view()) + "' of extent " +
                        std::to_string(h) + " times dim '" + std::string(DK::name.view()) + "' of extent " +
                        std::to_string(d) + " overflows std::size_t (dim '" + std::string(Features::name.view()) +
                        "' is their product)");
    return Features{h * d};
  }

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

  // x (a var, Features among its dims) with Features split into (NHeads, DK).
  template <class X>
  auto split_heads(const X& x) const {
    constexpr std::size_t pos = dimsum::detail::find_name(X::dims::names, Features::name.view());
    return split_dim<pos, dim_list<NHeads, DK>>(x, std::array<std::size_t, 2>{num_heads, dim_k});
  }

  // Whether the scores of the tape form can be masked with M: its mistakes
  // are reported once here (by masked_fill, as the tensor form reports
  // them), not in each of the two paths below.
  template <dimension Batch, dimension QSeq, dimension KSeq, class M>
  static constexpr bool mask_fits() {
    if constexpr (std::is_same_v<M, no_mask>)
      return true;
    else
      return !is_invalid_v<decltype(masked_fill(std::declval<const tensor<T, Batch, NHeads, QSeq, KSeq>&>(),
                                                !std::declval<const M&>(), T()))>;
  }

  // The tape form of run: the same steps on vars of tape tp.
  template <dimension Batch, dimension QSeq, dimension KSeq, class Q, class K, class V, class M>
  auto run_on_tape(grad::tape& tp, const Q& q, const K& k, const V& v, const M& mask, trace<Batch, QSeq, KSeq>* t) {
    if constexpr (!mask_fits<Batch, QSeq, KSeq, M>()) {
      return invalid_expression{};
    } else {
      return run_fitting_mask_on_tape(tp, q, k, v, mask, t);
    }
  }

  template <dimension Batch, dimension QSeq, dimension KSeq, class Q, class K, class V, class M>
  auto run_fitting_mask_on_tape(grad::tape& tp, const Q& q, const K& k, const V& v, const M& mask,
                                trace<Batch, QSeq, KSeq>* t) {
    auto q_lin = q_linear(tp, q);
    auto k_lin = k_linear(tp, k);
    auto v_lin = v_linear(tp, v);
    auto q_heads = split_heads(q_lin);
    auto k_heads = split_heads(k_lin);
    auto v_heads = split_heads(v_lin);
    const T scale = static_cast<T>(std::sqrt(double(dim_k)));
    const T masked = static_cast<T>(-1e9);
    // attn in the order of the concat, (batch, q, heads, dim_k): the
    // seed's transpose(1, 2) before its view.
    grad::var<T, Batch, QSeq, NHeads, DK> attn;
    if (drop.training && drop.p > 0.0) {
      auto scores = einsum<Batch, NHeads, QSeq, KSeq>(q_heads, k_heads) / scale;
      auto weights = [&] {
        if constexpr (std::is_same_v<M, no_mask>)
          return softmax<KSeq>(scores);
        else
          return softmax<KSeq>(masked_fill(scores, !mask, masked));
      }();
      attn = einsum<Batch, QSeq, NHeads, DK>(dimsum::dropout(weights, drop.p, drop.seed++), v_heads);
    } else if constexpr (std::is_same_v<M, no_mask>) {
      attn = grad::fused_attention(q_heads, k_heads, v_heads, [scale](const auto& qh, const auto& kh, const auto& vh) {
        return einsum<Batch, QSeq, NHeads, DK>(softmax<KSeq>(einsum<Batch, NHeads, QSeq, KSeq>(qh, kh) / scale), vh);
      });
    } else {
      // One expression (it must not refer to locals of the lambda); the
      // mask is the lambda's own copy, which lives as long as the node.
      attn = grad::fused_attention(
          q_heads, k_heads, v_heads,
          [scale, masked, m = dimsum::eval(mask)](const auto& qh, const auto& kh, const auto& vh) {
            return einsum<Batch, QSeq, NHeads, DK>(
                softmax<KSeq>(masked_fill(einsum<Batch, NHeads, QSeq, KSeq>(qh, kh) / scale, !m, masked)), vh);
          });
    }
    auto concat = merge_dims<2, 2, Features>(attn);
    if (t) {
      t->q_lin = q_lin.value();
      t->k_lin = k_lin.value();
      t->v_lin = v_lin.value();
      t->q_heads = q_heads.value();
      t->k_heads = k_heads.value();
      t->v_heads = v_heads.value();
      t->attn = attn.value();
      t->concat = concat.value();
    }
    return out(tp, concat);
  }
};

}  // namespace dimsum::nn
