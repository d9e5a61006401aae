#pragma once
/// \file
/// `cast<U>(v)` on vars: the value converted to value type U, recorded; the
/// gradient is converted back to v's value type. For the pairs mixed
/// precision uses, bf16 -> float widens exactly (the float32 gradient
/// reaches a bf16 var's float32 gradient sum without rounding) and
/// float -> bf16 rounds to nearest even (its bf16 gradient reaches the
/// float var exactly widened). See docs/design.md, "bfloat16 gradients".
///
///     auto w16 = dimsum::cast<dimsum::bf16>(tape.watch(W));   // W: float32 master parameter
///     // ... forward in bf16; W.grad is float32 after backward

#include <tuple>
#include <type_traits>
#include <utility>

#include <dimsum/core/bf16.hpp>
#include <dimsum/grad/tape.hpp>
#include <dimsum/ops/elementwise.hpp>

namespace dimsum {

/// The var v with its value converted to U (`cast<float>(v)` of a bf16
/// var, `cast<bf16>(w)` of a float one); its gradient is converted back to
/// v's value type (exactly, where that widens; where it narrows, rounded
/// to nearest even). Casting to v's own value type records nothing and
/// gives v.
template <class U, grad::detail::var_like V>
  requires(std::is_arithmetic_v<U> || is_bf16_v<U>)
auto cast(V&& v0) {
  using X = std::remove_cvref_t<V>;
  using T = typename X::value_type;
  if constexpr (std::is_same_v<T, U>) {
    return X(std::forward<V>(v0));
  } else {
    X v(std::forward<V>(v0));
    tensor_for_t<U, typename X::dims> value = dimsum::cast<U>(v.value());
    grad::tape* t = v.owner();
    const bool rg = v.requires_grad();
    return grad::detail::record(t, std::move(value), rg, [v](auto& g, const auto&) {
      using Node = typename X::node_type;
      if constexpr (Node::sums_wide && std::is_same_v<U, typename Node::wide_value_type>)
        v.node()->accumulate(std::move(g));  // a float32 gradient joins a bf16 var's float32 sum as it is
      else
        v.node()->accumulate(dimsum::cast<T>(g));
    });
  }
}

}  // namespace dimsum

namespace dimsum::grad::detail {

/// x as float32 when it is a bf16 var or tensor (recorded: cast<float>),
/// else x itself.
template <class X>
decltype(auto) widened(X&& x) {
  using R = std::remove_cvref_t<X>;
  if constexpr ((var_like<R> || named_expression<R>) && !std::is_arithmetic_v<R>) {
    if constexpr (is_bf16_v<value_type_of_t<R>>)
      return dimsum::cast<float>(std::forward<X>(x));
    else
      return std::forward<X>(x);
  } else {
    return std::forward<X>(x);
  }
}

/// f(xs...) computed in float32 on bf16 vars: each bf16 operand is cast to
/// float32 (recorded), f runs its float32 rule, and a float32 var result is
/// cast back to bf16 (recorded), so the value and every gradient are
/// rounded to bf16 once, at the ends, as on bf16 tensors. Used by the
/// rules whose backward is more than one product (softmax, log_softmax,
/// cross_entropy, layer_norm, rms_norm, the activations, exp, sqrt).
template <class F, class... Xs>
auto in_float32(F f, Xs&&... xs) {
  auto r = f(widened(std::forward<Xs>(xs))...);
  if constexpr (var_like<decltype(r)> && std::is_same_v<typename decltype(r)::value_type, float>)
    return dimsum::cast<bf16>(std::move(r));
  else
    return r;
}

template <class X>
constexpr int bf16_operand_kind() {  // 1: a bf16 var, 2: a bf16 tensor, 0: a scalar, -1: another value type
  using R = std::remove_cvref_t<X>;
  if constexpr (var_like<R>)
    return is_bf16_v<typename R::value_type> ? 1 : -1;
  else if constexpr (named_expression<R>)
    return is_bf16_v<value_type_of_t<R>> ? 2 : -1;
  else
    return 0;
}
/// Whether the operands Xs are bf16 vars, bf16 tensors and scalars, one at
/// least a bf16 var: the rules then compute in float32 (`in_float32`). A
/// bf16 var beside a float one is not: the rule's own path reports the
/// mix, as on tensors.
template <class... Xs>
inline constexpr bool bf16_operands_v = ((bf16_operand_kind<Xs>() == 1) || ...) && ((bf16_operand_kind<Xs>() >= 0) && ...);

/// Whether the operands mix a bf16 var or tensor with a var or tensor of
/// another value type (a compile error unless one is cast, as on tensors).
template <class... Xs>
inline constexpr bool mixes_bf16_v = ((bf16_operand_kind<Xs>() > 0) || ...) && ((bf16_operand_kind<Xs>() < 0) || ...);

/// The value type of the first operand that is neither bf16 nor a scalar.
template <class... Xs>
struct first_non_bf16 {
  using type = void;
};
template <class X, class... Xs>
struct first_non_bf16<X, Xs...> {
  using type = typename std::conditional_t<(bf16_operand_kind<X>() < 0),
                                           std::type_identity<value_type_of_t<X>>, first_non_bf16<Xs...>>::type;
};

/// The one error for an operation on vars that mixes bf16 with another
/// value type: the element-wise operations' (ops/elementwise.hpp).
template <class... Xs>
void report_bf16_mix() {
  dimsum::detail::report<elementwise_operands_have_different_value_types<
      bf16, typename first_non_bf16<std::remove_cvref_t<Xs>...>::type>>();
}

}  // namespace dimsum::grad::detail

namespace dimsum::grad {

/// `cast<U>(t.watch(p))` in one call: the parameter p watched on tape t and
/// its value given as value type U, for the mixed-precision recipe (float32
/// master parameters, bf16 copies for the forward and backward passes):
/// `auto w = grad::watch_as<bf16>(tape, W);`. Backward widens the bf16
/// gradient exactly and adds it to `p.grad`, float32 like the parameter;
/// the optimizer steps and checkpoints keep the float32 value. A frozen
/// parameter gives a constant var, as `watch` does.
template <class U, class T, dimension... Ds>
  requires(std::is_arithmetic_v<U> || is_bf16_v<U>)
auto watch_as(tape& t, parameter<T, Ds...>& p) {
  return dimsum::cast<U>(t.watch(p));
}

}  // namespace dimsum::grad
