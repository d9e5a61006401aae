#pragma once
/// \file
/// `map(f, v)` on a var: f must carry its derivative
/// (`with_derivative(f, df)`, ops/with_derivative.hpp); records f(x)
/// element-wise with the gradient g * df(x). A function without one is a
/// compile error (`map_on_a_var_needs_a_derivative`).
///
///     auto y = dimsum::map(dimsum::with_derivative(f, df), v);

#include <type_traits>
#include <utility>

#include <dimsum/core/diagnostics.hpp>
#include <dimsum/grad/rules/activation.hpp>
#include <dimsum/ops/with_derivative.hpp>

namespace dimsum {

// --- compile-time error of map on vars (docs/errors.md) ---
template <class Dims>
struct map_on_a_var_needs_a_derivative {
  static_assert(detail::always_false<Dims>,
                "dimsum: map(f, v) of a grad::var needs f's derivative to record the gradient: write "
                "map(with_derivative(f, df), v)");
};

/// map of one var: `map(with_derivative(f, df), v)` records f(x) with the
/// gradient g * df(x); any other f is a compile error naming v's dims.
template <class F, grad::detail::var_like V>
auto map(F&& f, V&& v) {
  using Fn = std::remove_cvref_t<F>;
  if constexpr (!detail::is_differentiable_function_v<Fn>) {
    detail::report<map_on_a_var_needs_a_derivative<diagnostic_dims_t<typename std::remove_cvref_t<V>::dims>>>();
    return invalid_expression{};
  } else {
    using T = typename std::remove_cvref_t<V>::value_type;
    const Fn fn = std::forward<F>(f);
    return grad::detail::record_unary(
        v, [fn](T x) { return static_cast<T>(fn(x)); },
        [fn](T g, T x, T) { return g * static_cast<T>(fn.derivative(x)); });
  }
}

}  // namespace dimsum
