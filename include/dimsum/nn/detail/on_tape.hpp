#pragma once
/// \file
/// What the nn modules' tape forms share: the tape a module called on a var
/// records on (the var's own), found or refused with a message, and the
/// one place where a module's parameters are watched in its input's value
/// type (mixed precision).

#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include <dimsum/core/bf16.hpp>
#include <dimsum/grad/rules/cast.hpp>
#include <dimsum/grad/tape.hpp>

namespace dimsum::nn::detail {

/// The tape var `x` is recorded on; a var on no tape (a default one, or a
/// constant made without a tape) throws `grad::tape_error`: a module needs
/// a tape to watch its parameters on.
template <grad::detail::var_like X>
grad::tape& tape_of_input(const X& x, std::string_view module) {
  if (!x.owner())
    throw grad::tape_error(std::string(module) +
                           ": the input var is on no tape, so the module's parameters cannot be watched; make it "
                           "with tape.constant(x) or tape.watch(x), or call the module as m(tape, x)");
  return *x.owner();
}

/// The value type an input X is computed in (a var's or an expression's).
template <class X>
struct input_value_type {
  using type = void;
};
template <class X>
  requires(grad::detail::var_like<X>)
struct input_value_type<X> {
  using type = typename X::value_type;
};
template <class X>
  requires(!grad::detail::var_like<X> && named_expression<X>)
struct input_value_type<X> {
  using type = value_type_of_t<X>;
};

/// Whether a module's parameter of value type T is watched as a bf16 copy
/// for an input X: X holds bf16 and T is float (float32 masters).
template <class X, class T>
inline constexpr bool watched_as_bf16_v =
    is_bf16_v<typename input_value_type<std::remove_cvref_t<X>>::type> && std::is_same_v<T, float>;

/// The value type a module of value type T computes in for an input X:
/// bf16 for a bf16 input of a float module, T otherwise.
template <class X, class T>
using compute_type_t = std::conditional_t<watched_as_bf16_v<X, T>, bf16, T>;

/// Parameter p (a `parameter` or `frozen_parameter`) watched on tape t for
/// an input of type X: itself (`t.watch(p)`), or, for a bf16 input and a
/// float32 parameter, a bf16 copy whose cast is on the tape
/// (`grad::watch_as<bf16>`), so the float32 master gets a float32
/// gradient. Every nn module's tape form watches through this.
template <class X, class P>
auto watch_for(grad::tape& t, P& p) {
  using T = typename P::value_type;
  if constexpr (watched_as_bf16_v<X, T>)
    return dimsum::cast<bf16>(t.watch(p));
  else
    return t.watch(p);
}

}  // namespace dimsum::nn::detail
