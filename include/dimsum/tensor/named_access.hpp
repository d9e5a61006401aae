#pragma once
/// \file
/// Shared machinery of tensors and views: checking a dim list, extents and
/// indices given by name in any order.

#include <array>
#include <cstddef>
#include <string>
#include <tuple>
#include <type_traits>

#include <dimsum/core/diagnostics.hpp>
#include <dimsum/core/dim_list.hpp>
#include <dimsum/core/errors.hpp>

namespace dimsum::detail {

/// Reports the first duplicate dim of L, if any; true when L is valid.
template <class L>
constexpr auto check_unique_dims() {
  constexpr std::size_t dup = [] {
    for (std::size_t i = 0; i < L::size; ++i)
      for (std::size_t j = i + 1; j < L::size; ++j)
        if (L::names[i] == L::names[j]) return j;
    return npos;
  }();
  if constexpr (dup != npos) {
    report<tensor_has_a_duplicate_dim<diagnostic_name_t<at_t<L, dup>>, diagnostic_dims_t<L>>>();
    return false;
  } else {
    return true;
  }
}

// The first argument dim of Args that L lacks, and the first one named
// twice (npos if none).
template <class L, class... Args>
inline constexpr std::size_t foreign_arg_v = [] {
  using A = dim_list<Args...>;
  for (std::size_t i = 0; i < A::size; ++i)
    if (find_name(L::names, A::names[i]) == npos) return i;
  return npos;
}();
template <class... Args>
inline constexpr std::size_t repeated_arg_v = [] {
  using A = dim_list<Args...>;
  for (std::size_t i = 0; i < A::size; ++i)
    for (std::size_t j = i + 1; j < A::size; ++j)
      if (A::names[i] == A::names[j]) return j;
  return npos;
}();

/// Whether the argument dims Args name dims of L, each at most once: a pure
/// condition; report_named_args reports in the failing branch (a condition
/// that itself fails a static_assert is a second error on clang).
template <class L, class... Args>
inline constexpr bool named_args_ok_v = foreign_arg_v<L, Args...> == npos && repeated_arg_v<Args...> == npos;

template <class L, class... Args>
constexpr void report_named_args() {
  using A = dim_list<Args...>;
  if constexpr (foreign_arg_v<L, Args...> != npos)
    report<argument_is_not_a_dim_of_the_tensor<diagnostic_name_t<at_t<A, foreign_arg_v<L, Args...>>>,
                                               diagnostic_dims_t<L>>>();
  else if constexpr (repeated_arg_v<Args...> != npos)
    report<argument_names_a_dim_twice<diagnostic_name_t<at_t<A, repeated_arg_v<Args...>>>, diagnostic_dims_t<L>>>();
}

/// Complete for dims without duplicates; for a duplicate its base is the
/// checker, so naming `sizeof(unique_dims_checked<L>)` reports once (no
/// constant condition that fails, which clang would count twice).
struct no_duplicate_dim {};
template <class L>
inline constexpr std::size_t duplicate_dim_v = [] {
  for (std::size_t i = 0; i < L::size; ++i)
    for (std::size_t j = i + 1; j < L::size; ++j)
      if (L::names[i] == L::names[j]) return j;
  return npos;
}();
template <class L, std::size_t Dup = duplicate_dim_v<L>>
struct unique_dims_checked : no_duplicate_dim {};
template <class L, std::size_t Dup>
  requires(Dup != npos)
struct unique_dims_checked<L, Dup> : tensor_has_a_duplicate_dim<diagnostic_name_t<at_t<L, Dup>>, diagnostic_dims_t<L>> {};

/// Position in L of the first dim that Args do not name (npos if none);
/// with OnlyDynamic, static dims may be left out.
template <class L, bool OnlyDynamic, class... Args>
constexpr std::size_t first_unnamed() {
  using A = dim_list<Args...>;
  for (std::size_t i = 0; i < L::size; ++i)
    if (find_name(A::names, L::names[i]) == npos && !(OnlyDynamic && L::static_extents[i] != dynamic)) return i;
  return npos;
}

/// Extents in L's order from dims given by name in any order; static dims
/// not given take their static extent. Checks given values against static
/// extents at run time.
template <class L, class... Args>
std::array<std::size_t, L::size> extents_from_args(const Args&... args) {
  std::array<std::size_t, L::size> e{};
  for (std::size_t i = 0; i < L::size; ++i) e[i] = L::static_extents[i] == dynamic ? 0 : L::static_extents[i];
  (
      [&] {
        constexpr std::size_t p = find_name(L::names, Args::name.view());
        if constexpr (at_t<L, p>::is_static) {
          if (args.value != at_t<L, p>::static_extent)
            throw shape_error("tensor constructor: dim '" + std::string(Args::name.view()) +
                              "' is static with extent " + std::to_string(at_t<L, p>::static_extent) +
                              " but was given extent " + std::to_string(args.value));
        }
        e[p] = args.value;
      }(),
      ...);
  return e;
}

/// Offset of the element whose indices are given by name; every index is
/// bounds-checked (release builds too).
template <class L, class... Args>
std::ptrdiff_t offset_from_indices(const std::array<std::size_t, L::size>& ext,
                                   const std::array<std::ptrdiff_t, L::size>& strides, const Args&... idx) {
  std::ptrdiff_t off = 0;
  (
      [&] {
        constexpr std::size_t p = find_name(L::names, Args::name.view());
        if (idx.value >= ext[p])
          throw shape_error("index " + index_string(idx.value) + " is out of range for dim '" +
                            std::string(Args::name.view()) + "' of extent " + std::to_string(ext[p]));
        off += static_cast<std::ptrdiff_t>(idx.value) * strides[p];
      }(),
      ...);
  return off;
}

/// An argument of a tensor's constructor, factories or element access: a
/// dim (an extent or an index, by name) or a plain number. A number is
/// accepted only to be reported (`extents_and_indices_are_given_by_name`),
/// instead of leaving a PyTorch habit, `x_t x(2, 3)` or `x(0, 1, 2)`, with
/// "no matching function".
template <class A>
concept dim_or_number = dimension<A> || std::is_arithmetic_v<A>;

/// Reports the first plain number among Args (call it when there is one).
template <class L, class... Args>
constexpr void report_number_argument() {
  constexpr std::size_t i = [] {
    constexpr bool is_dim[] = {dimension<Args>...};
    std::size_t k = 0;
    while (is_dim[k]) ++k;
    return k;
  }();
  report<extents_and_indices_are_given_by_name<std::tuple_element_t<i, std::tuple<Args...>>, count_c<i>,
                                               diagnostic_dims_t<L>>>();
}

/// Whether element access names every dim of L once (pure condition);
/// report_indices reports in the failing branch.
template <class L, class... Is>
constexpr bool indices_ok() {
  if constexpr (!(dimension<Is> && ...))
    return false;
  else if constexpr (!named_args_ok_v<L, Is...>)
    return false;
  else
    return first_unnamed<L, false, Is...>() == npos;
}
template <class L, class... Is>
constexpr void report_indices() {
  if constexpr (!(dimension<Is> && ...))
    report_number_argument<L, Is...>();
  else if constexpr (!named_args_ok_v<L, Is...>)
    report_named_args<L, Is...>();
  else
    report<element_access_is_missing_an_index_for<diagnostic_name_t<at_t<L, first_unnamed<L, false, Is...>()>>,
                                                  diagnostic_dims_t<L>>>();
}

}  // namespace dimsum::detail
