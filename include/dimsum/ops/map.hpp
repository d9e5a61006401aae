#pragma once
/// \file
/// `map(f, x...)`: a user's function applied element-wise over named
/// expressions, lazily and broadcasting by name like the built-in
/// operations.

#include <type_traits>
#include <utility>

#include <dimsum/ops/elementwise.hpp>

namespace dimsum {

namespace ops {
/// A user's function as an element-wise operation (errors quote "map").
template <class F>
struct map_fn {
  static constexpr const char* name = "map";
  F f;
  template <class... A>
  auto operator()(A... a) const {
    return f(a...);
  }
};
}  // namespace ops

/// Applies f element-wise: `map(f, a, b)` has, at each index, f(a[i], b[i]).
///
/// Shape rule: as for `a + b` (ops/elementwise.hpp), operand by operand from
/// the left: the result has the first operand's dims, then each further
/// operand's new dims in its order; every operand must share a dim with
/// the ones before it (a compile error naming both dim lists otherwise),
/// shared dims agree in extent. The value type is what f returns for the
/// operands' value types. f is copied into the expression; the operands
/// follow closure semantics (lvalues referenced, rvalues moved in).
/// Example: `tensor<float, batch, d> y = map([](float v, float s) { return v > 0 ? v : s * v; }, x, slope);`
/// A function that cannot be called with one value of each operand (another
/// number of parameters, or types that do not convert) is the compile error
/// `map_function_cannot_take_one_value_of_each_operand`.
template <class F, named_expression... X>
  requires(sizeof...(X) > 0)
auto map(F&& f, X&&... x) {
  if constexpr (!(is_invalid_v<X> || ...) &&
                !std::is_invocable_v<const std::remove_cvref_t<F>&, value_type_of_t<X>...>) {
    detail::report<map_function_cannot_take_one_value_of_each_operand<
        count_c<sizeof...(X)>, value_types<value_type_of_t<X>...>, diagnostic_dims_t<dims_of_t<X>>...>>();
    (void)f;
    ((void)x, ...);
    return invalid_expression{};
  } else {
    return detail::make_elementwise<true>(ops::map_fn<std::remove_cvref_t<F>>{std::forward<F>(f)}, std::forward<X>(x)...);
  }
}

}  // namespace dimsum
