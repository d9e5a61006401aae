#pragma once
/// \file
/// `nn::scaled_dot_product_attention<QP, KP, D>(q, k, v, mask, options)`:
/// PyTorch's F.scaled_dot_product_attention with named dims, one call for
///
///     scores  = einsum(q, k) over D * scale      (scale: 1 / sqrt(extent of D) by default)
///     scores  = causal / sliding-window mask, then the attention mask
///     weights = dropout(softmax<KP>(scores))
///     out     = einsum(weights, v) over KP
///
/// q has the query positions QP and the contracted dim D, k has the key
/// positions KP and D, v has KP and one dim of its own (the value dim); their
/// other dims (batch, heads, ...) are matched by name, in any order, and the
/// output has q's dims in q's order with D replaced by v's value dim. QP and
/// KP are two dims (rename one for self-attention). The mask is a bool
/// tensor (true where attending is allowed, as PyTorch's boolean attn_mask)
/// or a tensor of the scores' value type added to the scores (PyTorch's
/// float attn_mask), over some of the scores' dims, broadcast by name.
/// `grouped_kv<H, HKV>` as fourth template argument is PyTorch's enable_gqa:
/// q has H heads, k and v have HKV, and query head h reads key/value head
/// h / (H / HKV) (`repeat_interleave`), without copying k or v.
///
/// On tensors it returns a tensor; with a `grad::var` among q, k and v (the
/// tensors among them are constants) it records on that var's tape and
/// returns a var. Without dropout both forms run the fused attention kernel
/// (the scores are never materialised; on vars one `grad::fused_attention`
/// node whose backward is fused too); with dropout the scores, softmax,
/// dropout and weighted sum are evaluated one by one.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include <dimsum/core/diagnostics.hpp>
#include <dimsum/grad/rules/attention.hpp>
#include <dimsum/grad/rules/dropout.hpp>
#include <dimsum/grad/rules/einsum.hpp>
#include <dimsum/grad/rules/elementwise.hpp>
#include <dimsum/grad/rules/mask.hpp>
#include <dimsum/grad/rules/regroup.hpp>
#include <dimsum/grad/rules/softmax.hpp>
#include <dimsum/grad/rules/window_mask.hpp>
#include <dimsum/kernels/attention.hpp>
#include <dimsum/nn/attention.hpp>
#include <dimsum/nn/detail/on_tape.hpp>
#include <dimsum/nn/dropout.hpp>
#include <dimsum/ops/einsum.hpp>
#include <dimsum/ops/mask.hpp>
#include <dimsum/ops/regroup.hpp>
#include <dimsum/ops/softmax.hpp>
#include <dimsum/ops/window_mask.hpp>
#include <dimsum/tensor/named.hpp>

namespace dimsum {

// --- compile-time errors of nn::scaled_dot_product_attention (docs/errors.md) ---
template <class Dim, class ValueDims, class QueryDims>
struct attention_value_needs_one_dim_of_its_own {
  static_assert(detail::always_false<Dim, ValueDims, QueryDims>,
                "dimsum: scaled_dot_product_attention: v must have the key positions, one dim of its own (the value "
                "dim, which replaces the contracted dim in the output) and otherwise only dims q has; the first "
                "argument lists v's dims that are neither (empty: v has no value dim)");
};
template <class MaskDims, class ScoreDims>
struct attention_mask_has_a_dim_the_scores_lack {
  static_assert(detail::always_false<MaskDims, ScoreDims>,
                "dimsum: scaled_dot_product_attention: the mask's dims (first) must be among the scores' dims "
                "(second: q's and k's dims without the contracted one)");
};
template <class MaskValue, class ScoreValue>
struct attention_mask_is_neither_bool_nor_of_the_scores_type {
  static_assert(detail::always_false<MaskValue, ScoreValue>,
                "dimsum: scaled_dot_product_attention: the mask is bool (true where attending is allowed) or of the "
                "scores' value type (added to the scores); convert it with cast<T>(mask) or compare it");
};
template <class QValue, class KValue, class VValue>
struct attention_operands_have_different_value_types {
  static_assert(detail::always_false<QValue, KValue, VValue>,
                "dimsum: scaled_dot_product_attention needs q, k and v of one value type (float or double)");
};

}  // namespace dimsum

namespace dimsum::nn {

/// The options of `scaled_dot_product_attention` (PyTorch's keyword
/// arguments). A default-constructed one is plain attention.
struct attention_options {
  /// Each query sees the keys at or before its own position
  /// (`is_causal=True`: key j <= query i + offset).
  bool is_causal = false;
  /// Sliding window: when nonzero, each query sees its own position and the
  /// `window - 1` keys before it (causal by construction).
  std::size_t window = 0;
  /// The position of query 0 among the keys for the causal or window mask:
  /// 0 aligns the first query with the first key (PyTorch's is_causal); after
  /// a key/value cache of n positions it is n.
  std::size_t offset = 0;
  /// Multiplies the scores; unset: 1 / sqrt(extent of the contracted dim).
  std::optional<double> scale = std::nullopt;
  /// Dropout probability on the attention weights (applied whenever it is
  /// nonzero, as in F.scaled_dot_product_attention: pass 0 in inference).
  double dropout_p = 0.0;
  /// The dropout mask's seed (the mask `nn::dropout(p, true, seed)` draws).
  std::uint64_t seed = 0;
};

/// Plain multi-head attention: k and v have q's head dim (the default).
struct ungrouped {};
/// Grouped key/value heads (PyTorch's `enable_gqa=True`): q has dim H, k and
/// v have HKV instead, and H's extent is a multiple of HKV's.
template <dimension H, dimension HKV>
struct grouped_kv {};

namespace detail {

/// The dim a grouped q's head dim H is split into beside HKV.
using kv_group = dim<"kv_group">;

template <class A, class B>
using cat_t = typename dimsum::detail::concat<A, B>::type;

template <class X>
concept attention_operand = named_expression<X> || grad::detail::var_like<X>;

/// einsum of a and b into the dims of list L (tensors or vars).
template <class L, class A, class B>
auto einsum_into(A&& a, B&& b) {
  return [&]<dimension... O>(dim_list<O...>*) {
    return einsum<O...>(std::forward<A>(a), std::forward<B>(b));
  }(static_cast<L*>(nullptr));
}

template <class G>
struct grouping {
  static constexpr bool grouped = false;
  template <class L>
  static constexpr bool q_has = true;
  template <class L>
  static constexpr bool k_has = true;
};
template <dimension H, dimension HKV>
struct grouping<grouped_kv<H, HKV>> {
  static constexpr bool grouped = true;
  using heads = H;
  using kv_heads = HKV;
  template <class L>
  static constexpr bool q_has = contains_v<L, H>;
  template <class L>
  static constexpr bool k_has = contains_v<L, HKV>;
};

/// q's dims as attention sees them: H replaced by (HKV, kv_group) when
/// grouped.
template <class L, class G>
struct grouped_dims {
  using type = L;
};
template <class L, dimension H, dimension HKV>
  requires(contains_v<L, H>)
struct grouped_dims<L, grouped_kv<H, HKV>> {
  using type = splice_t<L, index_of<L>(H::name.view()), 1, dim_list<HKV, kv_group>>;
};

/// The scores' lazy chain on tensors or vars: the scaled score einsum, the
/// causal or window mask, then the attention mask (bool: -inf where false;
/// otherwise added).
template <class LS, dimension QP, dimension KP, class Qx, class Kx, class M, class T>
auto attention_scores(const Qx& q, const Kx& k, T scale, std::size_t window, std::size_t offset, const M& mask) {
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  auto masked = window_mask<QP, KP>(einsum_into<LS>(q, k) * scale, window, ninf, offset);
  if constexpr (std::is_same_v<M, no_mask>)
    return masked;
  else if constexpr (bool_valued_v<M>)
    return masked_fill(std::move(masked), !mask, ninf);
  else
    return std::move(masked) + mask;
}

/// Whether mask M's dims (H split when grouped) are among the scores' LS.
template <class M, class G, class LS>
constexpr bool mask_fits_scores() {
  if constexpr (std::is_same_v<M, no_mask> || !named_expression<M>)
    return true;
  else
    return without_t<typename grouped_dims<dims_of_t<M>, G>::type, LS>::size == 0;
}

/// Whether mask M is bool or of the scores' value type T (or no mask).
template <class M, class T>
constexpr bool mask_type_fits() {
  if constexpr (std::is_same_v<M, no_mask> || !named_expression<M>)
    return true;
  else
    return bool_valued_v<M> || std::is_same_v<value_type_of_t<M>, T>;
}

/// Where H stands in q's dims (0 when ungrouped).
template <class L, class G>
constexpr std::size_t heads_position() {
  if constexpr (grouping<G>::grouped)
    return index_of<L>(grouping<G>::heads::name.view());
  else
    return 0;
}

/// x (q, or a mask) with H split into (HKV, kv_group), evaluated; x itself
/// when ungrouped or x lacks H.
template <class G, class X>
decltype(auto) split_heads(const X& x, std::size_t kv_heads) {
  if constexpr (grouping<G>::grouped && !std::is_same_v<X, no_mask>) {
    using L = dims_of_t<X>;
    using H = typename grouping<G>::heads;
    if constexpr (contains_v<L, H>) {
      const std::size_t h = x.template extent<H>();
      if (kv_heads == 0 || h % kv_heads != 0)
        throw shape_error("scaled_dot_product_attention: dim '" + std::string(H::name.view()) + "' of extent " +
                          std::to_string(h) + " is not a multiple of dim '" +
                          std::string(grouping<G>::kv_heads::name.view()) + "' of extent " + std::to_string(kv_heads));
      using S = dim_list<typename grouping<G>::kv_heads, kv_group>;
      if constexpr (grad::detail::var_like<X>)
        return split_dim<heads_position<L, G>(), S>(x, {kv_heads, h / kv_heads});
      else
        return dimsum::eval(split_dim<heads_position<L, G>(), S>(x, {kv_heads, h / kv_heads}));
    } else {
      return dimsum::eval(x);
    }
  } else if constexpr (std::is_same_v<X, no_mask> || grad::detail::var_like<X>) {
    return X(x);
  } else {
    return dimsum::eval(x);
  }
}

/// out with (HKV, kv_group) merged back into H (out itself when ungrouped).
template <class LQ0, class G, class X>
auto merge_heads(X&& out) {
  if constexpr (grouping<G>::grouped) {
    using Out = std::remove_cvref_t<X>;
    auto merged = merge_dims<heads_position<LQ0, G>(), 2, typename grouping<G>::heads>(std::forward<X>(out));
    if constexpr (grad::detail::var_like<Out>)
      return merged;
    else
      return dimsum::eval(std::move(merged));
  } else {
    return std::remove_cvref_t<X>(std::forward<X>(out));
  }
}

template <dimension QP, dimension KP, dimension D, class G, class LQ, class LS, class LO, class T, class Q, class K,
          class V, class M>
auto run_attention(const Q& q, const K& k, const V& v, const M& mask, const attention_options& o) {
  using LQ0 = dims_of_t<Q>;
  std::size_t kv_heads = 0;
  if constexpr (grouping<G>::grouped) kv_heads = k.template extent<typename grouping<G>::kv_heads>();
  // in float for bf16 operands: the kernels scale the float32 scores
  using A = accumulator_t<T>;
  const A scale = static_cast<A>(o.scale ? *o.scale : 1.0 / std::sqrt(double(q.template extent<D>())));
  const std::size_t nk = k.template extent<KP>();
  // Not causal: a window that hides no key (j <= i + nk for every key j).
  const bool causal = o.is_causal || o.window != 0;
  const std::size_t window = o.window ? o.window : kernels::unbounded_window;
  const std::size_t offset = causal ? o.offset : nk;
  if (!(o.dropout_p >= 0.0 && o.dropout_p < 1.0))
    throw error("scaled_dot_product_attention: dropout_p must be in [0, 1), got " + std::to_string(o.dropout_p));
  // The mask, evaluated (and split when grouped): the tape form's node keeps
  // its own copy for the backward pass.
  auto m = split_heads<G>(mask, kv_heads);
  if constexpr (grad::detail::any_var_v<Q, K, V>) {
    grad::tape& tp = tape_of_first_var("nn::scaled_dot_product_attention", q, k, v);
    auto as_var = [&tp](const auto& x) {
      using X = std::remove_cvref_t<decltype(x)>;
      if constexpr (grad::detail::var_like<X>)
        return x;
      else
        return tp.constant(x);
    };
    auto qv = split_heads<G>(as_var(q), kv_heads);
    auto kv = as_var(k);
    auto vv = as_var(v);
    if (o.dropout_p > 0.0) {
      auto w = softmax<KP>(attention_scores<LS, QP, KP>(qv, kv, scale, window, offset, m));
      // evaluated: an einsum of two vars is lazy, and both paths return a var
      return merge_heads<LQ0, G>(dimsum::eval(einsum_into<LO>(dimsum::dropout(w, o.dropout_p, o.seed), vv)));
    }
    // Everything the node's f reads is its own: the values, the mask's copy.
    auto f = [scale, window, offset, m = std::move(m)](const auto& qh, const auto& kh, const auto& vh) {
      return einsum_into<LO>(softmax<KP>(attention_scores<LS, QP, KP>(qh, kh, scale, window, offset, m)), vh);
    };
    return merge_heads<LQ0, G>(grad::fused_attention(qv, kv, vv, std::move(f)));
  } else {
    const auto& qt = split_heads<G>(q, kv_heads);
    const auto kt = dimsum::eval(k);
    const auto vt = dimsum::eval(v);
    tensor_for_t<T, LO> out;
    if (o.dropout_p > 0.0) {
      nn::dropout drop(o.dropout_p, true, o.seed);
      auto w = drop(softmax<KP>(attention_scores<LS, QP, KP>(qt, kt, scale, window, offset, m)));
      out = einsum_into<LO>(w, vt);
    } else {
      out = einsum_into<LO>(softmax<KP>(attention_scores<LS, QP, KP>(qt, kt, scale, window, offset, m)), vt);
    }
    return merge_heads<LQ0, G>(std::move(out));
  }
}

}  // namespace detail

/// See the file comment. Compile errors (docs/errors.md): q lacks QP or D, k
/// lacks KP or D, v lacks KP (`attention_operand_lacks_a_dim`); QP and KP
/// share a name; k has a dim q lacks; v has no value dim or more than one;
/// the mask has a dim the scores lack or is neither bool nor of the scores'
/// value type; q, k and v differ in value type. Run time (`shape_error`):
/// extents that disagree, H not a multiple of HKV.
///
///     auto out = nn::scaled_dot_product_attention<q_posn, k_posn, d_head>(q, k, v, no_mask{}, {.is_causal = true});
template <dimension QP, dimension KP, dimension D, class G = ungrouped, detail::attention_operand Q,
          detail::attention_operand K, detail::attention_operand V, class M = no_mask>
auto scaled_dot_product_attention(const Q& q, const K& k, const V& v, const M& mask = {},
                                  const attention_options& o = {}) {
  using dimsum::detail::report;
  using Gr = detail::grouping<G>;
  using T = value_type_of_t<Q>;
  using LQ0 = dims_of_t<Q>;
  using LK = dims_of_t<K>;
  using LV = dims_of_t<V>;
  if constexpr (!std::is_same_v<T, value_type_of_t<K>> || !std::is_same_v<T, value_type_of_t<V>>) {
    report<attention_operands_have_different_value_types<T, value_type_of_t<K>, value_type_of_t<V>>>();
    return invalid_expression{};
  } else if constexpr (!contains_v<LQ0, QP> || !contains_v<LQ0, D>) {
    report<attention_operand_lacks_a_dim<chars<'q'>, diagnostic_name_t<std::conditional_t<contains_v<LQ0, QP>, D, QP>>,
                                         diagnostic_dims_t<LQ0>>>();
    return invalid_expression{};
  } else if constexpr (!contains_v<LK, KP> || !contains_v<LK, D>) {
    report<attention_operand_lacks_a_dim<chars<'k'>, diagnostic_name_t<std::conditional_t<contains_v<LK, KP>, D, KP>>,
                                         diagnostic_dims_t<LK>>>();
    return invalid_expression{};
  } else if constexpr (!contains_v<LV, KP>) {
    report<attention_operand_lacks_a_dim<chars<'v'>, diagnostic_name_t<KP>, diagnostic_dims_t<LV>>>();
    return invalid_expression{};
  } else if constexpr (QP::name.view() == KP::name.view()) {
    report<attention_query_and_key_positions_share_a_name<diagnostic_name_t<QP>>>();
    return invalid_expression{};
  } else if constexpr (!Gr::template q_has<LQ0>) {
    report<attention_operand_lacks_a_dim<chars<'q'>, diagnostic_name_t<typename Gr::heads>, diagnostic_dims_t<LQ0>>>();
    return invalid_expression{};
  } else if constexpr (!Gr::template k_has<LK>) {
    report<attention_operand_lacks_a_dim<chars<'k'>, diagnostic_name_t<typename Gr::kv_heads>, diagnostic_dims_t<LK>>>();
    return invalid_expression{};
  } else {
    using LQ = typename detail::grouped_dims<LQ0, G>::type;  // q's dims with H split
    using Batch = without_t<LQ, dim_list<QP, D>>;            // q's dims shared with k and v
    using KExtra = without_t<LK, detail::cat_t<Batch, dim_list<KP, D>>>;
    using VOwn = without_t<LV, detail::cat_t<Batch, dim_list<KP>>>;
    if constexpr (KExtra::size != 0) {
      report<attention_operand_lacks_a_dim<chars<'q'>, diagnostic_dims_t<KExtra>, diagnostic_dims_t<LQ0>>>();
      return invalid_expression{};
    } else if constexpr (VOwn::size != 1) {
      report<attention_value_needs_one_dim_of_its_own<diagnostic_dims_t<VOwn>, diagnostic_dims_t<LV>,
                                                      diagnostic_dims_t<LQ0>>>();
      return invalid_expression{};
    } else {
      using LS = detail::cat_t<Batch, dim_list<QP, KP>>;  // the query dim last: the kernel's rows
      using DV = dimsum::detail::at_t<VOwn, 0>;
      using LO = replace_dim_t<LQ, D, DV>;
      if constexpr (!detail::mask_fits_scores<M, G, LS>()) {
        report<attention_mask_has_a_dim_the_scores_lack<diagnostic_dims_t<dims_of_t<M>>, diagnostic_dims_t<LS>>>();
        return invalid_expression{};
      } else if constexpr (!detail::mask_type_fits<M, T>()) {
        report<attention_mask_is_neither_bool_nor_of_the_scores_type<value_type_of_t<M>, T>>();
        return invalid_expression{};
      } else {
        return detail::run_attention<QP, KP, D, G, LQ, LS, LO, T>(q, k, v, mask, o);
      }
    }
  }
}

}  // namespace dimsum::nn
