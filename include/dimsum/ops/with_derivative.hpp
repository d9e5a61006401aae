#pragma once
/// \file
/// `with_derivative(f, df)`: a user's scalar function with its derivative,
/// for `map`. On tensors `map(with_derivative(f, df), x)` is `map(f, x)`;
/// on vars it records f with the gradient g * df(x)
/// (grad/rules/map.hpp); between the score einsum and the softmax of
/// attention it is a stage of the fused kernel, forward and backward
/// (plan/fusion_patterns.hpp).
///
///     auto cubic = dimsum::with_derivative([](float s) { return s + 0.1f * s * s * s; },
///                                          [](float s) { return 1 + 0.3f * s * s; });
///     auto modded = dimsum::map(cubic, scores);

#include <type_traits>
#include <utility>

#include <dimsum/ops/elementwise.hpp>
#include <dimsum/ops/map.hpp>
#include <dimsum/plan/fusion_traits.hpp>

namespace dimsum {

/// A scalar function f with its derivative df (see `with_derivative`).
template <class F, class DF>
struct differentiable_function {
  F f;
  DF df;
  template <class T>
  auto operator()(T x) const {
    return f(x);
  }
  /// df(x): the derivative of f at x.
  template <class T>
  auto derivative(T x) const {
    return df(x);
  }
};

/// f with its derivative df, both callables of one value: the function
/// `map` applies and differentiates. Example:
/// `map(with_derivative([](float x) { return x * x; }, [](float x) { return 2 * x; }), s)`.
template <class F, class DF>
auto with_derivative(F&& f, DF&& df) {
  return differentiable_function<std::decay_t<F>, std::decay_t<DF>>{std::forward<F>(f), std::forward<DF>(df)};
}

namespace detail {

template <class F>
inline constexpr bool is_differentiable_function_v = false;
template <class F, class DF>
inline constexpr bool is_differentiable_function_v<differentiable_function<F, DF>> = true;

/// A map of a function with its derivative is a stage the attention
/// kernel runs and differentiates.
template <class F, class DF>
inline constexpr plan::pointwise pointwise_v<ops::map_fn<differentiable_function<F, DF>>> =
    plan::pointwise::differentiable_map;

}  // namespace detail
}  // namespace dimsum
