#pragma once
/// \file
/// Shape checks for user code: traits and concepts usable in static_assert
/// and in requires clauses, the compile-time analogue of jaxtyping's
/// `Float[Tensor, "batch posn d_model"]`.
///
///     static_assert(dimsum::has_dims<decltype(q), batch, posn, nheads, d_head>);
///     template <dimsum::tensor_of<batch, posn, d_model> X> auto block(const X& x);

#include <cstddef>
#include <type_traits>

#include <dimsum/core/diagnostics.hpp>
#include <dimsum/core/dim_list.hpp>
#include <dimsum/tensor/expression.hpp>

namespace dimsum {

namespace detail {
template <class L, class... Ds>
constexpr bool names_equal() {
  if constexpr (L::size != sizeof...(Ds)) {
    return false;
  } else {
    constexpr std::array<std::string_view, sizeof...(Ds)> want{Ds::name.view()...};
    for (std::size_t i = 0; i < L::size; ++i)
      if (L::names[i] != want[i]) return false;
    return true;
  }
}
}  // namespace detail

/// E is a named expression whose dims are exactly Ds, in this order (by name).
template <class E, class... Ds>
concept has_dims = named_expression<E> && !is_invalid_v<E> && detail::names_equal<dims_of_t<E>, Ds...>();

/// E is a named expression with the dims Ds in any order.
template <class E, class... Ds>
concept has_dims_unordered =
    named_expression<E> && !is_invalid_v<E> && same_name_set_v<dims_of_t<E>, dim_list<Ds...>>;

/// E is a named expression that has (at least) the dims Ds.
template <class E, class... Ds>
concept has_dim = named_expression<E> && !is_invalid_v<E> && (contains_v<dims_of_t<E>, Ds> && ...);

/// For function signatures: `template <dimsum::tensor_of<batch, posn, d_model> X>`.
template <class E, class... Ds>
concept tensor_of = has_dims<std::remove_cvref_t<E>, Ds...>;

/// E's value type is T and its dims are exactly Ds, in order.
template <class E, class T, class... Ds>
concept typed_tensor_of = tensor_of<E, Ds...> && std::is_same_v<value_type_of_t<E>, T>;

/// In a user function, states the dims it needs with a dimsum message when
/// they differ: `dimsum::require_dims<X, batch, posn, d_model>();`. Returns
/// true when E's dims are exactly Ds in order. (A `tensor_of` constraint
/// says the same but lets the compiler word the error.)
template <class E, class... Ds>
constexpr bool require_dims() {
  if constexpr (has_dims<std::remove_cvref_t<E>, Ds...>) {
    return true;
  } else {
    detail::report<tensor_dims_are_not_the_required_dims<dims<diagnostic_name_t<Ds>...>,
                                                         diagnostic_dims_t<dims_of_t<E>>>>();
    return false;
  }
}

/// The number of dims of a named expression.
template <named_expression E>
inline constexpr std::size_t rank_v = dims_of_t<E>::size;

}  // namespace dimsum
