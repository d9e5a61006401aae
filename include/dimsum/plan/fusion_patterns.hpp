#pragma once
/// \file
/// The fusion patterns: which sub-expressions run as one fused kernel. One
/// documented place for every such rule; each pattern reads the nodes'
/// `fusion_traits` (plan/fusion_traits.hpp), never their classes, and says
/// which kernel runs and with which labels. The evaluation (gathering the
/// operands' strides into the kernel's arguments) lives beside the node
/// that triggers it (ops/detail/fused_attention.hpp for the one below).
///
/// ## Attention (kernels/attention.hpp)
///
/// Read from the outside in:
///
///     einsum( softmax<K>( chain( einsum(Q, Kt) ) ), V )      (either operand order)
///
/// where `chain` is any sequence (possibly empty) of
///   - a scale:  `x * s`, `s * x`, `x / s` with a scalar s;
///   - a factor: `x * t`, `t * x` with t any expression over some of the
///     scores' batch dims (not the query or key dim; a per-head
///     temperature), materialised (one value per batch index);
///   - `tanh(x)` (soft-capping, `c * tanh(x / c)`, is three stages);
///   - `map(with_derivative(f, df), x)`: a user's function with its
///     derivative, called per score by the kernel;
///   - `causal_mask<Qd, K>(x, value)`, `window_mask<Qd, K>(x, w, value,
///     offset)` (one kernel stage: a causal mask is the unbounded window);
///   - `masked_fill(x, mask, value)`, `where(cond, x, value)`,
///     `where(cond, value, x)` with any boolean mask or condition over some
///     of the scores' dims (broadcast by name);
///   - at most one bias, `x + b` or `b + x`, with b any expression over some
///     of the scores' dims, evaluated row by row inside the kernel, never
///     materialised; `slope * relative_positions<Q, K>` (ALiBi,
///     `affine_bias`) is computed by the kernel a vector at a time; a
///     gather `lookup<bucket>(table, ids)` (T5) is a bias like any other,
///     whose table a var may learn (its scatter gives the backward dB).
/// The softmax may have sink logits (`softmax<K>(chain, sinks)`, sinks over
/// batch dims): each row's denominator starts at exp(sink).
/// The score einsum must contract exactly one dim (d) and keep the key dim
/// K. Its other dims are batch dims in any order (at most
/// `kernels::max_group_rank`), read with stride 0 by an operand that lacks
/// them: GQA's `group` in Q only shares K and V across the group, never
/// copied. One query-side dim is the kernel's row dim: the one a mask
/// names, else the last query-side dim of the scores. The outer einsum
/// must sum exactly K and keep every other dim of the pattern, and V must
/// have K, not the row dim, and exactly one dim of its own (the value
/// dim). The value type is float or double throughout, at most
/// `kernels::max_score_stages` stages. Masks whose masked value is -inf
/// (after later scales) let the kernel skip the key tiles they hide.
/// Anything else, or any part the user evaluated into a tensor, takes the
/// unfused path (same results).
/// `uses_fused_attention_v<E>` says which.

#include <cstddef>
#include <string_view>
#include <tuple>
#include <type_traits>

#include <dimsum/core/diagnostics.hpp>
#include <dimsum/core/dim_list.hpp>
#include <dimsum/core/bf16.hpp>
#include <dimsum/kernels/attention.hpp>
#include <dimsum/kernels/contraction_args.hpp>
#include <dimsum/plan/contraction_plan.hpp>
#include <dimsum/plan/fusion_traits.hpp>
#include <dimsum/tensor/expression.hpp>

namespace dimsum::plan::fusion {

template <class X>
using bare = std::remove_cvref_t<X>;

/// What one link of the attention chain is.
enum class kind {
  none,
  base,
  scale_right,
  scale_left,
  divide,
  masked_fill,
  causal,
  window,
  where_kept_left,   // where(cond, chain, scalar): the scalar where cond is false
  where_kept_right,  // where(cond, scalar, chain): the scalar where cond is true
  bias_right,        // chain + bias
  bias_left,         // bias + chain
  factor_right,      // chain * factor (a tensor over batch dims)
  factor_left,       // factor * chain
  tanh,              // tanh(chain)
  map                // map(with_derivative(f, df), chain)
};

template <class X>
inline constexpr bool is_scalar = std::is_same_v<fusion_traits_t<X>, scalar_node>;

/// Whether the dims of X and Y are the same set (an element-wise node
/// whose other operands add no dim to the chain's scores).
template <class X, class Y>
inline constexpr bool same_dims = dims_of_t<X>::size == dims_of_t<Y>::size && [] {
  for (auto n : dims_of_t<X>::names)
    if (dimsum::detail::find_name(dims_of_t<Y>::names, n) == dimsum::detail::npos) return false;
  return true;
}();

/// What sits between the softmax and the score einsum: node E with traits Tr.
/// `stages` counts the kernel's score stages, `biases` the additive terms
/// (at most one fuses); `query` names the query dim a mask fixes (empty if
/// none). grad::fused_attention's backward (kernels/attention_backward.hpp)
/// differentiates every link.
template <class E, class Tr = fusion_traits_t<E>>
struct chain {
  static constexpr kind k = kind::none;
  static constexpr bool ok = false;
  static constexpr std::size_t stages = 0, biases = 0;
  using base = void;
  static constexpr std::string_view query{};
  static constexpr bool masks_ok(std::string_view, std::string_view) { return false; }
  static constexpr bool factors_ok(std::string_view, std::string_view) { return false; }
};

template <class E, class Out, class A, class B>
struct chain<E, contraction_node<Out, A, B>> {
  static constexpr kind k = kind::base;
  static constexpr bool ok = true;
  static constexpr std::size_t stages = 0, biases = 0;
  using base = E;
  static constexpr std::string_view query{};
  static constexpr bool masks_ok(std::string_view, std::string_view) { return true; }
  static constexpr bool factors_ok(std::string_view, std::string_view) { return true; }
};

/// A link K around the chain X (its stages, plus one; or plus one bias).
template <kind K, class X>
struct wrap {
  using inner = chain<bare<X>>;
  static constexpr kind k = K;
  static constexpr bool is_bias = K == kind::bias_left || K == kind::bias_right;
  static constexpr bool ok = inner::ok;
  static constexpr std::size_t stages = inner::stages + (is_bias ? 0 : 1), biases = inner::biases + (is_bias ? 1 : 0);
  using base = typename inner::base;
  static constexpr std::string_view query = inner::query;
  static constexpr bool masks_ok(std::string_view q, std::string_view key) { return inner::masks_ok(q, key); }
  static constexpr bool factors_ok(std::string_view q, std::string_view key) { return inner::factors_ok(q, key); }
};

/// A factor link K (F times the chain X): F must not have the pattern's
/// query or key dim (one value per batch index).
template <kind K, class X, class F>
struct factor_wrap : wrap<K, X> {
  static constexpr bool factors_ok(std::string_view q, std::string_view key) {
    return wrap<K, X>::factors_ok(q, key) && index_of<dims_of_t<F>>(q) == dimsum::detail::npos &&
           index_of<dims_of_t<F>>(key) == dimsum::detail::npos;
  }
};

/// A causal or window mask link over dims Q, K around the chain X: the
/// pattern's query and key dims must be these.
template <kind K, class Q, class KD, class X>
struct mask_wrap : wrap<K, X> {
  using base_wrap = wrap<K, X>;
  static constexpr std::string_view query = Q::name.view();
  static constexpr bool masks_ok(std::string_view q, std::string_view key) {
    return Q::name.view() == q && KD::name.view() == key && base_wrap::masks_ok(q, key) &&
           (base_wrap::inner::query.empty() || base_wrap::inner::query == q);
  }
};

template <class E, class X, class S>
  requires is_scalar<S>
struct chain<E, elementwise_node<pointwise::multiply, X, S>> : wrap<kind::scale_right, X> {};
template <class E, class S, class X>
  requires(is_scalar<S> && !is_scalar<X>)
struct chain<E, elementwise_node<pointwise::multiply, S, X>> : wrap<kind::scale_left, X> {};
template <class E, class X, class S>
  requires is_scalar<S>
struct chain<E, elementwise_node<pointwise::divide, X, S>> : wrap<kind::divide, X> {};
template <class E, class X, class M, class S>
  requires is_scalar<S>
struct chain<E, elementwise_node<pointwise::masked_fill, X, M, S>> : wrap<kind::masked_fill, X> {};
template <class E, class X>
struct chain<E, elementwise_node<pointwise::tanh, X>> : wrap<kind::tanh, X> {};
template <class E, class X>
struct chain<E, elementwise_node<pointwise::differentiable_map, X>> : wrap<kind::map, X> {};

// scores * factor, factor * scores: the chain continues in the operand
// that carries every dim of the scores; the factor (not a scalar) has some
// of them, of the same value type.
template <class X, class F>
inline constexpr bool is_factor_of = !is_scalar<F> && std::is_same_v<value_type_of_t<F>, value_type_of_t<X>>;
template <class E, class X, class F>
  requires(!is_scalar<F> && chain<bare<X>>::ok && same_dims<E, X> && is_factor_of<X, F>)
struct chain<E, elementwise_node<pointwise::multiply, X, F>> : factor_wrap<kind::factor_right, X, F> {};
template <class E, class F, class X>
  requires(!is_scalar<F> && !is_scalar<X> && chain<bare<X>>::ok && same_dims<E, X> && is_factor_of<X, F> &&
           !(chain<bare<F>>::ok && same_dims<E, F>))
struct chain<E, elementwise_node<pointwise::multiply, F, X>> : factor_wrap<kind::factor_left, X, F> {};

// where(cond, scores, value) keeps the scores where cond holds: a mask of
// !cond; where(cond, value, scores) is a mask of cond. The condition's
// dims must be among the scores' (broadcast by name).
template <class E, class C, class X, class S>
  requires(is_scalar<S> && !is_scalar<X> && same_dims<E, X>)
struct chain<E, elementwise_node<pointwise::where, C, X, S>> : wrap<kind::where_kept_left, X> {};
template <class E, class C, class S, class X>
  requires(is_scalar<S> && !is_scalar<X> && same_dims<E, X>)
struct chain<E, elementwise_node<pointwise::where, C, S, X>> : wrap<kind::where_kept_right, X> {};

// scores + bias, bias + scores: the chain continues in the operand that
// is attention scores and carries every dim; the other one is the bias,
// any expression over some of those dims (ALiBi: slope times distance).
// The kernel copies the bias's evaluator per row, so a bias that owns a
// temporary (a contraction inside it) stays unfused.
template <class B>
inline constexpr bool cheap_bias =
    !is_scalar<B> && std::is_trivially_copy_constructible_v<decltype(std::declval<const bare<B>&>().template evaluator<dims_of_t<B>>())>;
template <class E, class X, class B>
  requires(chain<bare<X>>::ok && same_dims<E, X> && cheap_bias<B>)
struct chain<E, elementwise_node<pointwise::plus, X, B>> : wrap<kind::bias_right, X> {};
template <class E, class B, class X>
  requires(chain<bare<X>>::ok && same_dims<E, X> && cheap_bias<B> && !(chain<bare<B>>::ok && same_dims<E, B>))
struct chain<E, elementwise_node<pointwise::plus, B, X>> : wrap<kind::bias_left, X> {};

/// Whether X is a key-minus-query distance (ops/alibi.hpp's
/// relative_positions).
template <class Tr>
inline constexpr bool is_distance_traits = false;
template <class Q, class K>
inline constexpr bool is_distance_traits<relative_position_node<Q, K>> = true;
template <class X>
inline constexpr bool is_distance = is_distance_traits<fusion_traits_t<X>>;

/// A bias B of the form `slope * relative_positions<Q, K>` (either order;
/// ALiBi's `outer(slopes, distance)`): affine in the key index along a row,
/// so the kernel computes it from the slope of the batch index, the row
/// index and a vector iota, with no callback and no table. The slope is any
/// expression (not a scalar) over dims other than Q and K, of the scores'
/// value type T; it is materialised (one value per head). Any other bias
/// takes the generic row callback. `ok` is false when B is not of this
/// form; the runner also checks that Q and K are the pattern's query and
/// key dims.
template <class B, class T, class Tr = fusion_traits_t<B>>
struct affine_bias {
  static constexpr bool ok = false;
};
template <class B, class T, class X, class Y>
  requires(is_distance<X> != is_distance<Y>)
struct affine_bias<B, T, elementwise_node<pointwise::multiply, X, Y>> {
  static constexpr std::size_t distance_operand = is_distance<Y> ? 1 : 0;
  using distance = bare<std::conditional_t<is_distance<Y>, Y, X>>;
  using slope = bare<std::conditional_t<is_distance<Y>, X, Y>>;
  using query_dim = typename fusion_traits_t<distance>::query_dim;
  using key_dim = typename fusion_traits_t<distance>::key_dim;
  static constexpr bool ok = !is_scalar<slope> && std::is_same_v<value_type_of_t<slope>, T> &&
                             std::is_same_v<value_type_of_t<distance>, T> &&
                             index_of<dims_of_t<slope>>(query_dim::name.view()) == dimsum::detail::npos &&
                             index_of<dims_of_t<slope>>(key_dim::name.view()) == dimsum::detail::npos;
};

template <class E, class Q, class K, class X>
struct chain<E, causal_mask_node<Q, K, X>> : mask_wrap<kind::causal, Q, K, X> {};
template <class E, class Q, class K, class X>
struct chain<E, window_mask_node<Q, K, X>> : mask_wrap<kind::window, Q, K, X> {};

/// Which operand of a chain link the chain continues in (the other one of
/// a scale is the scalar, of a bias the bias; masks have one operand;
/// where's operand 0 is the condition).
template <kind K>
inline constexpr std::size_t inner_operand = K == kind::scale_left || K == kind::bias_left ? 1
                                             : K == kind::factor_left                      ? 1
                                             : K == kind::where_kept_left                  ? 1
                                             : K == kind::where_kept_right                 ? 2
                                                                                           : 0;

template <class E, class Tr = fusion_traits_t<E>>
struct softmax_parts {
  static constexpr bool ok = false;
};
template <class E, class D, class X>
struct softmax_parts<E, softmax_node<D, X>> {
  static constexpr bool ok = true;
  static constexpr bool has_sinks = false;
  using dim = D;
  using scores = bare<X>;
};
/// A softmax with sink logits S (ops/sink_softmax.hpp): the kernel starts
/// each row's running maximum and sum at the sink.
template <class E, class D, class X, class S>
struct softmax_parts<E, sink_softmax_node<D, X, S>> {
  static constexpr bool ok = true;
  static constexpr bool has_sinks = true;
  using dim = D;
  using scores = bare<X>;
  using sinks = bare<S>;
};

/// The contraction plan of a node whose traits are a contraction_node.
template <class Tr>
struct plan_of;
template <class Out, class... Ops>
struct plan_of<contraction_node<Out, Ops...>> {
  using type = contraction_plan<Out, dims_of_t<Ops>...>;
};
template <class E>
using plan_of_t = typename plan_of<fusion_traits_t<E>>::type;

/// The labels of the fused kernel, found from the two plans.
struct shape_facts {
  bool ok = false;
  std::size_t key_operand = 0;  // which operand of the score einsum has K
  std::string_view q, k, d, dv;
  std::string_view why{};  // when not ok: the part that blocked fusion, in words
};

/// Facts of an expression that is not fused attention, with the reason.
constexpr shape_facts not_fused(std::string_view why) {
  shape_facts f;
  f.why = why;
  return f;
}

/// The query dim is the one a mask names (`query`, if not empty), else the
/// last query-side dim of the scores; the other query-side dims (GQA's
/// `group`, present in Q only) and key-side dims are batch dims that K
/// (or Q) lacks, read with stride 0: K and V are never repeated.
template <class Base, class KD>
constexpr shape_facts score_facts(std::string_view query) {
  using plan_t = plan_of_t<Base>;
  shape_facts f;
  const std::string_view key = KD::name.view();
  std::size_t kl = dimsum::detail::npos;
  for (std::size_t l = 0; l < plan_t::n_labels; ++l)
    if (plan_t::labels[l] == key) kl = l;
  if (kl == dimsum::detail::npos) return not_fused("the score einsum does not keep the softmax's dim");
  const role key_role = plan_t::roles[kl];
  if (key_role != role::m && key_role != role::n)
    return not_fused("the softmax's dim is not a dim of one operand of the score einsum (the keys)");
  const role query_role = key_role == role::n ? role::m : role::n;
  f.key_operand = key_role == role::n ? 1 : 0;
  std::size_t nq = 0, nd = 0, n_batch = 0;  // n_batch: batch dims, query-side ones included
  bool query_found = false;
  for (std::size_t l = 0; l < plan_t::n_labels; ++l) {
    const role r = plan_t::roles[l];
    if (r == query_role) {
      ++nq;
      ++n_batch;
      if (query.empty()) f.q = plan_t::labels[l];
      if (plan_t::labels[l] == query) query_found = true;
    } else if (r == role::k) {
      ++nd;
      f.d = plan_t::labels[l];
    } else if (r == role::reduce_a || r == role::reduce_b) {
      return not_fused("the score einsum sums a dim that only one operand has");
    } else if (r == role::batch || (r == key_role && plan_t::labels[l] != key)) {
      ++n_batch;
    }
  }
  if (!query.empty()) {
    if (!query_found) return not_fused("a causal or window mask names a query dim the score einsum's query lacks");
    f.q = query;
  }
  if (nq == 0) return not_fused("the score einsum has no query dim (a dim of the other operand than the keys)");
  if (nd != 1) return not_fused("the score einsum does not contract exactly one dim (d)");
  if (n_batch - 1 > kernels::max_group_rank) return not_fused("the scores have more batch dims than the kernel takes");
  f.k = key;
  f.ok = true;
  return f;
}

/// Everything the runner needs to know about an outer einsum E (traits Tr),
/// or value == false when E is not fused attention.
template <class E, class Tr = fusion_traits_t<E>>
struct match {
  static constexpr shape_facts facts = not_fused("the outer expression is not an einsum of two operands");
  static constexpr bool value = false;
};

template <class E, class Out, class A, class B>
struct match<E, contraction_node<Out, A, B>> {
  static constexpr std::size_t p_index = softmax_parts<bare<A>>::ok ? 0 : softmax_parts<bare<B>>::ok ? 1 : 2;
  static constexpr std::size_t v_index = 1 - (p_index == 1 ? 1 : 0);

  static constexpr shape_facts facts = [] {
    if constexpr (p_index == 2) {
      return not_fused("neither operand of the outer einsum is a softmax");
    } else {
      using P = bare<std::tuple_element_t<p_index, std::tuple<A, B>>>;
      using V = bare<std::tuple_element_t<v_index, std::tuple<A, B>>>;
      using KD = typename softmax_parts<P>::dim;
      using C = chain<typename softmax_parts<P>::scores>;
      using T = value_type_of_t<P>;
      if constexpr (!C::ok) {
        return not_fused(
            "the softmax's operand is not an einsum of two operands followed only by scales by a scalar or by a "
            "factor over the scores' dims, tanh, a map with its derivative, causal or window masks, masked_fill or where with a scalar, and one "
            "bias over the scores' dims");
      } else if constexpr (!std::is_same_v<T, float> && !std::is_same_v<T, double> && !is_bf16_v<T>) {
        return not_fused("the value type is not float, double or bf16");
      } else if constexpr (!std::is_same_v<value_type_of_t<typename C::base>, T> ||
                           !std::is_same_v<value_type_of_t<V>, T>) {
        return not_fused("the scores, the softmax and V do not have one value type");
      } else if constexpr (C::stages > kernels::max_score_stages) {
        return not_fused("more score stages than the kernel takes (kernels::max_score_stages)");
      } else if constexpr (C::biases > 1) {
        return not_fused("more than one additive bias on the scores");
      } else {
        shape_facts f = score_facts<typename C::base, KD>(C::query);
        if (!f.ok) return f;
        if (!C::masks_ok(f.q, f.k))
          return not_fused("a causal or window mask names other dims than the pattern's query and key dims");
        if (!C::factors_ok(f.q, f.k))
          return not_fused("a factor on the scores has the query or key dim (it must be one value per batch index)");
        if constexpr (softmax_parts<P>::has_sinks) {
          using SK = dims_of_t<typename softmax_parts<P>::sinks>;
          if (index_of<SK>(f.q) != dimsum::detail::npos)
            return not_fused("the softmax's sinks have the query dim (they must be one logit per batch index)");
        }
        // The outer einsum sums K alone and keeps every other pattern dim.
        using outer_plan = contraction_plan<Out, dims_of_t<A>, dims_of_t<B>>;
        using S = dims_of_t<P>;
        using VD = dims_of_t<V>;
        for (std::size_t l = 0; l < outer_plan::n_labels; ++l) {
          const bool summed = l >= outer_plan::n_out;
          if (summed != (outer_plan::labels[l] == f.k))
            return not_fused("the outer einsum does not sum exactly the key dim and keep every other dim");
        }
        using dimsum::detail::find_name;
        using dimsum::detail::npos;
        if (find_name(VD::names, f.k) == npos || find_name(VD::names, f.q) != npos)
          return not_fused("V does not have the key dim, or has the query dim");
        std::size_t n_value = 0;
        for (std::size_t i = 0; i < VD::size; ++i)
          if (find_name(S::names, VD::names[i]) == npos) {
            ++n_value;
            f.dv = VD::names[i];
          }
        if (n_value != 1) return not_fused("V does not have exactly one dim of its own (the value dim)");
        return f;
      }
    }
  }();
  static constexpr bool value = facts.ok;
};

}  // namespace dimsum::plan::fusion

namespace dimsum {

/// True when evaluating the einsum expression E runs the fused attention
/// kernel (the scores are never materialised); false when it runs the
/// unfused path. Usable in `static_assert`.
template <class E>
inline constexpr bool uses_fused_attention_v = plan::fusion::match<std::remove_cvref_t<E>>::value;

/// True when E takes the fused path: the fused backward
/// (grad::fused_attention) differentiates every stage of it (scales, causal
/// and window masks, boolean masks, tanh, maps with their derivative,
/// factors, the bias and sinks; vars among those get their gradients).
template <class E>
inline constexpr bool fused_attention_is_differentiable_v = uses_fused_attention_v<E>;

/// Why the expression E does not run the fused attention kernel, naming the
/// part that blocked it (empty when it does): for an expression shaped like
/// attention that takes the unfused path. Usable in `static_assert`:
/// `static_assert(attention_not_fused_reason_v<decltype(e)>.empty(), ...)`
/// or printed.
template <class E>
inline constexpr std::string_view attention_not_fused_reason_v =
    plan::fusion::match<std::remove_cvref_t<E>>::facts.why;

}  // namespace dimsum
