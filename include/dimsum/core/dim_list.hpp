#pragma once
/// \file
/// `dim_list`: an ordered list of dims and the set algebra on their names
/// (lookup, union, difference, merge of extents). Everything here is
/// constexpr over arrays of names, linear or quadratic in rank with tiny
/// constants, so it costs little compile time.

#include <array>
#include <cstddef>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include <dimsum/core/dim.hpp>

namespace dimsum {

/// An ordered list of dims: the dims of a tensor or expression.
template <dimension... Ds>
struct dim_list {
  static constexpr std::size_t size = sizeof...(Ds);
  static constexpr std::array<std::string_view, sizeof...(Ds)> names{Ds::name.view()...};
  static constexpr std::array<std::size_t, sizeof...(Ds)> static_extents{Ds::static_extent...};
};

/// Diagnostic spelling of a list of dims: `dims<batch, posn, d_model>`.
template <class... Ds>
struct dims {};

namespace detail {

inline constexpr std::size_t npos = static_cast<std::size_t>(-1);

template <std::size_t N>
constexpr std::size_t find_name(const std::array<std::string_view, N>& names, std::string_view n) {
  for (std::size_t i = 0; i < N; ++i)
    if (names[i] == n) return i;
  return npos;
}

template <std::size_t N>
constexpr bool has_duplicate_names(const std::array<std::string_view, N>& names) {
  for (std::size_t i = 0; i < N; ++i)
    for (std::size_t j = i + 1; j < N; ++j)
      if (names[i] == names[j]) return true;
  return false;
}

template <class L, std::size_t I>
struct at;
template <dimension... Ds, std::size_t I>
struct at<dim_list<Ds...>, I> {
  using type = std::tuple_element_t<I, std::tuple<Ds...>>;
};
template <class L, std::size_t I>
using at_t = typename at<L, I>::type;

// A list made of the dims of L at the positions in Idx (a constexpr array).
template <class L, auto Idx, class Seq = std::make_index_sequence<Idx.size()>>
struct select;
template <class L, auto Idx, std::size_t... I>
struct select<L, Idx, std::index_sequence<I...>> {
  using type = dim_list<at_t<L, Idx[I]>...>;
};
template <class L, auto Idx>
using select_t = typename select<L, Idx>::type;

template <class L>
struct diagnostic_list;
template <dimension... Ds>
struct diagnostic_list<dim_list<Ds...>> {
  using type = dims<diagnostic_name_t<Ds>...>;
};
template <class A, class B>
struct concat;
template <class... A, class... B>
struct concat<dim_list<A...>, dim_list<B...>> {
  using type = dim_list<A..., B...>;
};

// Of two dims with the same name, the one that carries more information:
// a static extent beats a dynamic one (mdspan's rule for the result).
template <class A, class B>
using merged_dim_t = std::conditional_t<A::is_static || !B::is_static, A, B>;

}  // namespace detail

/// The diagnostic spelling of a dim_list: `dims<batch, posn, d_model>`.
template <class L>
using diagnostic_dims_t = typename detail::diagnostic_list<L>::type;

/// Position of the dim named `Name` in list L, or detail::npos.
template <class L>
constexpr std::size_t index_of(std::string_view name) {
  return detail::find_name(L::names, name);
}

/// True when list L has a dim with the name of D.
template <class L, dimension D>
inline constexpr bool contains_v = index_of<L>(D::name.view()) != detail::npos;

namespace detail {

// Positions in B of the dims of B whose names are not in A.
template <class A, class B>
constexpr auto missing_from_positions() {
  constexpr std::size_t count = [] {
    std::size_t c = 0;
    for (auto n : B::names)
      if (find_name(A::names, n) == npos) ++c;
    return c;
  }();
  std::array<std::size_t, count> out{};
  std::size_t c = 0;
  for (std::size_t i = 0; i < B::size; ++i)
    if (find_name(A::names, B::names[i]) == npos) out[c++] = i;
  return out;
}

// For each dim of A, the merged dim of A and B (B's copy when more static).
template <class A, class B, class Seq = std::make_index_sequence<A::size>>
struct merge_into;
template <class A, class B, std::size_t... I>
struct merge_into<A, B, std::index_sequence<I...>> {
  template <std::size_t K>
  static auto pick() {
    constexpr std::size_t j = find_name(B::names, A::names[K]);
    if constexpr (j == npos)
      return std::type_identity<at_t<A, K>>{};
    else
      return std::type_identity<merged_dim_t<at_t<A, K>, at_t<B, j>>>{};
  }
  using type = dim_list<typename decltype(pick<I>())::type...>;
};

}  // namespace detail

/// The dims of B that A lacks, in B's order.
template <class A, class B>
using difference_t = detail::select_t<B, detail::missing_from_positions<A, B>()>;

/// A's dims followed by the dims of B that A lacks; shared dims take the more
/// static extent of the two. This is the result order of `a + b`.
template <class A, class B>
using union_t = typename detail::concat<typename detail::merge_into<A, B>::type,
                                        difference_t<A, B>>::type;

/// A's dims without those named in B.
template <class A, class B>
using without_t = difference_t<B, A>;

/// True when A and B hold the same names, in any order.
template <class A, class B>
inline constexpr bool same_name_set_v = [] {
  if (A::size != B::size) return false;
  for (auto n : A::names)
    if (detail::find_name(B::names, n) == detail::npos) return false;
  return true;
}();

/// True when A and B share at least one name.
template <class A, class B>
inline constexpr bool share_a_dim_v = [] {
  for (auto n : A::names)
    if (detail::find_name(B::names, n) != detail::npos) return true;
  return false;
}();

/// For each dim of From, its position in To (npos if absent).
template <class From, class To>
constexpr std::array<std::size_t, From::size> positions_in() {
  std::array<std::size_t, From::size> out{};
  for (std::size_t i = 0; i < From::size; ++i) out[i] = detail::find_name(To::names, From::names[i]);
  return out;
}

}  // namespace dimsum
