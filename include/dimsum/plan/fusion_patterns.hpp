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
///   - `causal_mask<Qd, K>(x, value)`;
///   - `masked_fill(x, mask, value)` with any boolean mask (broadcast by name).
/// The score einsum must contract exactly one dim (d) and keep one query dim
/// Qd and the key dim K besides its batch dims; the outer einsum must sum
/// exactly K and keep every other dim of the pattern, and V must have K,
/// some of the batch dims and exactly one value dim. The value type is float
/// or double throughout, at most `kernels::max_score_stages` stages, at most
/// `kernels::max_group_rank` batch dims. Anything else, or any part the
/// user evaluated into a tensor, takes the unfused path (same results).
/// `uses_fused_attention_v<E>` says which.

#include <cstddef>
#include <string_view>
#include <tuple>
#include <type_traits>

#include <dimsum/core/dim_list.hpp>
#include <dimsum/kernels/attention.hpp>
#include <dimsum/kernels/contraction_args.hpp>
#include <dimsum/plan/contraction_plan.hpp>
#include <dimsum/plan/fusion_traits.hpp>
#include <dimsum/tensor/expression.hpp>

namespace dimsum::plan::fusion {

template <class X>
using bare = std::remove_cvref_t<X>;

/// What one link of the attention chain is.
enum class kind { none, base, scale_right, scale_left, divide, masked_fill, causal };

template <class X>
inline constexpr bool is_scalar = std::is_same_v<fusion_traits_t<X>, scalar_node>;

/// What sits between the softmax and the score einsum: node E with traits Tr.
template <class E, class Tr = fusion_traits_t<E>>
struct chain {
  static constexpr kind k = kind::none;
  static constexpr bool ok = false;
  static constexpr std::size_t stages = 0;
  using base = void;
  static constexpr bool causal_ok(std::string_view, std::string_view) { return false; }
};

template <class E, class Out, class A, class B>
struct chain<E, contraction_node<Out, A, B>> {
  static constexpr kind k = kind::base;
  static constexpr bool ok = true;
  static constexpr std::size_t stages = 0;
  using base = E;
  static constexpr bool causal_ok(std::string_view, std::string_view) { return true; }
};

template <kind K, class X>
struct wrap {
  using inner = chain<bare<X>>;
  static constexpr kind k = K;
  static constexpr bool ok = inner::ok;
  static constexpr std::size_t stages = inner::stages + 1;
  using base = typename inner::base;
  static constexpr bool causal_ok(std::string_view q, std::string_view key) { return inner::causal_ok(q, key); }
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

template <class E, class Q, class K, class X>
struct chain<E, causal_mask_node<Q, K, X>> : wrap<kind::causal, X> {
  static constexpr bool causal_ok(std::string_view q, std::string_view key) {
    return Q::name.view() == q && K::name.view() == key && wrap<kind::causal, X>::causal_ok(q, key);
  }
};

/// Which operand of a chain link the chain continues in (the other one of
/// a scale is the scalar; a causal mask has one operand).
template <kind K>
inline constexpr std::size_t inner_operand = K == kind::scale_left ? 1 : 0;

template <class E, class Tr = fusion_traits_t<E>>
struct softmax_parts {
  static constexpr bool ok = false;
};
template <class E, class D, class X>
struct softmax_parts<E, softmax_node<D, X>> {
  static constexpr bool ok = true;
  using dim = D;
  using scores = bare<X>;
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
};

template <class Base, class KD>
constexpr shape_facts score_facts() {
  using plan_t = plan_of_t<Base>;
  shape_facts f;
  const std::string_view key = KD::name.view();
  std::size_t kl = dimsum::detail::npos;
  for (std::size_t l = 0; l < plan_t::n_labels; ++l)
    if (plan_t::labels[l] == key) kl = l;
  if (kl == dimsum::detail::npos) return f;
  const role key_role = plan_t::roles[kl];
  if (key_role != role::m && key_role != role::n) return f;
  const role query_role = key_role == role::n ? role::m : role::n;
  f.key_operand = key_role == role::n ? 1 : 0;
  std::size_t nq = 0, nd = 0;
  for (std::size_t l = 0; l < plan_t::n_labels; ++l) {
    const role r = plan_t::roles[l];
    if (r == query_role) {
      ++nq;
      f.q = plan_t::labels[l];
    } else if (r == role::k) {
      ++nd;
      f.d = plan_t::labels[l];
    } else if (r == role::reduce_a || r == role::reduce_b) {
      return f;
    }
  }
  if (nq != 1 || nd != 1 || plan_t::count(role::batch) > kernels::max_group_rank) return f;
  f.k = key;
  f.ok = true;
  return f;
}

/// Everything the runner needs to know about an outer einsum E (traits Tr),
/// or value == false when E is not fused attention.
template <class E, class Tr = fusion_traits_t<E>>
struct match {
  static constexpr bool value = false;
};

template <class E, class Out, class A, class B>
struct match<E, contraction_node<Out, A, B>> {
  static constexpr std::size_t p_index = softmax_parts<bare<A>>::ok ? 0 : softmax_parts<bare<B>>::ok ? 1 : 2;
  static constexpr std::size_t v_index = 1 - (p_index == 1 ? 1 : 0);

  static constexpr shape_facts facts = [] {
    if constexpr (p_index == 2) {
      return shape_facts{};
    } else {
      using P = bare<std::tuple_element_t<p_index, std::tuple<A, B>>>;
      using V = bare<std::tuple_element_t<v_index, std::tuple<A, B>>>;
      using KD = typename softmax_parts<P>::dim;
      using C = chain<typename softmax_parts<P>::scores>;
      using T = value_type_of_t<P>;
      if constexpr (!C::ok) {
        return shape_facts{};
      } else if constexpr (!std::is_same_v<T, float> && !std::is_same_v<T, double>) {
        return shape_facts{};
      } else if constexpr (!std::is_same_v<value_type_of_t<typename C::base>, T> ||
                           !std::is_same_v<value_type_of_t<V>, T> || C::stages > kernels::max_score_stages) {
        return shape_facts{};
      } else {
        shape_facts f = score_facts<typename C::base, KD>();
        if (!f.ok || !C::causal_ok(f.q, f.k)) return shape_facts{};
        // The outer einsum sums K alone and keeps every other pattern dim.
        using outer_plan = contraction_plan<Out, dims_of_t<A>, dims_of_t<B>>;
        using S = dims_of_t<P>;
        using VD = dims_of_t<V>;
        for (std::size_t l = 0; l < outer_plan::n_labels; ++l) {
          const bool summed = l >= outer_plan::n_out;
          if (summed != (outer_plan::labels[l] == f.k)) return shape_facts{};
        }
        using dimsum::detail::find_name;
        using dimsum::detail::npos;
        if (find_name(VD::names, f.k) == npos || find_name(VD::names, f.q) != npos) return shape_facts{};
        std::size_t n_value = 0;
        for (std::size_t i = 0; i < VD::size; ++i)
          if (find_name(S::names, VD::names[i]) == npos) {
            ++n_value;
            f.dv = VD::names[i];
          }
        if (n_value != 1) return shape_facts{};
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

}  // namespace dimsum
