#pragma once
/// \file
/// `named<Dims...>(xexpr)`: gives names to any xtensor expression (the
/// escape hatch back from xtensor, DESIGN.md §9), and `extent<D>(x)`.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include <xtensor/xutils.hpp>

#include <dimsum/tensor/tensor.hpp>

namespace dimsum {

/// Evaluates the xtensor expression x into a tensor with dims Ds (one per
/// axis, in order). The rank is checked at compile time when x's type fixes
/// it, otherwise at run time; static extents are checked at run time.
template <dimension... Ds, class X>
  requires(!named_expression<X>)
auto named(X&& x) {
  using XT = std::decay_t<X>;
  using T = typename XT::value_type;
  using R = tensor<T, Ds...>;
  constexpr std::size_t fixed_rank = xt::get_rank<XT>::value;
  if constexpr (fixed_rank != SIZE_MAX && fixed_rank != sizeof...(Ds)) {
    detail::report<named_rank_does_not_match_dims<count_c<fixed_rank>, dims<diagnostic_name_t<Ds>...>>>();
    return invalid_expression{};
  } else {
    if (x.dimension() != sizeof...(Ds))
      throw shape_error("named: the expression has " + std::to_string(x.dimension()) + " axes but " +
                        std::to_string(sizeof...(Ds)) + " dims were named");
    typename R::storage_type s(std::forward<X>(x));
    return R::adopt(std::move(s));
  }
}

/// The extent of dim D of a named expression: `extent<posn>(x)`.
template <dimension D, named_expression E>
std::size_t extent(const E& e) {
  using L = dims_of_t<E>;
  if constexpr (!contains_v<L, D>)
    return detail::report<extent_of_a_dim_that_the_tensor_does_not_have<diagnostic_name_t<D>, diagnostic_dims_t<L>>>(),
           std::size_t{0};
  else
    return e.extents()[index_of<L>(D::name.view())];
}

}  // namespace dimsum
