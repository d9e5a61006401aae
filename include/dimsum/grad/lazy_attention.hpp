#pragma once
/// \file
/// The operations that continue a lazy attention chain on vars
/// (grad/lazy_var.hpp): a scale by a scalar (`* s`, `s *`, `/ s`),
/// `causal_mask`, `window_mask`, `masked_fill`, `where` with a scalar, a
/// constant bias (`+` a tensor or expression), and `softmax`. Each takes a
/// lazy var and returns one whose expression is the same operation on the
/// chain's expression, owning the masks and biases it reads (copies), and
/// whose materialisation records the same operation on the materialised
/// chain, exactly as the var overloads do. When the result is no longer an
/// attention chain (plan/fusion_patterns.hpp) the operation is recorded at
/// once. These overloads are the var overloads' spellings with one more
/// constraint, so they are chosen for a lazy var and never for a recorded one.

#include <type_traits>
#include <utility>

#include <dimsum/grad/lazy_var.hpp>
#include <dimsum/grad/rules/elementwise.hpp>
#include <dimsum/grad/rules/mask.hpp>
#include <dimsum/grad/rules/softmax.hpp>
#include <dimsum/grad/rules/window_mask.hpp>
#include <dimsum/plan/fusion_patterns.hpp>

namespace dimsum::grad::detail {

/// A lazy chain scaled by a scalar, in either order.
template <class A, class B>
concept lazy_scale = (lazy_var_like<A> && scalar<B>) || (scalar<A> && lazy_var_like<B>);

/// A lazy chain and a constant (tensor or expression) of its value type, in
/// either order: a bias.
template <class A, class B>
constexpr bool is_lazy_bias() {
  if constexpr (lazy_var_like<A> && named_expression<B>)
    return std::is_same_v<value_type_of_t<A>, value_type_of_t<B>>;
  else if constexpr (named_expression<A> && lazy_var_like<B>)
    return std::is_same_v<value_type_of_t<A>, value_type_of_t<B>>;
  else
    return false;
}
template <class A, class B>
concept lazy_bias = is_lazy_bias<A, B>();

/// Whether E is still an attention chain (a softmax of one, for softmax).
template <class E>
inline constexpr bool continues_chain = plan::fusion::chain<std::remove_cvref_t<E>>::ok;
template <class E>
inline constexpr bool continues_softmax = [] {
  using P = plan::fusion::softmax_parts<std::remove_cvref_t<E>>;
  if constexpr (P::ok)
    return plan::fusion::chain<typename P::scores>::ok;
  else
    return false;
}();

/// The lazy var of expression e, continuing the chain p, whose
/// materialisation is `record(p's var)`; or, when `Continues` is false,
/// that operation recorded now.
template <bool Continues, class P, class E, class Record>
auto continue_chain(const P& p, E&& e, Record record) {
  if constexpr (Continues) {
    return make_lazy(std::forward<E>(e), p.leaves(), [p, record] { return record(p.materialize()); });
  } else {
    return record(p.materialize());
  }
}

/// The lazy chain among two operands.
template <class A, class B>
const auto& chain_of(const A& a, const B& b) {
  if constexpr (lazy_var_like<A>)
    return a;
  else
    return b;
}

}  // namespace dimsum::grad::detail

namespace dimsum {

/// A lazy attention chain times a scalar: the chain continues.
template <class A, class B>
  requires grad::detail::var_operands<A, B> && grad::detail::lazy_scale<A, B>
auto operator*(A&& a, B&& b) {
  namespace gd = grad::detail;
  if constexpr (gd::lazy_var_like<A>) {
    auto e = gd::expression_copy(a) * b;
    return gd::continue_chain<gd::continues_chain<decltype(e)>>(a, std::move(e), [b](const auto& v) { return v * b; });
  } else {
    auto e = a * gd::expression_copy(b);
    return gd::continue_chain<gd::continues_chain<decltype(e)>>(b, std::move(e), [a](const auto& v) { return a * v; });
  }
}

/// A lazy attention chain divided by a scalar: the chain continues.
template <class A, class B>
  requires grad::detail::var_operands<A, B> && grad::detail::lazy_scale<A, B> && grad::detail::lazy_var_like<A>
auto operator/(A&& a, B&& b) {
  namespace gd = grad::detail;
  auto e = gd::expression_copy(a) / b;
  return gd::continue_chain<gd::continues_chain<decltype(e)>>(a, std::move(e), [b](const auto& v) { return v / b; });
}

/// A lazy attention chain plus a constant bias (a copy is kept): the chain
/// continues; the bias gets no gradient.
template <class A, class B>
  requires grad::detail::var_operands<A, B> && grad::detail::lazy_bias<A, B>
auto operator+(A&& a, B&& b) {
  namespace gd = grad::detail;
  if constexpr (gd::lazy_var_like<A>) {
    auto bias = gd::own(std::forward<B>(b));
    auto e = gd::expression_copy(a) + *bias;
    return gd::continue_chain<gd::continues_chain<decltype(e)>>(a, std::move(e),
                                                                 [bias](const auto& v) { return v + *bias; });
  } else {
    auto bias = gd::own(std::forward<A>(a));
    auto e = *bias + gd::expression_copy(b);
    return gd::continue_chain<gd::continues_chain<decltype(e)>>(b, std::move(e),
                                                                 [bias](const auto& v) { return *bias + v; });
  }
}

/// causal_mask of a lazy attention chain: the chain continues.
template <dimension Q, dimension K, grad::detail::var_like V, scalar S>
  requires grad::detail::lazy_var_like<V>
auto causal_mask(V&& v, S masked_value) {
  namespace gd = grad::detail;
  auto e = dimsum::causal_mask<Q, K>(gd::expression_copy(v), masked_value);
  return gd::continue_chain<gd::continues_chain<decltype(e)>>(
      v, std::move(e), [masked_value](const auto& x) { return dimsum::causal_mask<Q, K>(x, masked_value); });
}

/// window_mask of a lazy attention chain: the chain continues.
template <dimension Q, dimension K, grad::detail::var_like V, scalar S>
  requires grad::detail::lazy_var_like<V>
auto window_mask(V&& v, std::size_t window, S masked_value, std::size_t offset = 0) {
  namespace gd = grad::detail;
  auto e = dimsum::window_mask<Q, K>(gd::expression_copy(v), window, masked_value, offset);
  return gd::continue_chain<gd::continues_chain<decltype(e)>>(v, std::move(e), [=](const auto& x) {
    return dimsum::window_mask<Q, K>(x, window, masked_value, offset);
  });
}

/// masked_fill of a lazy attention chain (a copy of the mask is kept): the
/// chain continues.
template <grad::detail::var_like V, named_expression M, scalar S>
  requires grad::detail::lazy_var_like<V> && bool_valued_v<M>
auto masked_fill(V&& v, M&& mask, S value) {
  namespace gd = grad::detail;
  auto m = gd::own(std::forward<M>(mask));
  auto e = dimsum::masked_fill(gd::expression_copy(v), *m, value);
  return gd::continue_chain<gd::continues_chain<decltype(e)>>(
      v, std::move(e), [m, value](const auto& x) { return dimsum::masked_fill(x, *m, value); });
}

/// where(cond, chain, scalar) or where(cond, scalar, chain) of a lazy
/// attention chain (a copy of cond is kept): the chain continues.
template <named_expression C, class A, class B>
  requires grad::detail::var_operands<A, B> && grad::detail::lazy_scale<A, B> && bool_valued_v<C>
auto where(C&& cond, A&& a, B&& b) {
  namespace gd = grad::detail;
  auto c = gd::own(std::forward<C>(cond));
  if constexpr (gd::lazy_var_like<A>) {
    auto e = dimsum::where(*c, gd::expression_copy(a), b);
    return gd::continue_chain<gd::continues_chain<decltype(e)>>(
        a, std::move(e), [c, b](const auto& x) { return dimsum::where(*c, x, b); });
  } else {
    auto e = dimsum::where(*c, a, gd::expression_copy(b));
    return gd::continue_chain<gd::continues_chain<decltype(e)>>(
        b, std::move(e), [c, a](const auto& x) { return dimsum::where(*c, a, x); });
  }
}

/// softmax of a lazy attention chain: the chain continues (to the einsum
/// with V that completes it).
template <dimension D, grad::detail::var_like V>
  requires grad::detail::lazy_var_like<V>
auto softmax(V&& v) {
  namespace gd = grad::detail;
  auto e = dimsum::softmax<D>(gd::expression_copy(v));
  return gd::continue_chain<gd::continues_softmax<decltype(e)>>(v, std::move(e),
                                                               [](const auto& x) { return dimsum::softmax<D>(x); });
}

}  // namespace dimsum
