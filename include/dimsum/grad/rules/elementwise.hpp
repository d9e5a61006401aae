#pragma once
/// \file
/// Element-wise operations on vars: `+ - * /` (var, tensor or scalar on
/// either side, broadcasting by name), unary minus, `exp`, `sqrt` and
/// `where`. A broadcast operand's gradient is summed over the dims it
/// lacks (DESIGN.md §10), so it has exactly the operand's dims.
///
///     auto q = dimsum::einsum<"b p m, h m d -> b p h d">(x, w_q) + b_q;   // b_q: var<float, h, d>

#include <cmath>
#include <cstddef>
#include <type_traits>
#include <utility>

#include <dimsum/grad/tape.hpp>
#include <dimsum/ops/einsum.hpp>
#include <dimsum/ops/elementwise.hpp>

namespace dimsum::grad::detail {

/// e summed onto the dims L (a subset of e's dims): the gradient of a
/// broadcast operand.
template <class L, class E>
decltype(auto) reduce_to(E&& e) {
  if constexpr (same_name_set_v<L, dims_of_t<E>>)
    return std::forward<E>(e);
  else
    return dimsum::detail::make_einsum<L>(std::forward<E>(e));
}

/// Adds the gradient contribution e to operand x, summed onto x's dims;
/// nothing for a scalar or a var without gradient.
template <class X, class E>
void send(const X& x, E&& e) {
  if constexpr (var_like<X>) {
    if (x.requires_grad()) x.node()->accumulate(reduce_to<typename X::dims>(std::forward<E>(e)));
  }
}

/// Records the forward value `fwd` (an expression) of an operation on the
/// operands xs (vars or scalars) with the rule `rule(g, out)`.
template <class Fwd, class Rule, class... Xs>
auto record_op(Fwd&& fwd, Rule&& rule, const Xs&... xs) {
  if constexpr (is_invalid_v<Fwd>) {
    return invalid_expression{};
  } else {
    tensor_for_t<value_type_of_t<Fwd>, dims_of_t<Fwd>> value = std::forward<Fwd>(fwd);
    return record(common_tape({tape_of(xs)...}), std::move(value), (needs_grad(xs) || ...), std::forward<Rule>(rule));
  }
}

/// f applied to every element of t, into a new tensor (the unary maths
/// of the rules, computed directly).
template <class T, dimension... Ds, class F>
tensor<T, Ds...> map(const tensor<T, Ds...>& t, F f) {
  auto r = tensor<T, Ds...>::from_extents(t.extents());
  const T* s = t.data();
  T* o = r.data();
  for (std::size_t i = 0, n = t.size(); i < n; ++i) o[i] = f(s[i]);
  return r;
}

template <class A, class B>
concept var_operands = (var_like<A> || var_like<B>) && (var_like<A> || named_expression<A> || scalar<A>) &&
                       (var_like<B> || named_expression<B> || scalar<B>);

template <class Op, class A0, class B0>
auto var_binary(A0&& a0, B0&& b0) {
  auto a = lift(std::forward<A0>(a0));
  auto b = lift(std::forward<B0>(b0));
  return record_op(
      dimsum::detail::binary<Op>(value_of(a), value_of(b)),
      [a, b](const auto& g, const auto& out) {
        if constexpr (std::is_same_v<Op, ops::plus>) {
          send(a, g);
          send(b, g);
        } else if constexpr (std::is_same_v<Op, ops::minus>) {
          send(a, g);
          send(b, g * value_type_of_t<decltype(g)>(-1));
        } else if constexpr (std::is_same_v<Op, ops::multiplies>) {
          send(a, g * value_of(b));
          send(b, g * value_of(a));
        } else {
          static_assert(std::is_same_v<Op, ops::divides>);
          send(a, g / value_of(b));
          send(b, g * out / value_of(b) * value_type_of_t<decltype(g)>(-1));  // d(a/b)/db = -(a/b)/b
        }
        (void)out;
      },
      a, b);
}

}  // namespace dimsum::grad::detail

namespace dimsum {

#define DIMSUM_VAR_BINARY_OPERATOR_(sym, functor)                                                 \
  /** Element-wise sym on vars (broadcast by name; tensors and scalars are constants). */         \
  template <class A, class B>                                                                     \
    requires grad::detail::var_operands<A, B>                                                     \
  auto operator sym(A&& a, B&& b) {                                                               \
    return grad::detail::var_binary<ops::functor>(std::forward<A>(a), std::forward<B>(b));        \
  }
DIMSUM_VAR_BINARY_OPERATOR_(+, plus)
DIMSUM_VAR_BINARY_OPERATOR_(-, minus)
DIMSUM_VAR_BINARY_OPERATOR_(*, multiplies)
DIMSUM_VAR_BINARY_OPERATOR_(/, divides)
#undef DIMSUM_VAR_BINARY_OPERATOR_

/// Unary minus of a var.
template <grad::detail::var_like V>
auto operator-(V&& v) {
  using T = typename std::remove_cvref_t<V>::value_type;
  return grad::detail::record_op(grad::detail::map(v.value(), [](T x) { return -x; }),
                                 [v](const auto& g, const auto&) { grad::detail::send(v, g * T(-1)); }, v);
}

/// Element-wise e^x of a var; its gradient is g * e^x.
template <grad::detail::var_like V>
auto exp(V&& v) {
  using T = typename std::remove_cvref_t<V>::value_type;
  return grad::detail::record_op(grad::detail::map(v.value(), [](T x) { return std::exp(x); }),
                                 [v](const auto& g, const auto& out) { grad::detail::send(v, g * out); }, v);
}

/// Element-wise square root of a var; its gradient is g / (2 sqrt(x)).
template <grad::detail::var_like V>
auto sqrt(V&& v) {
  using T = typename std::remove_cvref_t<V>::value_type;
  return grad::detail::record_op(grad::detail::map(v.value(), [](T x) { return std::sqrt(x); }), [v](const auto& g, const auto& out) {
    grad::detail::send(v, g / (out * T(2)));
  }, v);
}

/// `a` where `cond` is true, else `b`, with a or b a var (the other a var,
/// tensor or scalar); the gradient goes to a where cond holds, to b
/// elsewhere, each summed onto its dims.
template <named_expression C, class A, class B>
  requires grad::detail::var_operands<A, B>
auto where(C&& cond, A&& a0, B&& b0) {
  auto a = grad::detail::lift(std::forward<A>(a0));
  auto b = grad::detail::lift(std::forward<B>(b0));
  auto c = dimsum::eval(std::forward<C>(cond));
  using T = typename std::conditional_t<grad::detail::var_like<decltype(a)>, decltype(a), decltype(b)>::value_type;
  return grad::detail::record_op(
      dimsum::where(c, grad::detail::value_of(a), grad::detail::value_of(b)),
      [a, b, c](const auto& g, const auto&) {
        grad::detail::send(a, dimsum::where(c, g, T(0)));
        grad::detail::send(b, dimsum::where(c, T(0), g));
      },
      a, b);
}

}  // namespace dimsum
