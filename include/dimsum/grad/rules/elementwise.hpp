#pragma once
/// \file
/// Element-wise operations on vars: `+ - * /` (var, tensor or scalar on
/// either side, broadcasting by name), unary minus, `exp`, `sqrt` and
/// `where`. A broadcast operand's gradient is summed over the dims it
/// lacks (DESIGN.md §10), so it has exactly the operand's dims.
///
///     auto q = dimsum::einsum<"b p m, h m d -> b p h d">(x, w_q) + b_q;   // b_q: var<float, h, d>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include <dimsum/grad/rules/cast.hpp>
#include <dimsum/grad/tape.hpp>
#include <dimsum/kernels/vector_math.hpp>
#include <dimsum/ops/einsum.hpp>
#include <dimsum/ops/elementwise.hpp>
#include <dimsum/ops/reduce.hpp>

namespace dimsum::grad::detail {

/// e summed onto the dims L (a subset of e's dims): the gradient of a
/// broadcast operand. A sum over the dims L lacks (kernels/reduce.hpp:
/// vectorised down the columns of a bias gradient), into e's order of L.
template <class L, class E>
decltype(auto) reduce_to(E&& e) {
  if constexpr (same_name_set_v<L, dims_of_t<E>>)
    return std::forward<E>(e);
  else
    return reduce_expr<kernels::reduce_op::sum, without_t<dims_of_t<E>, L>, E>(std::forward<E>(e));
}

template <class X>
inline constexpr bool is_tensor_v = false;
template <class T, dimension... Ds>
inline constexpr bool is_tensor_v<tensor<T, Ds...>> = true;

/// Whether the dims S are the last dims of L, in the same order.
template <class S, class L>
constexpr bool is_dims_suffix() {
  if (S::size > L::size) return false;
  for (std::size_t i = 0; i < S::size; ++i)
    if (S::names[i] != L::names[L::size - S::size + i]) return false;
  return true;
}

/// The float32 sums of the bf16 tensor g over its leading dims onto its
/// trailing dims L (a bias gradient): each row widened and added in turn,
/// no float32 copy of g.
template <class L, class G>
auto row_sums_widened(const G& g) {
  using D = dims_of_t<G>;
  std::array<std::size_t, L::size> ext{};
  const auto ge = g.extents();
  for (std::size_t i = 0; i < L::size; ++i) ext[i] = ge[D::size - L::size + i];
  auto acc = tensor_for_t<float, L>::from_extents(ext);
  const std::size_t cols = acc.size();
  const std::size_t rows = cols == 0 ? 0 : g.size() / cols;
  for (std::size_t r = 0; r < rows; ++r) kernels::detail::widen_add_contiguous(g.data() + r * cols, cols, acc.data());
  return acc;
}

/// Adds the gradient contribution e to operand x, summed onto x's dims;
/// nothing for a scalar or a var without gradient.
template <class X, class E>
void send(const X& x, E&& e) {
  if constexpr (var_like<X>) {
    if (!x.requires_grad()) return;
    using L = typename X::dims;
    if constexpr (is_bf16_v<typename X::value_type> && is_bf16_v<value_type_of_t<E>> && !same_name_set_v<L, dims_of_t<E>>) {
      // a bf16 broadcast summed in float32
      if constexpr (is_tensor_v<std::remove_cvref_t<E>> && is_dims_suffix<L, dims_of_t<E>>())
        x.node()->accumulate(row_sums_widened<L>(e));
      else
        x.node()->accumulate(reduce_to<L>(dimsum::cast<float>(std::forward<E>(e))));
    } else {
      x.node()->accumulate(reduce_to<L>(std::forward<E>(e)));
    }
  }
}

/// A bf16 tensor as float32 (exact, lazy), a scalar as float; anything
/// else as it is (the gradient contributions of bf16 operands are formed
/// in float32 and rounded once, when the var's sum is).
template <class X>
decltype(auto) wide_value(const X& x) {
  if constexpr (named_expression<X>) {
    if constexpr (is_bf16_v<value_type_of_t<X>>)
      return dimsum::cast<float>(x);
    else
      return (x);
  } else if constexpr (is_bf16_v<X>) {
    return static_cast<float>(x);
  } else {
    return (x);
  }
}

/// The value type of a var (void for a scalar, which adopts the vars').
template <class X>
constexpr auto var_value_type() {
  if constexpr (var_like<X>)
    return std::type_identity<typename std::remove_cvref_t<X>::value_type>{};
  else
    return std::type_identity<void>{};
}
template <class X>
using var_value_t = typename decltype(var_value_type<X>())::type;

/// The first of Ts that is neither void nor Skip (void if none).
template <class Skip, class... Ts>
struct first_type_other_than {
  using type = void;
};
template <class Skip, class T, class... Ts>
struct first_type_other_than<Skip, T, Ts...> {
  using type = std::conditional_t<!std::is_void_v<T> && !std::is_same_v<T, Skip>, T,
                                  typename first_type_other_than<Skip, Ts...>::type>;
};

/// Records the forward value `fwd` (an expression) of an operation on the
/// operands xs (vars or scalars) with the rule `rule(g, out)`. Vars (and
/// lifted tensors) of two value types are refused here, before the rule
/// would send a double gradient into a float var
/// (`var_operands_need_the_same_value_type`).
template <class Fwd, class Rule, class... Xs>
auto record_op(Fwd&& fwd, Rule&& rule, const Xs&... xs) {
  using First = typename first_type_other_than<void, var_value_t<Xs>...>::type;
  using Other = typename first_type_other_than<First, var_value_t<Xs>...>::type;
  if constexpr (is_invalid_v<Fwd>) {
    return invalid_expression{};
  } else if constexpr (!std::is_void_v<Other>) {
    dimsum::detail::report<var_operands_need_the_same_value_type<First, Other>>();
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

/// Whether X is a var with every dim of L (a gradient of dims L needs no
/// sum to reach it).
template <class X, class L>
inline constexpr bool has_all_dims_of = [] {
  if constexpr (var_like<X>)
    return same_name_set_v<typename std::remove_cvref_t<X>::dims, L>;
  else
    return false;
}();

/// g *= v (v a scalar or a tensor whose dims are among g's), in g's own
/// buffer, which is returned as an rvalue to be moved on.
template <class G, class V>
G&& times_in_place(G& g, const V& v) {
  auto product = g * v;
  static_assert(same_names_in_order<dims_of_t<decltype(product)>, dims_of_t<G>>());
  product.eval_to(strided<value_type_of_t<G>, G::rank>{g.data(), g.extents(), g.strides()});
  return std::move(g);
}

template <class A, class B>
concept var_operands = (var_like<A> || var_like<B>) && (var_like<A> || named_expression<A> || scalar<A>) &&
                       (var_like<B> || named_expression<B> || scalar<B>);

/// The value of a op b for tensors or scalars a and b: when b's dims are
/// the last dims of a (a bias, or equal dims; the result then has a's dims
/// in a's order, as the element-wise expression's) and the extents agree,
/// kernels::broadcast_rows computes it; otherwise the element-wise
/// expression (which checks extents and broadcasts by name).
template <class Op, class A, class B>
auto binary_value(const A& a, const B& b) {
  if constexpr (is_tensor_v<A> && is_tensor_v<B>) {
    using E = decltype(dimsum::detail::binary<Op>(a, b));
    if constexpr (is_invalid_v<E>) {
      return dimsum::detail::binary<Op>(a, b);  // the error is reported there
    } else {
      using R = tensor_for_t<value_type_of_t<E>, dims_of_t<E>>;  // a dim static on one side is static here
      if constexpr (std::is_same_v<value_type_of_t<A>, value_type_of_t<B>> &&
                    std::is_same_v<value_type_of_t<A>, value_type_of_t<E>> &&
                    is_dims_suffix<dims_of_t<B>, dims_of_t<A>>() && same_names_in_order<dims_of_t<E>, dims_of_t<A>>()) {
        constexpr std::size_t off = A::rank - B::rank;
        bool agree = true;
        for (std::size_t i = 0; i < B::rank; ++i) agree = agree && b.extents()[i] == a.extents()[off + i];
        for (std::size_t i = 0; i < A::rank; ++i)
          agree = agree && (R::dims::static_extents[i] == dynamic || R::dims::static_extents[i] == a.extents()[i]);
        if (agree) {
          auto out = uninitialized_tensor<R>(a.extents());
          const std::size_t n = b.size();
          kernels::broadcast_rows<false>(Op{}, a.data(), b.data(), out.data(), n == 0 ? 0 : a.size() / n, n);
          return out;
        }
      }
      return R(dimsum::detail::binary<Op>(a, b));  // checks extents and throws shape_error
    }
  } else {
    return dimsum::detail::binary<Op>(a, b);
  }
}

template <class Op, class A0, class B0>
auto var_binary(A0&& a0, B0&& b0) {
  auto a = lift(std::forward<A0>(a0));
  auto b = lift(std::forward<B0>(b0));
  return record_op(
      binary_value<Op>(value_of(a), value_of(b)),
      [a, b](auto& g, const auto& out) {
        using T = value_type_of_t<decltype(g)>;
        using G = dims_of_t<decltype(g)>;
        if constexpr (is_bf16_v<T>) {
          // bf16: each operand's contribution is formed in float32 from the
          // exact widened values and summed in float32 (tape.hpp, var_node).
          const auto gw = dimsum::cast<float>(g);
          if constexpr (std::is_same_v<Op, ops::plus>) {
            send(a, g);
            send(b, g);
          } else if constexpr (std::is_same_v<Op, ops::minus>) {
            send(a, g);
            if (needs_grad(b)) send(b, gw * -1.0f);
          } else if constexpr (std::is_same_v<Op, ops::multiplies>) {
            if (needs_grad(a)) send(a, gw * wide_value(value_of(b)));
            if (needs_grad(b)) send(b, gw * wide_value(value_of(a)));
          } else {
            static_assert(std::is_same_v<Op, ops::divides>);
            if (needs_grad(a)) send(a, gw / wide_value(value_of(b)));
            if (needs_grad(b)) send(b, gw * wide_value(out) / wide_value(value_of(b)) * -1.0f);
          }
        } else if constexpr (std::is_same_v<Op, ops::plus> || std::is_same_v<Op, ops::minus>) {
          // g's buffer itself goes on to one operand (moved in), negated in
          // place for minus's b; a broadcast operand (a bias) is summed from
          // g first, so that the move goes to the operand with g's dims.
          if (!needs_grad(b)) return send(a, std::move(g));
          if constexpr (std::is_same_v<Op, ops::plus> && has_all_dims_of<decltype(a), G> &&
                        !has_all_dims_of<decltype(b), G>) {
            send(b, g);
            send(a, std::move(g));
          } else {
            send(a, g);
            if constexpr (std::is_same_v<Op, ops::minus>) {
              T* p = g.data();
              for (std::size_t i = 0, n = g.size(); i < n; ++i) p[i] = -p[i];
            }
            send(b, std::move(g));
          }
        } else if constexpr (std::is_same_v<Op, ops::multiplies>) {
          // The last product that is needed is computed in g's buffer.
          if (!needs_grad(b) && has_all_dims_of<decltype(a), G>) return send(a, times_in_place(g, value_of(b)));
          send(a, g * value_of(b));
          if constexpr (has_all_dims_of<decltype(b), G>)
            send(b, times_in_place(g, value_of(a)));
          else
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

/// Comparisons with a var on either side (`v > 0.0f`, `v == w`, `v < t`):
/// the bool tensor of the comparison of the values, evaluated at once and
/// without gradient (as torch's `x > 0` of a tensor that requires grad), so
/// that a mask can be taken from a var: `where(v > 0.0f, v, 0.0f)`. Dims
/// are matched and broadcast by name as for tensors, whose errors they give.
#define DIMSUM_VAR_COMPARISON_(sym)                                                               \
  /** Element-wise sym of var values, a bool tensor (no gradient). */                             \
  template <class A, class B>                                                                     \
    requires grad::detail::var_operands<A, B>                                                     \
  auto operator sym(const A& a, const B& b) {                                                     \
    return dimsum::eval(grad::detail::value_of(a) sym grad::detail::value_of(b));                 \
  }
DIMSUM_VAR_COMPARISON_(<)
DIMSUM_VAR_COMPARISON_(<=)
DIMSUM_VAR_COMPARISON_(>)
DIMSUM_VAR_COMPARISON_(>=)
DIMSUM_VAR_COMPARISON_(==)
DIMSUM_VAR_COMPARISON_(!=)
#undef DIMSUM_VAR_COMPARISON_

/// Unary minus of a var.
template <grad::detail::var_like V>
auto operator-(V&& v) {
  using T = typename std::remove_cvref_t<V>::value_type;
  return grad::detail::record_op(grad::detail::map(v.value(), [](T x) { return -x; }),
                                 [v](const auto& g, const auto&) {
                                   if constexpr (is_bf16_v<T>)
                                     grad::detail::send(v, dimsum::cast<float>(g) * -1.0f);
                                   else
                                     grad::detail::send(v, g * T(-1));
                                 }, v);
}

/// Element-wise e^x of a var; its gradient is g * e^x. On a bf16 var,
/// computed in float32 (`in_float32`, rules/cast.hpp).
template <grad::detail::var_like V>
auto exp(V&& v) {
  if constexpr (grad::detail::bf16_operands_v<V>) {
    return grad::detail::in_float32([](auto x) { return dimsum::exp(std::move(x)); }, std::forward<V>(v));
  } else {
    using T = typename std::remove_cvref_t<V>::value_type;
    return grad::detail::record_op(grad::detail::map(v.value(), [](T x) { return std::exp(x); }),
                                   [v](const auto& g, const auto& out) { grad::detail::send(v, g * out); }, v);
  }
}

/// Element-wise square root of a var; its gradient is g / (2 sqrt(x)). On
/// a bf16 var, computed in float32.
template <grad::detail::var_like V>
auto sqrt(V&& v) {
  if constexpr (grad::detail::bf16_operands_v<V>) {
    return grad::detail::in_float32([](auto x) { return dimsum::sqrt(std::move(x)); }, std::forward<V>(v));
  } else {
    using T = typename std::remove_cvref_t<V>::value_type;
    return grad::detail::record_op(grad::detail::map(v.value(), [](T x) { return std::sqrt(x); }),
                                   [v](const auto& g, const auto& out) { grad::detail::send(v, g / (out * T(2))); }, v);
  }
}

/// `a` where `cond` is true, else `b`, with a or b a var (the other a var,
/// tensor or scalar); the gradient goes to a where cond holds, to b
/// elsewhere, each summed onto its dims.
template <named_expression C, class A, class B>
  requires grad::detail::var_operands<A, B>
auto where(C&& cond, A&& a0, B&& b0) {
  if constexpr (!is_invalid_v<C> && !bool_valued_v<C>) {
    dimsum::detail::report<where_condition_is_not_boolean<value_type_of_t<C>>>();
    return invalid_expression{};
  } else {
    auto a = grad::detail::lift(std::forward<A>(a0));
    auto b = grad::detail::lift(std::forward<B>(b0));
    auto c = dimsum::eval(std::forward<C>(cond));
    using T = typename std::conditional_t<grad::detail::var_like<decltype(a)>, decltype(a), decltype(b)>::value_type;
    return grad::detail::record_op(
        dimsum::where(c, grad::detail::value_of(a), grad::detail::value_of(b)),
        [a, b, c](const auto& g, const auto&) {
          grad::detail::send(a, dimsum::where(c, g, accumulator_t<T>(0)));
          grad::detail::send(b, dimsum::where(c, accumulator_t<T>(0), g));
        },
        a, b);
  }
}

}  // namespace dimsum
