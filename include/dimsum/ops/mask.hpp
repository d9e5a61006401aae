#pragma once
/// \file
/// Masks by name: `causal_mask<Q, K>(t, masked_value)` and
/// `masked_fill(t, mask, value)`.

#include <array>
#include <cstddef>

#include <dimsum/ops/elementwise.hpp>
#include <dimsum/plan/fusion_traits.hpp>

namespace dimsum {

/// A lazy causal mask: t where key index <= query index, `value` where the
/// key index is greater (torch.triu(ones, diagonal=1) on (Q, K), which is
/// also the rule for non-square Q × K).
template <dimension Q, dimension K, class E>
class causal_mask_expr : public expression_tag {
 public:
  using value_type = value_type_of_t<E>;
  using dims = dims_of_t<E>;
  using query_dim = Q;
  using key_dim = K;
  static constexpr std::size_t rank = dims::size;
  using fusion_traits = plan::causal_mask_node<Q, K, E>;

  template <class X>
  causal_mask_expr(X&& e, value_type masked_value) : e_(std::forward<X>(e)), value_(masked_value) {}

  auto extents() const { return e_.extents(); }
  const auto& operand() const { return e_; }
  value_type masked_value() const { return value_; }

  template <class Root>
  auto evaluator() const {
    using Inner = decltype(e_.template evaluator<Root>());
    constexpr std::size_t q = index_of<Root>(Q::name.view());
    constexpr std::size_t k = index_of<Root>(K::name.view());
    return evaluator_type<Inner, Root::size, q, k>{e_.template evaluator<Root>(), value_};
  }
  void eval_to(const strided<value_type, rank>& dst) const {
    auto ev = evaluator<dims>();
    detail::run_elementwise(dst, ev);
  }

 private:
  template <class Inner, std::size_t R, std::size_t QP, std::size_t KP>
  struct evaluator_type {
    Inner inner;
    value_type value;
    std::size_t qi = 0, ki = 0;
    void seek(const std::size_t* idx) {
      inner.seek(idx);
      if constexpr (QP != R - 1) qi = idx[QP];
      if constexpr (KP != R - 1) ki = idx[KP];
    }
    value_type operator[](std::size_t j) const {
      const std::size_t q = QP == R - 1 ? j : qi;
      const std::size_t k = KP == R - 1 ? j : ki;
      return k > q ? value : static_cast<value_type>(inner[j]);
    }
  };

  detail::closure_t<E> e_;
  value_type value_;
};

/// Masks t with `masked_value` wherever the index along K exceeds the index
/// along Q: `causal_mask<q_posn, k_posn>(scores, -inf)`. Q and K must be two
/// different dims of t (compile error otherwise).
namespace detail {
template <dimension Q, dimension K, class E, class V>
auto causal_mask_impl(E&& e, V masked_value) {
  using L = dims_of_t<E>;
  if constexpr (is_invalid_v<E>) {
    return invalid_expression{};
  } else if constexpr (Q::name.view() == K::name.view()) {
    report<causal_mask_query_and_key_are_the_same_dim<diagnostic_name_t<Q>>>();
    return invalid_expression{};
  } else if constexpr (!contains_v<L, Q>) {
    report<causal_mask_dim_is_not_a_dim_of_the_tensor<diagnostic_name_t<Q>, diagnostic_dims_t<L>>>();
    return invalid_expression{};
  } else if constexpr (!contains_v<L, K>) {
    detail::report<causal_mask_dim_is_not_a_dim_of_the_tensor<diagnostic_name_t<K>, diagnostic_dims_t<L>>>();
    return invalid_expression{};
  } else {
    return causal_mask_expr<Q, K, E>(std::forward<E>(e), static_cast<value_type_of_t<E>>(masked_value));
  }
}
}  // namespace detail

/// causal_mask (see above). An lvalue operand is held by reference
/// (DIMSUM_LIFETIMEBOUND), an rvalue is moved in.
template <dimension Q, dimension K, named_expression E, scalar V>
auto causal_mask(E& e DIMSUM_LIFETIMEBOUND, V masked_value) {
  return detail::causal_mask_impl<Q, K>(e, masked_value);
}
template <dimension Q, dimension K, named_expression E, scalar V>
  requires(!std::is_lvalue_reference_v<E>)
auto causal_mask(E&& e, V masked_value) {
  return detail::causal_mask_impl<Q, K>(std::forward<E>(e), masked_value);
}

/// torch.tril(torch.ones(q, k)) as a bool tensor: true where the key index
/// is at most the query index (the positions causal_mask keeps).
template <dimension Q, dimension K>
auto tril(Q q, K k) {
  if constexpr (Q::name.view() == K::name.view()) {
    detail::report<causal_mask_query_and_key_are_the_same_dim<diagnostic_name_t<Q>>>();
    return invalid_expression{};
  } else {
    tensor<bool, Q, K> t(q, k);
    for (std::size_t i = 0; i < q.value; ++i)
      for (std::size_t j = 0; j <= i && j < k.value; ++j) t.data()[i * k.value + j] = true;
    return t;
  }
}

/// `value` where `mask` is true, t elsewhere; mask is a bool expression
/// whose dims are a subset of t's (broadcast by name). The result has t's
/// dims in t's order.
template <named_expression E, named_expression M, scalar V>
auto masked_fill(E&& e, M&& mask, V value) {
  using L = dims_of_t<E>;
  using LM = dims_of_t<M>;
  if constexpr (is_invalid_v<E> || is_invalid_v<M>) {
    return invalid_expression{};
  } else if constexpr (!bool_valued_v<M>) {
    detail::report<masked_fill_mask_is_not_boolean<value_type_of_t<M>>>();
    return invalid_expression{};
  } else if constexpr (constexpr std::size_t bad = [] {
                         for (std::size_t i = 0; i < LM::size; ++i)
                           if (detail::find_name(L::names, LM::names[i]) == detail::npos) return i;
                         return detail::npos;
                       }();
                       bad != detail::npos) {
    detail::report<masked_fill_mask_has_a_dim_the_tensor_lacks<diagnostic_name_t<detail::at_t<LM, bad>>,
                                                               diagnostic_dims_t<LM>, diagnostic_dims_t<L>>>();
    return invalid_expression{};
  } else {
    using T = value_type_of_t<E>;
    return detail::make_elementwise<false>(ops::masked_fill{}, std::forward<E>(e), std::forward<M>(mask),
                                           scalar_expr<T>(static_cast<T>(value)));
  }
}

}  // namespace dimsum
