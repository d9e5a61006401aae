#pragma once
/// \file
/// The operations that continue a lazy attention chain on vars
/// (grad/lazy_var.hpp): a scale by a scalar (`* s`, `s *`, `/ s`), a
/// factor that is a var over batch dims (`* temp`, a per-head
/// temperature), `tanh`, `map(with_derivative(f, df), s)`, `causal_mask`, `window_mask`, `masked_fill`,
/// `where` with a scalar, a constant bias (`+` a tensor or expression), a
/// learned ALiBi bias (`+ outer(slope, relative_positions(...))`, slope
/// a var) or a learned gathered bias (`+ lookup<bucket>(table, ids)`,
/// table a var, ids lazy: T5's, grad/rules/embedding.hpp), and `softmax`, with or without sink logits (a var, or a
/// constant copied). The vars a factor or a slope reads join the chain's leaves,
/// and the fused node gives them their gradients. Each takes a
/// lazy var and returns one whose expression is the same operation on the
/// chain's expression, owning the masks and biases it reads (copies of the
/// tensors they read: grad/owned_expression.hpp, or evaluated copies), and
/// whose materialisation records the same operation on the materialised
/// chain, exactly as the var overloads do. When the result is no longer an
/// attention chain (plan/fusion_patterns.hpp) the operation is recorded at
/// once. These overloads are the var overloads' spellings with one more
/// constraint, so they are chosen for a lazy var and never for a recorded one.

#include <type_traits>
#include <utility>

#include <dimsum/grad/lazy_var.hpp>
#include <dimsum/grad/owned_expression.hpp>
#include <dimsum/grad/rules/activation.hpp>
#include <dimsum/grad/rules/elementwise.hpp>
#include <dimsum/grad/rules/map.hpp>
#include <dimsum/grad/rules/mask.hpp>
#include <dimsum/grad/rules/sink_softmax.hpp>
#include <dimsum/grad/rules/softmax.hpp>
#include <dimsum/grad/rules/window_mask.hpp>
#include <dimsum/ops/math.hpp>
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

/// A lazy chain and a recorded var of its value type, in either order: a
/// factor (the pattern decides whether its dims fit).
template <class A, class B>
constexpr bool is_lazy_factor() {
  if constexpr (lazy_var_like<A> && recorded_var<B>)
    return std::is_same_v<value_type_of_t<A>, value_type_of_t<B>>;
  else if constexpr (recorded_var<A> && lazy_var_like<B>)
    return std::is_same_v<value_type_of_t<A>, value_type_of_t<B>>;
  else
    return false;
}
template <class A, class B>
concept lazy_factor = is_lazy_factor<A, B>();

/// A recorded var (the slopes) and a key-minus-query distance
/// (`relative_positions`), in either order, of one value type: their
/// `outer` is a learned ALiBi bias, kept lazy so that a chain it is added
/// to still fuses.
template <class A, class B>
constexpr bool is_slope_times_distance() {
  if constexpr (recorded_var<A> && named_expression<B>)
    return plan::fusion::is_distance<B> && std::is_same_v<value_type_of_t<A>, value_type_of_t<B>>;
  else if constexpr (named_expression<A> && recorded_var<B>)
    return plan::fusion::is_distance<A> && std::is_same_v<value_type_of_t<A>, value_type_of_t<B>>;
  else
    return false;
}
template <class A, class B>
concept slope_times_distance = is_slope_times_distance<A, B>();

/// Two lazy vars of one value type (a chain and a lazy bias).
template <class A, class B>
concept lazy_pair = lazy_var_like<A> && lazy_var_like<B> && std::is_same_v<value_type_of_t<A>, value_type_of_t<B>>;

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

/// As continue_chain, with the leaves `leaves` (the chain's and those the
/// operation adds).
template <bool Continues, class Leaves, class E, class Make>
auto continue_chain_with(Leaves leaves, E&& e, Make make) {
  if constexpr (Continues)
    return make_lazy(std::forward<E>(e), std::move(leaves), std::move(make));
  else
    return make();
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

/// A lazy attention chain times a var over some of its batch dims (a
/// per-head temperature), in either order: the chain continues and the
/// var joins its leaves (the fused node gives it its gradient).
template <class A, class B>
  requires grad::detail::var_operands<A, B> && grad::detail::lazy_factor<A, B>
auto operator*(A&& a, B&& b) {
  namespace gd = grad::detail;
  using VA = std::remove_cvref_t<A>;
  using VB = std::remove_cvref_t<B>;
  if constexpr (gd::lazy_var_like<A>) {
    auto e = gd::expression_copy(a) * b.value();
    return gd::continue_chain_with<gd::continues_chain<decltype(e)>>(
        std::tuple_cat(a.leaves(), std::make_tuple(VB(b))), std::move(e),
        [a = VA(a), b = VB(b)] { return a.materialize() * b; });
  } else {
    auto e = a.value() * gd::expression_copy(b);
    return gd::continue_chain_with<gd::continues_chain<decltype(e)>>(
        std::tuple_cat(b.leaves(), std::make_tuple(VA(a))), std::move(e),
        [a = VA(a), b = VB(b)] { return a * b.materialize(); });
  }
}

/// The outer product of a var of slopes and `relative_positions` (either
/// order): a lazy learned ALiBi bias, which fuses when added to a lazy
/// attention chain and is recorded as the product anywhere else (an
/// einsum keeping every dim: the slopes' gradient sums over the positions).
template <class A, class B>
  requires grad::detail::slope_times_distance<A, B>
auto outer(A&& a, B&& b) {
  namespace gd = grad::detail;
  using E = decltype(dimsum::outer(gd::value_of(a), gd::value_of(b)));
  auto record = [](const auto& x, const auto& y) {
    // unqualified: the einsum of vars (grad/rules/einsum.hpp) is found by
    // argument-dependent lookup through the tensor operand
    return [&]<dimension... Ds>(dim_list<Ds...>) { return einsum<Ds...>(x, y); }(dims_of_t<E>{});
  };
  if constexpr (gd::recorded_var<A>) {
    using VA = std::remove_cvref_t<A>;
    using D = std::remove_cvref_t<B>;
    return gd::make_lazy(dimsum::outer(a.value(), D(b)), std::make_tuple(VA(a)),
                         [a = VA(a), d = D(b), record] { return record(a, dimsum::eval(d)); });
  } else {
    using D = std::remove_cvref_t<A>;
    using VB = std::remove_cvref_t<B>;
    return gd::make_lazy(dimsum::outer(D(a), b.value()), std::make_tuple(VB(b)),
                         [d = D(a), b = VB(b), record] { return record(dimsum::eval(d), b); });
  }
}

/// A lazy attention chain plus a lazy learned bias (`outer` of a var of
/// slopes and `relative_positions`, or `lookup` of a var table at lazy
/// ids), in either order: the chain continues with the
/// bias's vars among its leaves; anything else is recorded as the sum.
template <class A, class B>
  requires grad::detail::var_operands<A, B> && grad::detail::lazy_pair<A, B>
auto operator+(A&& a, B&& b) {
  namespace gd = grad::detail;
  using VA = std::remove_cvref_t<A>;
  using VB = std::remove_cvref_t<B>;
  auto e = gd::expression_copy(a) + gd::expression_copy(b);
  auto make = [a = VA(a), b = VB(b)] { return a.materialize() + b.materialize(); };
  if constexpr (gd::continues_chain<decltype(e)> &&
                plan::fusion::chain<std::remove_cvref_t<decltype(a.expression())>>::ok)
    return gd::continue_chain_with<true>(std::tuple_cat(a.leaves(), b.leaves()), std::move(e), std::move(make));
  else if constexpr (gd::continues_chain<decltype(e)>)
    return gd::continue_chain_with<true>(std::tuple_cat(b.leaves(), a.leaves()), std::move(e), std::move(make));
  else
    return make();
}

/// tanh of a lazy attention chain (soft-capping, `c * tanh(s / c)`): the
/// chain continues.
template <grad::detail::var_like V>
  requires grad::detail::lazy_var_like<V>
auto tanh(V&& v) {
  namespace gd = grad::detail;
  auto e = dimsum::tanh(gd::expression_copy(v));
  return gd::continue_chain<gd::continues_chain<decltype(e)>>(v, std::move(e),
                                                             [](const auto& x) { return dimsum::tanh(x); });
}

/// map of a function with its derivative over a lazy attention chain:
/// the chain continues.
template <class F, grad::detail::var_like V>
  requires grad::detail::lazy_var_like<V> && dimsum::detail::is_differentiable_function_v<std::remove_cvref_t<F>>
auto map(F&& f, V&& v) {
  namespace gd = grad::detail;
  const std::remove_cvref_t<F> fn = std::forward<F>(f);
  auto e = dimsum::map(fn, gd::expression_copy(v));
  return gd::continue_chain<gd::continues_chain<decltype(e)>>(v, std::move(e),
                                                             [fn](const auto& x) { return dimsum::map(fn, x); });
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

/// masked_fill of a lazy attention chain: the chain continues. The mask
/// is kept as an expression over copies of the tensors it reads
/// (grad/owned_expression.hpp), so the fused node's forward and backward
/// evaluate it a block at a time, as on tensors: a document mask over
/// (batch, q, k) costs copies of the document ids, not a byte per score.
template <grad::detail::var_like V, named_expression M, scalar S>
  requires grad::detail::lazy_var_like<V> && bool_valued_v<M>
auto masked_fill(V&& v, M&& mask, S value) {
  namespace gd = grad::detail;
  auto m = gd::own_expression(mask);
  auto e = dimsum::masked_fill(gd::expression_copy(v), gd::copy_of(m.expression), value);
  return gd::continue_chain<gd::continues_chain<decltype(e)>>(
      v, std::move(e), [m, value](const auto& x) { return dimsum::masked_fill(x, m.expression, value); });
}

/// where(cond, chain, scalar) or where(cond, scalar, chain) of a lazy
/// attention chain: the chain continues, cond kept as masked_fill keeps
/// its mask.
template <named_expression C, class A, class B>
  requires grad::detail::var_operands<A, B> && grad::detail::lazy_scale<A, B> && bool_valued_v<C>
auto where(C&& cond, A&& a, B&& b) {
  namespace gd = grad::detail;
  auto c = gd::own_expression(cond);
  if constexpr (gd::lazy_var_like<A>) {
    auto e = dimsum::where(gd::copy_of(c.expression), gd::expression_copy(a), b);
    return gd::continue_chain<gd::continues_chain<decltype(e)>>(
        a, std::move(e), [c, b](const auto& x) { return dimsum::where(c.expression, x, b); });
  } else {
    auto e = dimsum::where(gd::copy_of(c.expression), a, gd::expression_copy(b));
    return gd::continue_chain<gd::continues_chain<decltype(e)>>(
        b, std::move(e), [c, a](const auto& x) { return dimsum::where(c.expression, a, x); });
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

/// softmax with sink logits of a lazy attention chain: the chain
/// continues; sinks that are a var join its leaves (the fused node gives
/// them their gradient), constant ones are copied.
template <dimension D, class X, class S>
  requires grad::detail::sink_softmax_operands<X, S> && grad::detail::lazy_var_like<X> &&
           (!grad::detail::lazy_var_like<S>)
auto softmax(X&& x, S&& sinks) {
  namespace gd = grad::detail;
  using VX = std::remove_cvref_t<X>;
  if constexpr (gd::recorded_var<S>) {
    using VS = std::remove_cvref_t<S>;
    auto e = dimsum::softmax<D>(gd::expression_copy(x), sinks.value());
    return gd::continue_chain_with<gd::continues_softmax<decltype(e)>>(
        std::tuple_cat(x.leaves(), std::make_tuple(VS(sinks))), std::move(e),
        [x = VX(x), s = VS(sinks)] { return dimsum::softmax<D>(x.materialize(), s); });
  } else {
    auto kept = gd::own(std::forward<S>(sinks));
    auto e = dimsum::softmax<D>(gd::expression_copy(x), *kept);
    return gd::continue_chain_with<gd::continues_softmax<decltype(e)>>(
        x.leaves(), std::move(e), [x = VX(x), kept] { return dimsum::softmax<D>(x.materialize(), *kept); });
  }
}

}  // namespace dimsum
